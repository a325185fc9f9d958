// Measured limits of the local machine, stored as JSON so that `parallm plan
// --local` can predict this machine without re-measuring. The planner only
// reads numbers from here; the measurement itself (kernels/cpu/roofline.h,
// the engine's cpu::matmul per weight dtype, comm/) runs in apps/cmd_plan.cpp.
//
// Efficiencies: the machine's limits (streaming bandwidth, FMA peak) are what
// the hardware can do; the engine reaches a fraction of them that depends on
// the weight dtype (Q4_0's mat-vec is bound by unpacking, not by bytes).
// --calibrate measures that fraction per dtype on the engine's own kernels;
// the scalar bw_eff / flops_eff serve dtypes it did not measure and files
// written before per-dtype factors existed.
#pragma once
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "planner/hardware.h"
#include "planner/model_profile.h"
#include "planner/perf_model.h"

namespace parallm::planner {

// The engine's matmul on one weight dtype, relative to the machine's limits.
struct KernelEfficiency {
  double bw_eff = 0;       // decode (1 token): weight bytes/s achieved / mem_bw_gbps
  double flops_eff = 0;    // prefill (128 tokens): FLOP/s achieved / fma_gflops
  double decode_gbps = 0;  // informational: the achieved figures behind the two ratios
  double prefill_gflops = 0;
  // GFLOP/s of the model's matmul calls at each batch size (tokens, ascending;
  // 1 = the decode pass). On a CPU the small batches of batched decode are
  // neither bandwidth- nor peak-bound: the mat-vec kernels unpack the weights
  // once per token (llama-110m q8_0 on a 2-core Xeon: 1, 4, 128 tokens at
  // ~50, ~175, ~650 GFLOP/s), so one flops_eff cannot price them. Empty in older files.
  std::vector<std::pair<double, double>> gflops_by_tokens;
};

struct Calibration {
  std::string device = "cpu";  // catalog name or "cpu"
  int threads = 0;
  double mem_bw_gbps = 0;           // measured streaming read bandwidth
  double fma_gflops = 0;            // measured FP32 FMA peak
  double allreduce_latency_us = 0;  // alpha: small-message all-reduce
  double allreduce_gbps = 0;        // beta: large-message algorithm bandwidth
  int allreduce_ranks = 0;
  // Fallback fractions of the measured limits, for dtypes without a `kernels`
  // entry. NOTE: measured with `parallm bench-model` on llama-110m
  // (docs/PERFORMANCE.md): decode reaches 0.75-0.95 of the probe's bandwidth,
  // prefill 0.61-0.73 of its FMA peak; the planner uses the middle of each range.
  double bw_eff = 0.8;
  double flops_eff = 0.68;
  // Per forward and layer, what is not a weight matmul (attention's parallel
  // region, norms, rope, residual adds); --calibrate measures it.
  double layer_overhead_us = 20;
  // Attention's efficiencies (PerfConstants::attn_*), 0 = not measured.
  double attn_bw_eff = 0;     // decode: KV bytes/s read / mem_bw_gbps
  double attn_flops_eff = 0;  // prefill: causal attention FLOP/s / fma_gflops
  // Keyed by WeightFormat name: fp32, fp16, bf16, q8_0, q4_0.
  std::map<std::string, KernelEfficiency> kernels;
  // `plan --calibrate --model FILE`: that model's own step times (model_path
  // empty when none was profiled).
  ModelProfile model_profile;
  std::string measured_at;  // ISO time
};

std::string calibration_to_json(const Calibration& c);
// Throws InputError on malformed content. Files without "kernels" (older
// versions) load with an empty map.
Calibration calibration_from_json(const std::string& text, const std::string& origin);
Calibration load_calibration(const std::string& path);
void save_calibration(const Calibration& c, const std::string& path);  // creates directories
// ~/.cache/parallm/calibration.json (XDG_CACHE_HOME respected).
std::string default_calibration_path();

// The `cpu` device with the measured limits and `memory_bytes` of RAM, and the
// matching efficiency constants.
GpuSpec calibrated_cpu(const Calibration& c, double memory_bytes);
// Efficiencies for weights of `weights.name`: the measured kernel entry of that
// dtype when there is one, else the scalar fallbacks.
PerfConstants calibrated_constants(const Calibration& c, const WeightFormat& weights);
// The entry used for `weights`, or nullptr when the fallbacks apply.
const KernelEfficiency* kernel_efficiency(const Calibration& c, const WeightFormat& weights);
// The profile of the model file at `path` when the calibration holds one for
// that file as it is now (same absolute path and size), else nullptr.
const ModelProfile* profile_for(const Calibration& c, const std::string& path);

}  // namespace parallm::planner
