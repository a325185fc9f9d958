#include "doctor/memory_findings.h"

#include <algorithm>

#include "planner/memory_model.h"
#include "util/log.h"

namespace parallm::doctor {

std::vector<Finding> memory_findings(const planner::ModelSpec& model, const planner::WeightFormat& weights,
                                     const planner::GpuSpec& gpu, int tp, int pp, int64_t max_model_len) {
  if (max_model_len <= 0) max_model_len = model.config.n_ctx_train > 0 ? model.config.n_ctx_train : 4096;
  planner::Layout layout;
  layout.tp = std::max(tp, 1);
  layout.pp = std::max(pp, 1);
  const planner::MemoryOptions opt;
  const planner::ParamCounts p = planner::count_params(model);
  const planner::DeviceMemory d = planner::device_memory(model, p, weights, 2.0, gpu, layout, opt, max_model_len);
  const double kv_one_seq = d.kv_bytes_per_token * static_cast<double>(max_model_len);

  Finding f;
  f.evidence.push_back(strfmt("%s: %s, usable %s at utilization %.2f", gpu.name.c_str(),
                              format_bytes(d.capacity_bytes).c_str(), format_bytes(d.usable_bytes).c_str(),
                              opt.gpu_memory_utilization));
  f.evidence.push_back(strfmt("weights per device (%s, tp=%d, pp=%d): %s", weights.name.c_str(), layout.tp, layout.pp,
                              format_bytes(d.weights_bytes).c_str()));
  f.evidence.push_back(strfmt("activations %s, overhead %s", format_bytes(d.activation_bytes).c_str(),
                              format_bytes(d.overhead_bytes).c_str()));
  f.evidence.push_back(strfmt("KV for one sequence of %lld tokens (16-bit): %s per device; pool left: %s",
                              (long long)max_model_len, format_bytes(kv_one_seq).c_str(),
                              format_bytes(d.kv_bytes).c_str()));
  if (d.fits) {
    f.severity = Severity::kInfo;
    f.title = strfmt("%s fits %s at tp=%d, pp=%d (KV for %lld tokens)", model.name.c_str(), gpu.name.c_str(), layout.tp,
                     layout.pp, (long long)d.kv_capacity_tokens);
    return {f};
  }
  f.severity = Severity::kError;
  f.title = d.weights_fit ? strfmt("KV cache for one %lld-token sequence does not fit on %s", (long long)max_model_len,
                                   gpu.name.c_str())
                          : strfmt("%s weights do not fit on %s at tp=%d, pp=%d", model.name.c_str(), gpu.name.c_str(),
                                   layout.tp, layout.pp);
  f.fixes = {
      "load the weights in a smaller precision (bf16 → fp8 → int4; parallm: --dtype q8_0 / q4_0)",
      d.weights_fit && d.kv_capacity_tokens > 0
          ? strfmt("lower --max-model-len to at most %lld (what the KV pool holds)", (long long)d.kv_capacity_tokens)
          : std::string("lower --max-model-len"),
      "raise the memory-utilization cap (--memory-utilization / --gpu-memory-utilization)",
      "lower --max-num-seqs and --max-num-batched-tokens",
      "only then: more --tp / --pp, or a device with more memory (see `parallm plan`)"};
  return {f};
}

}  // namespace parallm::doctor
