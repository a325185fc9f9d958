// `plan`'s check of its claimed SLO capacity: the planner's closed-form model
// (perf_model.h) says one replica of a candidate holds max_concurrency_slo
// streams (or at_capacity.requests_per_s) within the SLOs; this simulates one
// replica at exactly that load with the real scheduler and reports whether
// P95 TTFT and P95 TPOT hold. Direction: sim depends on planner, so the call
// sits in apps/cmd_plan.cpp, after make_plan(), never inside the planner.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "planner/plan.h"

namespace parallm::sim {

struct SloCheck {
  planner::Layout layout;
  bool open_loop = false;  // true: Poisson at `load` requests/s; false: `load` streams
  double load = 0;         // per replica
  double p95_ttft_ms = 0, p95_tpot_ms = 0;
  double predicted_ttft_ms = 0, predicted_tpot_ms = 0;  // the planner's at_capacity (means)
  int64_t preemptions = 0;
  bool ttft_ok = true, tpot_ok = true;
  bool holds() const { return ttft_ok && tpot_ok; }
};

// Checks the first `top_n` fitting candidates with an SLO capacity; empty when
// the plan has no SLO. `num_requests` per check (0: 8 x the load, 200..4000).
std::vector<SloCheck> check_slo_capacity(const planner::Plan& plan, int top_n, int64_t num_requests = 0);

std::string slo_checks_text(const planner::Plan& plan, const std::vector<SloCheck>& checks);
nlohmann::json slo_checks_json(const std::vector<SloCheck>& checks);

}  // namespace parallm::sim
