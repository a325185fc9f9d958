// Measured limits of the local machine, stored as JSON so that `parallm plan
// --local` can predict this machine without re-measuring. The planner only
// reads numbers from here; the measurement itself (kernels/cpu/roofline.h,
// comm/) runs in apps/cmd_plan.cpp.
#pragma once
#include <string>

#include "planner/hardware.h"
#include "planner/perf_model.h"

namespace parallm::planner {

struct Calibration {
  std::string device = "cpu";     // catalog name or "cpu"
  int threads = 0;
  double mem_bw_gbps = 0;         // measured streaming read bandwidth
  double fma_gflops = 0;          // measured FP32 FMA peak
  double allreduce_latency_us = 0;   // alpha: small-message all-reduce
  double allreduce_gbps = 0;         // beta: large-message algorithm bandwidth
  int allreduce_ranks = 0;
  // Fractions of the measured limits the engine reaches (see docs/plan.md).
  // NOTE: measured with `parallm bench-model` on llama-110m (docs/PERFORMANCE.md):
  // decode reaches 0.75-0.95 of the probe's bandwidth, prefill 0.61-0.73 of its
  // FMA peak; the planner uses the middle of each range.
  double bw_eff = 0.8;
  double flops_eff = 0.68;
  double layer_overhead_us = 20;
  std::string measured_at;        // ISO time
};

std::string calibration_to_json(const Calibration& c);
// Throws InputError on malformed content.
Calibration calibration_from_json(const std::string& text, const std::string& origin);
Calibration load_calibration(const std::string& path);
void save_calibration(const Calibration& c, const std::string& path);  // creates directories
// ~/.cache/parallm/calibration.json (XDG_CACHE_HOME respected).
std::string default_calibration_path();

// The `cpu` device with the measured limits and `memory_bytes` of RAM, and the
// matching efficiency constants.
GpuSpec calibrated_cpu(const Calibration& c, double memory_bytes);
PerfConstants calibrated_constants(const Calibration& c);

}  // namespace parallm::planner
