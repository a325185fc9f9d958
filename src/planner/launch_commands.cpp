// Ready-to-run launch lines for the chosen layout, one set per serving stack
// (vLLM, SGLang, TensorRT-LLM, llama.cpp, parallm; one file each:
// launch_vllm.cpp, launch_sglang.cpp, launch_other.cpp). This file gathers
// what they share: the model reference, --max-num-seqs, the nodes and the GPU
// groups of the replicas. The flags are those of each tool's CLI at the
// versions named in docs/plan.md; tests/planner/launch_lines_test.cpp checks
// every printed flag against tests/planner/data/cli_flags/<tool>.txt.
#include <algorithm>
#include <filesystem>

#include "planner/launch_engines.h"
#include "util/log.h"

namespace parallm::planner {

std::string flag(const char* name, const std::string& value) { return std::string(" ") + name + " " + value; }
std::string flag(const char* name, long long value) { return std::string(" ") + name + " " + std::to_string(value); }

std::string hf_dtype_flag(const std::string& weights) {
  if (weights == "fp16") return flag("--dtype", std::string("float16"));
  if (weights == "fp32") return flag("--dtype", std::string("float32"));
  return "";
}

std::string replica_where(const LaunchContext& c, int replica) {
  const GpuGroup& g = c.groups[static_cast<size_t>(replica)];
  return strfmt("replica %d (node %d)", replica, g.node);
}

std::string device_prefix(const LaunchContext& c) {
  if (c.nodes_used > 1) return "";
  std::vector<int> order;
  for (const auto& g : c.groups) order.insert(order.end(), g.gpus.begin(), g.gpus.end());
  bool identity = true;
  for (size_t i = 0; i < order.size(); ++i) identity = identity && order[i] == static_cast<int>(i);
  return identity ? "" : "CUDA_VISIBLE_DEVICES=" + gpu_list(order) + " ";
}

namespace {

// The summary string of an engine: its first serve command, without the
// CUDA_VISIBLE_DEVICES of a per-replica line (the command of one replica;
// the device groups are in the EngineLaunch lines).
std::string first_serve_line(const EngineLaunch& e, const char* program) {
  for (const auto& l : e.lines) {
    const size_t at = l.command.find(program);
    if (at == std::string::npos) continue;
    const std::string env = "CUDA_VISIBLE_DEVICES=";
    if (l.command.compare(0, env.size(), env) == 0) return l.command.substr(l.command.find(' ') + 1);
    return l.command;
  }
  return "";
}

}  // namespace

LaunchCommands launch_commands(const Plan& plan, const Candidate& cand) {
  const PlanRequest& r = plan.request;
  LaunchContext c;
  c.plan = &plan;
  c.layout = cand.layout;
  c.model = !r.model_ref.empty() ? r.model_ref : (!r.model.hf_repo.empty() ? r.model.hf_repo : r.model.name);
  std::error_code ec;
  c.local = std::filesystem::exists(c.model, ec);
  c.gguf_file = c.local && std::filesystem::is_regular_file(c.model, ec) && c.model.size() > 5 &&
                c.model.compare(c.model.size() - 5, 5, ".gguf") == 0;
  c.repos = catalog_quantized_repos(c.local ? r.model.name : c.model);
  c.name = r.model.name;
  if (c.name.find('/') != std::string::npos) c.name = std::filesystem::path(c.name).filename().string();
  c.max_model_len = static_cast<long long>(plan.max_model_len);
  // Sequences per replica: the SLO capacity when SLOs are given, else the
  // scheduler limit; never more than the KV cache holds. A layout beyond the
  // devices given (the "doesn't fit" recommendation) has no computed
  // max_concurrency_kv: take it from its KV capacity instead of printing 1.
  const int64_t per_seq = std::max<int64_t>(1, r.workload.input_len + r.workload.output_len);
  int64_t kv_seqs = cand.max_concurrency_kv > 0 ? cand.max_concurrency_kv : cand.memory.kv_capacity_tokens / per_seq;
  int64_t seqs = r.memory.max_num_seqs;
  const bool has_slo = r.workload.ttft_slo_ms > 0 || r.workload.tpot_slo_ms > 0;
  if (has_slo && cand.max_concurrency_slo > 0) seqs = std::min(seqs, cand.max_concurrency_slo);
  if (kv_seqs > 0) seqs = std::min(seqs, kv_seqs);
  c.max_num_seqs = std::max<long long>(1, static_cast<long long>(seqs));
  c.gpus_per_node = std::max(1, r.fabric.gpus_per_node);
  c.attn_dp_ep = cand.layout.ep > cand.layout.tp && cand.layout.dp > 1;
  c.group_size = std::max(1, cand.layout.tp * cand.layout.pp * (c.attn_dp_ep ? cand.layout.dp : 1));
  c.replica_spans_nodes = c.group_size > c.gpus_per_node;
  c.nodes_used = std::max(1, (cand.layout.gpus() + c.gpus_per_node - 1) / c.gpus_per_node);
  c.groups = c.attn_dp_ep ? gpu_groups(r.fabric, c.group_size, 1)
                          : gpu_groups(r.fabric, c.group_size, std::max(1, cand.layout.dp), cand.layout.tp);
  c.kv_8bit = r.kv_elem_bytes <= 1.0625 && r.kv_elem_bytes > 0.6;  // fp8/int8 (1 B) or q8_0 (1.0625 B)
  c.kv_4bit = r.kv_elem_bytes <= 0.6;

  LaunchCommands cmd;
  cmd.vllm_all = launch_vllm(c);
  cmd.sglang_all = launch_sglang(c);
  cmd.trtllm_all = launch_trtllm(c);
  cmd.llamacpp_all = launch_llamacpp(c);
  cmd.parallm_all = launch_parallm(c);
  cmd.vllm = first_serve_line(cmd.vllm_all, "vllm serve");
  cmd.sglang = first_serve_line(cmd.sglang_all, "sglang.launch_server");
  cmd.trtllm = first_serve_line(cmd.trtllm_all, "trtllm-serve");
  cmd.llamacpp = first_serve_line(cmd.llamacpp_all, "llama-server");
  cmd.parallm = first_serve_line(cmd.parallm_all, "parallm serve");
  return cmd;
}

}  // namespace parallm::planner
