// SLO capacity checks of `plan`'s top candidates; see slo_check.h.
#include "sim/slo_check.h"

#include <algorithm>
#include <cmath>

#include "sim/replica_model.h"
#include "sim/simulation.h"
#include "util/log.h"

namespace parallm::sim {

std::vector<SloCheck> check_slo_capacity(const planner::Plan& plan, int top_n, int64_t num_requests) {
  std::vector<SloCheck> out;
  const planner::Workload& w = plan.request.workload;
  if (w.ttft_slo_ms <= 0 && w.tpot_slo_ms <= 0) return out;
  for (const planner::Candidate& c : plan.candidates) {
    if (static_cast<int>(out.size()) >= top_n) break;
    if (!c.fits || c.max_concurrency_slo <= 0) continue;
    SimulationSpec spec;
    spec.request = plan.request;
    spec.layout = c.layout;
    spec.layout.dp = 1;  // one replica at its own share
    spec.max_num_seqs = plan.request.memory.max_num_seqs;
    spec.max_num_batched_tokens = plan.request.memory.max_num_batched_tokens;
    spec.max_model_len = plan.max_model_len;
    spec.slo = {w.ttft_slo_ms, w.tpot_slo_ms};
    SloCheck k;
    k.layout = c.layout;
    k.open_loop = w.mode == planner::LoadMode::kQps;
    SimLoad& load = spec.load;
    load.input_len = {w.input_len, w.input_len};
    load.output_len = {w.output_len, w.output_len};
    if (k.open_loop) {
      load.kind = LoadKind::kPoisson;
      k.load = c.at_capacity.requests_per_s;
      load.rate = k.load;
    } else {
      load.kind = LoadKind::kClosedLoop;
      k.load = static_cast<double>(c.max_concurrency_slo);
      load.concurrency = c.max_concurrency_slo;
    }
    if (!(k.load > 0)) continue;
    const double n = std::clamp(8.0 * std::ceil(k.load), 200.0, 4000.0);
    load.num_requests = num_requests > 0 ? num_requests : static_cast<int64_t>(n);
    const SimulationResult r = run_simulation(spec);
    const loadtest::LevelResult& lv = r.report.results[0];
    k.p95_ttft_ms = lv.ttft_ms.p95;
    k.p95_tpot_ms = lv.tpot_ms.p95;
    k.predicted_ttft_ms = c.at_capacity.ttft_ms;
    k.predicted_tpot_ms = c.at_capacity.tpot_ms;
    k.preemptions = static_cast<int64_t>(r.fleet.preemptions);
    k.ttft_ok = w.ttft_slo_ms <= 0 || k.p95_ttft_ms <= w.ttft_slo_ms;
    k.tpot_ok = w.tpot_slo_ms <= 0 || k.p95_tpot_ms <= w.tpot_slo_ms;
    out.push_back(k);
  }
  return out;
}

std::string slo_checks_text(const planner::Plan& plan, const std::vector<SloCheck>& checks) {
  if (checks.empty()) return "";
  const planner::Workload& w = plan.request.workload;
  std::string s =
      "\nSLO capacity, simulated (parallm simulate: the real scheduler, one replica at the claimed "
      "load):\n";
  for (const SloCheck& k : checks) {
    std::string load = k.open_loop ? strfmt("%.3g req/s", k.load) : strfmt("%.0f streams", k.load);
    s += strfmt(
        "  %-18s at %-12s P95 TTFT %8.1f ms%s  P95 TPOT %7.2f ms%s  (model means %.1f / %.2f ms)  "
        "%s\n",
        layout_text(k.layout).c_str(), load.c_str(), k.p95_ttft_ms,
        w.ttft_slo_ms > 0 ? strfmt(" (SLO %g)", w.ttft_slo_ms).c_str() : "", k.p95_tpot_ms,
        w.tpot_slo_ms > 0 ? strfmt(" (SLO %g)", w.tpot_slo_ms).c_str() : "", k.predicted_ttft_ms, k.predicted_tpot_ms,
        k.holds() ? "holds" : "MISSED at P95: plan fewer streams per replica");
  }
  return s;
}

nlohmann::json slo_checks_json(const std::vector<SloCheck>& checks) {
  nlohmann::json a = nlohmann::json::array();
  for (const SloCheck& k : checks)
    a.push_back({{"layout", layout_text(k.layout)},
                 {"load", k.load},
                 {"load_unit", k.open_loop ? "requests_per_s" : "concurrency"},
                 {"p95_ttft_ms", k.p95_ttft_ms},
                 {"p95_tpot_ms", k.p95_tpot_ms},
                 {"predicted_ttft_ms", k.predicted_ttft_ms},
                 {"predicted_tpot_ms", k.predicted_tpot_ms},
                 {"preemptions", k.preemptions},
                 {"holds", k.holds()}});
  return a;
}

}  // namespace parallm::sim
