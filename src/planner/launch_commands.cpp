// Ready-to-run launch lines for the chosen layout, one per serving stack.
// Flags follow each project's documented CLI: vLLM `vllm serve`, SGLang
// `python -m sglang.launch_server`, TensorRT-LLM `trtllm-serve`, llama.cpp
// `llama-server`, and parallm's own `parallm serve`.
#include <cmath>

#include "planner/plan.h"
#include "util/log.h"

namespace parallm::planner {

LaunchCommands launch_commands(const Plan& plan, const Candidate& c) {
  const PlanRequest& r = plan.request;
  const Layout& l = c.layout;
  const std::string model = !r.model_ref.empty() ? r.model_ref : (!r.model.hf_repo.empty() ? r.model.hf_repo : r.model.name);
  const long long len = static_cast<long long>(plan.max_model_len);
  const long long seqs = std::max<long long>(1, std::min<long long>(r.memory.max_num_seqs,
                                                 c.max_concurrency_kv > 0 ? c.max_concurrency_kv : 1));
  LaunchCommands cmd;
  cmd.parallm = strfmt("parallm serve --model %s --tp %d --pp %d --dp %d", model.c_str(), l.tp, l.pp, l.dp);
  if (l.ep > 1) cmd.parallm += strfmt(" --ep %d", l.ep);
  cmd.parallm += strfmt(" --max-model-len %lld --max-num-seqs %lld", len, seqs);
  // An 8-bit (or smaller) KV cache was planned: parallm's smallest is q8_0
  // (1.06 bytes a value), so a 4-bit plan's capacity is not reached with it.
  if (r.kv_elem_bytes <= 1.0625) cmd.parallm += " --kv-dtype q8_0";

  cmd.vllm = strfmt("vllm serve %s --tensor-parallel-size %d --pipeline-parallel-size %d", model.c_str(), l.tp, l.pp);
  if (l.dp > 1) cmd.vllm += strfmt(" --data-parallel-size %d", l.dp);
  if (l.ep > 1) cmd.vllm += " --enable-expert-parallel";
  cmd.vllm += strfmt(" --gpu-memory-utilization %.2f --max-model-len %lld --max-num-seqs %lld",
                     r.memory.gpu_memory_utilization, len, seqs);
  if (r.kv_elem_bytes <= 1.0) cmd.vllm += " --kv-cache-dtype fp8";

  cmd.sglang = strfmt("python -m sglang.launch_server --model-path %s --tp %d --dp %d", model.c_str(), l.tp, l.dp);
  if (l.ep > 1) cmd.sglang += strfmt(" --ep-size %d", l.ep);
  cmd.sglang += strfmt(" --mem-fraction-static %.2f --context-length %lld --max-running-requests %lld",
                       r.memory.gpu_memory_utilization - 0.05, len, seqs);

  cmd.trtllm = strfmt("trtllm-serve %s --tp_size %d --pp_size %d", model.c_str(), l.tp, l.pp);
  if (l.ep > 1) cmd.trtllm += strfmt(" --ep_size %d", l.ep);
  cmd.trtllm += strfmt(" --max_batch_size %lld --max_seq_len %lld", seqs, len);
  if (l.dp > 1) cmd.trtllm += strfmt("  # one server per replica: %d replicas behind a load balancer", l.dp);

  // llama.cpp: row split is its tensor-parallel-like mode, layer split its pipeline.
  const int devs = l.tp * l.pp;
  std::string split;
  for (int i = 0; i < devs; ++i) split += (i ? "," : "") + std::string("1");
  cmd.llamacpp = strfmt("llama-server -m %s -ngl 999", model.c_str());
  if (devs > 1)
    cmd.llamacpp += strfmt(" --split-mode %s --tensor-split %s", l.tp > 1 ? "row" : "layer", split.c_str());
  cmd.llamacpp += strfmt(" -c %lld -np %lld", len * seqs, seqs);
  if (l.dp > 1) cmd.llamacpp += strfmt("  # one server per replica (CUDA_VISIBLE_DEVICES), %d replicas", l.dp);
  return cmd;
}

}  // namespace parallm::planner
