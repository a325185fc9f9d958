// Ranking of the evaluated candidates. Tiers first (fits; has SLO capacity;
// carries the workload within the SLOs), then the objective:
//   auto with a workload  cost per million output tokens at that workload: the
//                         devices the layout's replicas need for it (peak x
//                         headroom / SLO capacity per replica) over the tokens
//                         the workload draws from them
//   auto without one,     cost per million output tokens at full SLO capacity
//   or cost
//   latency               P95 TPOT at the workload, then P95 TTFT
//   throughput            output tokens/s at full SLO capacity
// NOTE: the playbook prefers small replicas (one device when the model fits)
// for their simplicity and isolation; under the cost objectives a layout must
// be more than 10% cheaper per doubling of devices per replica to win.
// Applied as a factor on cost so the order stays a strict weak ordering.
#include <algorithm>
#include <cmath>

#include "planner/plan.h"

namespace parallm::planner {

namespace {

int tier(const Candidate& c) {
  if (!c.fits) return 4;
  if (c.max_concurrency_slo <= 0) return 3;
  if (!c.meets_load) return c.meets_slo ? 1 : 2;
  return 0;
}

double replica_factor(const Candidate& c) { return small_replica_factor(c.layout.gpus_per_replica()); }

// Lower is better; NaN (no value) sorts last within a tier.
double key(const Candidate& c, Objective o, bool at_load) {
  switch (o) {
    case Objective::kLatency:
      return c.at_load.tpot_p95_ms + 1e-3 * c.at_load.ttft_p95_ms;
    case Objective::kThroughput:
      return c.capacity_tokens_per_s > 0 ? -c.capacity_tokens_per_s : NAN;
    default:
      return (at_load ? c.cost_per_million_at_load : c.cost_per_million_output_tokens) * replica_factor(c);
  }
}

}  // namespace

double small_replica_factor(int gpus_per_replica) {
  return 1.0 + 0.10 * std::log2(static_cast<double>(std::max(1, gpus_per_replica)));
}

Objective resolved_objective(const Workload& w) {
  return w.objective == Objective::kAuto ? Objective::kCost : w.objective;
}

bool ranks_at_load(const Workload& w) {
  return w.objective == Objective::kAuto && w.load_given && w.mode != LoadMode::kOffline;
}

double ranked_cost(const Plan& plan, const Candidate& c) {
  return plan.ranked_at_load ? c.cost_per_million_at_load : (c.has_cost ? c.cost_per_million_output_tokens : NAN);
}

std::string rank_candidates(const PlanRequest& r, std::vector<Candidate>* out) {
  const Workload& w = r.workload;
  const Objective o = resolved_objective(w);
  const bool at_load = ranks_at_load(w);
  std::string basis;
  if (w.objective == Objective::kAuto) {
    basis = at_load ? "meets the SLOs at the workload, then cost per output token at the workload"
                    : "cost per output token at full SLO capacity (no --concurrency or --qps given)";
  } else if (w.objective == Objective::kCost) {
    basis = "cost per output token at full SLO capacity (--objective cost)";
  } else if (w.objective == Objective::kLatency) {
    basis = "P95 time per output token at the workload (--objective latency)";
  } else {
    basis = "output tokens/s at full SLO capacity (--objective throughput)";
  }
  std::stable_sort(out->begin(), out->end(), [&](const Candidate& a, const Candidate& b) {
    if (tier(a) != tier(b)) return tier(a) < tier(b);
    const double ka = key(a, o, at_load), kb = key(b, o, at_load);
    const bool va = std::isfinite(ka), vb = std::isfinite(kb);
    if (va != vb) return va;
    if (va && std::fabs(ka - kb) > 1e-9 * std::max(std::fabs(ka), std::fabs(kb))) return ka < kb;
    if (a.layout.gpus_per_replica() != b.layout.gpus_per_replica())
      return a.layout.gpus_per_replica() < b.layout.gpus_per_replica();
    return a.at_load.tpot_ms < b.at_load.tpot_ms;
  });
  return basis;
}

}  // namespace parallm::planner
