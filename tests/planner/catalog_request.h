// A PlanRequest for a catalog model on catalog devices, as the planner's CLI
// builds it (1024 prompt / 256 output tokens): the starting point the planner
// tests vary.
#pragma once
#include "planner/hardware.h"
#include "planner/model_catalog.h"
#include "planner/plan.h"

namespace parallm::planner {

inline PlanRequest catalog_request(const char* model, const char* weights, const char* gpu, int gpus,
                                   const char* interconnect = "", int nodes = 1) {
  PlanRequest r;
  r.model = catalog_model(model);
  r.model_ref = r.model.hf_repo;
  r.weights = parse_weight_format(weights);
  r.gpu = catalog_gpu(gpu);
  r.fabric = fabric_from_interconnect(r.gpu, interconnect, gpus, nodes);
  r.workload.input_len = 1024;
  r.workload.output_len = 256;
  return r;
}

}  // namespace parallm::planner
