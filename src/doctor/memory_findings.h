// Memory arithmetic: weights + KV for one max-model-len sequence (+ activations
// and overhead) against the device, through the planner's memory model.
#pragma once
#include <cstdint>
#include <vector>

#include "doctor/finding.h"
#include "planner/hardware.h"
#include "planner/model_spec.h"

namespace parallm::doctor {

// max_model_len <= 0: the model's trained context (4096 when unknown).
std::vector<Finding> memory_findings(const planner::ModelSpec& model, const planner::WeightFormat& weights,
                                     const planner::GpuSpec& gpu, int tp, int pp, int64_t max_model_len);

}  // namespace parallm::doctor
