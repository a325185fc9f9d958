// Shared inputs of the simulator tests: a catalog model on a catalog device,
// built the way `parallm simulate` builds them.
#pragma once
#include "planner/model_catalog.h"
#include "planner/model_source.h"
#include "sim/simulation.h"

namespace parallm::sim::testing {

inline SimulationSpec spec_for(const std::string& model, const std::string& gpu) {
  SimulationSpec s;
  s.request.model = planner::load_model_spec(model);
  s.request.weights = planner::parse_weight_format("bf16");
  s.request.gpu = planner::catalog_gpu(gpu);
  s.request.fabric = planner::fabric_from_interconnect(s.request.gpu, "", 8, 1);
  return s;
}

}  // namespace parallm::sim::testing
