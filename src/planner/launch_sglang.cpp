// SGLang (`python -m sglang.launch_server`, flags of
// python/sglang/srt/server_args.py at the version in docs/plan.md).
// Parallelism: --tp-size, --pp-size, --dp-size, --ep-size. Quantization:
// --quantization fp8 (online) or an FP8 checkpoint, w8a8_int8 with a W8A8
// checkpoint, awq with an AWQ checkpoint (bitsandbytes in flight otherwise);
// --kv-cache-dtype fp8_e4m3. Multi-node: a replica larger than a node runs
// one command per node with --nnodes / --node-rank / --dist-init-addr;
// replicas that fit a node run one server per node with the node's share of
// --dp-size, behind a load balancer (SGLang's router or any HTTP balancer).
#include "planner/launch_engines.h"
#include "util/log.h"

namespace parallm::planner {

namespace {

std::string sglang_model_and_quant(const LaunchContext& c, std::string* note) {
  const std::string& w = c.plan->request.weights.name;
  auto path = [](const std::string& m) { return flag("--model-path", m); };
  if (w == "fp8") {
    if (!c.local && !c.repos.fp8.empty()) return path(c.repos.fp8);
    return path(c.model) + flag("--quantization", std::string("fp8"));
  }
  if (w == "int8") {
    if (!c.local && !c.repos.w8a8_int8.empty())
      return path(c.repos.w8a8_int8) + flag("--quantization", std::string("w8a8_int8"));
    *note = "int8: no W8A8 checkpoint of this model is known; make ./" + c.name + "-w8a8 with llm-compressor.";
    return path("./" + c.name + "-w8a8") + flag("--quantization", std::string("w8a8_int8"));
  }
  if (w == "int4") {
    if (!c.local && !c.repos.awq_int4.empty())
      return path(c.repos.awq_int4) + flag("--quantization", std::string("awq"));
    *note = "int4: no AWQ checkpoint of this model is known; the line quantizes in flight with bitsandbytes (NF4).";
    return path(c.model) + flag("--quantization", std::string("bitsandbytes"));
  }
  if (w.rfind("q", 0) == 0) {
    const std::string file = c.gguf_file ? c.model : "./" + c.name + "-" + w + ".gguf";
    if (!c.gguf_file) *note = "GGUF weights: " + file + " stands for the model converted to " + w + ".";
    return path(file) + flag("--load-format", std::string("gguf")) + flag("--quantization", std::string("gguf"));
  }
  return path(c.model) + hf_dtype_flag(w);
}

}  // namespace

EngineLaunch launch_sglang(const LaunchContext& c) {
  const PlanRequest& r = c.plan->request;
  const Layout& l = c.layout;
  EngineLaunch e;
  std::string head = "python -m sglang.launch_server" + sglang_model_and_quant(c, &e.note);
  std::string par;
  if (c.attn_dp_ep) {
    // DP attention: --tp-size is all the GPUs of the replica, --dp-size the
    // attention groups among them, the experts over --ep-size.
    par = flag("--tp-size", static_cast<long long>(l.tp * l.dp)) + flag("--dp-size", static_cast<long long>(l.dp)) +
          " --enable-dp-attention" + flag("--ep-size", static_cast<long long>(l.ep));
    if (l.pp > 1) par += flag("--pp-size", static_cast<long long>(l.pp));
  } else {
    par = flag("--tp-size", static_cast<long long>(l.tp));
    if (l.pp > 1) par += flag("--pp-size", static_cast<long long>(l.pp));
    if (l.ep > 1) par += flag("--ep-size", static_cast<long long>(l.ep));
  }
  // SGLang's static fraction holds weights and KV pool; leave the activations
  // and CUDA graphs the 0.05 that vLLM's utilization cap includes.
  std::string tail;
  if (c.kv_8bit || c.kv_4bit) tail += flag("--kv-cache-dtype", std::string("fp8_e4m3"));
  tail += flag("--mem-fraction-static", strfmt("%.2f", r.memory.gpu_memory_utilization - 0.05));
  tail += flag("--context-length", c.max_model_len);
  tail += flag("--max-running-requests", c.max_num_seqs);
  if (c.nodes_used <= 1) {
    e.lines.push_back({"", device_prefix(c) + head + par +
                               (l.dp > 1 && !c.attn_dp_ep ? flag("--dp-size", static_cast<long long>(l.dp)) : "") +
                               tail});
    return e;
  }
  if (c.attn_dp_ep) {
    // One replica over all the nodes: the same command on each, its rank.
    for (int k = 0; k < c.nodes_used; ++k)
      e.lines.push_back({strfmt("node %d", k), head + par + tail +
                                                   flag("--nnodes", static_cast<long long>(c.nodes_used)) +
                                                   flag("--node-rank", static_cast<long long>(k)) +
                                                   flag("--dist-init-addr", std::string("$HEAD_IP:50000"))});
    e.note += std::string(e.note.empty() ? "" : " ") + "Set HEAD_IP to node 0's address on every node.";
    return e;
  }
  if (c.replica_spans_nodes) {
    const int per_replica = (c.group_size + c.gpus_per_node - 1) / c.gpus_per_node;
    for (int rep = 0; rep < l.dp; ++rep)
      for (int k = 0; k < per_replica; ++k) {
        const std::string addr = l.dp > 1 ? strfmt("$HEAD_IP_%d:50000", rep) : std::string("$HEAD_IP:50000");
        e.lines.push_back({l.dp > 1 ? strfmt("replica %d, node %d", rep, rep * per_replica + k) : strfmt("node %d", k),
                           head + par + tail + flag("--nnodes", static_cast<long long>(per_replica)) +
                               flag("--node-rank", static_cast<long long>(k)) + flag("--dist-init-addr", addr)});
      }
    e.note +=
        std::string(e.note.empty() ? "" : " ") +
        (l.dp > 1
             ? "Set HEAD_IP_<r> to the first node of replica r; put a load balancer over the replicas' node-0 servers."
             : "Set HEAD_IP to node 0's address on every node.");
    return e;
  }
  const int local = std::max(1, c.gpus_per_node / c.group_size);
  for (int n = 0; n < c.nodes_used; ++n) {
    const int here = std::min(local, l.dp - n * local);
    if (here <= 0) break;
    e.lines.push_back(
        {strfmt("node %d", n), head + par + (here > 1 ? flag("--dp-size", static_cast<long long>(here)) : "") + tail});
  }
  e.note += std::string(e.note.empty() ? "" : " ") + "One server per node; put a load balancer over them.";
  return e;
}

}  // namespace parallm::planner
