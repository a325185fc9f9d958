// `parallm plan --calibrate`'s measurements of this machine: bandwidth and
// FMA peak (kernels/cpu roofline), the engine's own matmul per weight type,
// one real engine forward (per-layer cost, attention) and the local
// all-reduce. cmd_plan.cpp saves and prints the result.
#pragma once
#include <cstdint>

#include "planner/calibration.h"

namespace parallm {

// Tokens of the prefill probes (the matmul and forward measurements).
inline constexpr int64_t kProbePrefillTokens = 128;

planner::Calibration measure_this_machine(int threads);

}  // namespace parallm
