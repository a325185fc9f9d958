// vLLM (`vllm serve`, flags of vllm/engine/arg_utils.py at the version in
// docs/plan.md). Quantization: an FP8 checkpoint or online `--quantization
// fp8`; int8 a W8A8 checkpoint; int4 an AWQ checkpoint (`--quantization awq`)
// or, when none is known, in-flight 4-bit `--quantization bitsandbytes`; GGUF
// types a .gguf file (experimental in vLLM) with the HF tokenizer. Multi-node:
// a replica larger than a node runs on a Ray cluster (`ray start` on every
// node, `vllm serve --distributed-executor-backend ray` on the head); replicas
// of one node each spread over nodes with vLLM's data-parallel flags (head
// node plus `--headless` nodes with their start rank).
#include "planner/launch_engines.h"
#include "util/log.h"

namespace parallm::planner {

namespace {

// Model argument and quantization flags; *note gets what a placeholder means.
std::string vllm_model_and_quant(const LaunchContext& c, std::string* note) {
  const std::string& w = c.plan->request.weights.name;
  if (w == "fp8") {
    if (!c.local && !c.repos.fp8.empty()) return c.repos.fp8;                     // the checkpoint says fp8
    return c.model + flag("--quantization", c.plan->request.weights.vllm_quant);  // online dynamic FP8
  }
  if (w == "int8") {
    const std::string q = flag("--quantization", c.plan->request.weights.vllm_quant);  // compressed-tensors
    if (!c.local && !c.repos.w8a8_int8.empty()) return c.repos.w8a8_int8 + q;
    *note = "int8: no W8A8 checkpoint of this model is known; make ./" + c.name +
            "-w8a8 with llm-compressor (W8A8 int8) and serve that path.";
    return "./" + c.name + "-w8a8" + q;
  }
  if (w == "int4") {
    if (!c.local && !c.repos.awq_int4.empty())
      return c.repos.awq_int4 + flag("--quantization", c.plan->request.weights.vllm_quant);
    *note =
        "int4: no AWQ checkpoint of this model is known; the line quantizes in flight with bitsandbytes "
        "(NF4, about 4.5 bits a weight instead of AWQ's 4.25).";
    return c.model + flag("--quantization", std::string("bitsandbytes"));
  }
  if (w.rfind("q", 0) == 0) {  // a GGUF type
    const std::string file = c.gguf_file ? c.model : "./" + c.name + "-" + w + ".gguf";
    if (!c.gguf_file) *note = "GGUF weights: " + file + " stands for the model converted to " + w + ".";
    const std::string tok =
        c.plan->request.model.hf_repo.empty() ? "" : flag("--tokenizer", c.plan->request.model.hf_repo);
    return file + tok + flag("--quantization", std::string("gguf"));
  }
  return c.model + hf_dtype_flag(w);
}

}  // namespace

EngineLaunch launch_vllm(const LaunchContext& c) {
  const PlanRequest& r = c.plan->request;
  const Layout& l = c.layout;
  EngineLaunch e;
  std::string base = "vllm serve " + vllm_model_and_quant(c, &e.note);
  base += flag("--tensor-parallel-size", static_cast<long long>(l.tp));
  base += flag("--pipeline-parallel-size", static_cast<long long>(l.pp));
  if (l.ep > 1) base += " --enable-expert-parallel";
  if (c.kv_8bit || c.kv_4bit) base += flag("--kv-cache-dtype", std::string("fp8"));
  base += flag("--gpu-memory-utilization", strfmt("%.2f", r.memory.gpu_memory_utilization));
  base += flag("--max-model-len", c.max_model_len);
  base += flag("--max-num-seqs", c.max_num_seqs);
  if (c.kv_4bit)
    e.note +=
        std::string(e.note.empty() ? "" : " ") + "vLLM's smallest KV cache here is fp8 (1 byte a value), not 4-bit.";
  if (c.nodes_used <= 1) {
    e.lines.push_back(
        {"", device_prefix(c) + base + (l.dp > 1 ? flag("--data-parallel-size", static_cast<long long>(l.dp)) : "")});
    return e;
  }
  const std::string head = "$HEAD_IP";
  e.note += std::string(e.note.empty() ? "" : " ") + "Set HEAD_IP to node 0's address on every node.";
  if (c.replica_spans_nodes && !c.attn_dp_ep) {
    // A replica spans nodes: one Ray cluster over all of them, one vllm serve on the head.
    e.lines.push_back({"node 0", "ray start --head --port 6379"});
    for (int n = 1; n < c.nodes_used; ++n)
      e.lines.push_back({strfmt("node %d", n), "ray start --address " + head + ":6379"});
    std::string cmd = base + flag("--distributed-executor-backend", std::string("ray"));
    if (l.dp > 1)
      cmd += flag("--data-parallel-size", static_cast<long long>(l.dp)) +
             flag("--data-parallel-backend", std::string("ray"));
    e.lines.push_back({"node 0", cmd});
    return e;
  }
  // Whole replicas per node; data parallel over nodes (also attention DP +
  // EP over nodes: the DP ranks of one node, the experts over all of them).
  const int local = std::max(1, c.gpus_per_node / std::max(1, l.tp * l.pp));
  const std::string dp = flag("--data-parallel-size", static_cast<long long>(l.dp)) +
                         flag("--data-parallel-address", head) + flag("--data-parallel-rpc-port", 13345LL);
  for (int n = 0; n < c.nodes_used; ++n) {
    const int here = std::min(local, l.dp - n * local);
    if (here <= 0) break;
    std::string cmd = base + dp + flag("--data-parallel-size-local", static_cast<long long>(here));
    if (n > 0) cmd += " --headless" + flag("--data-parallel-start-rank", static_cast<long long>(n * local));
    e.lines.push_back({strfmt("node %d", n), cmd});
  }
  return e;
}

}  // namespace parallm::planner
