// One replica's cost model and KV pool for a layout, from the planner's own
// inputs (planner::PlanRequest) so that `simulate` and `plan` price a layout
// the same way: the device memory model gives the KV pool (blocks of
// block_size tokens), the perf model the step times.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "planner/plan.h"

namespace parallm::sim {

// "tp=2,pp=1,dp=500" (ep= for MoE); missing keys are 1. InputError on bad text.
planner::Layout parse_layout(const std::string& text);
std::string layout_text(const planner::Layout& l);  // "tp=2,pp=1,dp=500"

struct ReplicaModel {
  std::unique_ptr<planner::ModelSpec> model;  // owned: perf.model points here
  planner::PerfInputs perf;
  planner::DeviceMemory memory;
  int64_t block_size = 16;
  int64_t n_kv_blocks = 0;
  int64_t max_model_len = 0;
};

// Throws InputError when the layout does not divide the model's heads, layers
// or experts, needs more devices than the fabric has in a node for tp, or
// when the weights (or one max_model_len sequence of KV) do not fit.
ReplicaModel replica_model(const planner::PlanRequest& r, const planner::Layout& layout, int64_t max_model_len,
                           int64_t block_size);

}  // namespace parallm::sim
