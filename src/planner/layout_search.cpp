// Layout search: enumerate valid (dp, tp, pp, ep) layouts for the devices
// given, evaluate memory and performance of each, and rank them: fitting
// layouts that meet the SLOs and the load first, then by cost per million
// output tokens at their SLO capacity, then fewer devices per replica.
#include <algorithm>
#include <cmath>

#include "planner/plan.h"
#include "util/check.h"
#include "util/log.h"

namespace parallm::planner {

std::vector<Layout> enumerate_layouts(const ModelSpec& m, int gpus_per_node, int nodes, const Layout& pin) {
  std::vector<Layout> out;
  const int total = gpus_per_node * nodes;
  for (int tp = 1; tp <= gpus_per_node; ++tp) {
    if (pin.tp > 0 && tp != pin.tp) continue;
    if (m.n_head % tp != 0) continue;
    if (!m.is_mla() && m.n_kv_head % tp != 0 && tp % m.n_kv_head != 0) continue;
    for (int pp = 1; tp * pp <= total; ++pp) {
      if (pin.pp > 0 && pp != pin.pp) continue;
      if (pp > m.n_layer) break;
      // Pipeline stages beyond a node only in whole nodes.
      if (tp * pp > gpus_per_node && (tp * pp) % gpus_per_node != 0) continue;
      const int max_dp = total / (tp * pp);
      int dp = pin.dp > 0 ? pin.dp : max_dp;
      if (dp < 1 || dp > max_dp) continue;
      std::vector<int> eps{1};
      if (m.is_moe())
        for (int ep = 2; ep <= tp; ++ep)
          if (tp % ep == 0 && m.n_expert % ep == 0) eps.push_back(ep);
      for (int ep : eps) {
        if (pin.ep > 0 && ep != pin.ep) continue;
        out.push_back(Layout{dp, tp, pp, ep});
      }
    }
  }
  return out;
}

namespace {

PerfInputs perf_inputs(const PlanRequest& r, const ParamCounts& p, const Candidate& c) {
  PerfInputs in;
  in.model = &r.model;
  in.params = p;
  in.weights = r.weights;
  in.kv_elem_bytes = r.kv_elem_bytes;
  in.act_elem_bytes = r.memory.activation_elem_bytes;
  in.gpu = r.gpu;
  in.layout = c.layout;
  in.tp_link = c.tp_link;
  in.pp_link = best_group(r.fabric, c.layout.tp * c.layout.pp > r.fabric.gpus_per_node ? r.fabric.gpus_per_node + 1 : 2);
  if (c.layout.pp <= 1) in.pp_link = GroupLink{};
  in.memory = c.memory;
  in.k = r.constants;
  return in;
}

// Per-replica concurrency for the workload (Little's law for a request rate).
double replica_load(const PlanRequest& r, const PerfInputs& in, const Candidate& c) {
  const Workload& w = r.workload;
  const double dp = c.layout.dp;
  switch (w.mode) {
    case LoadMode::kConcurrency: return std::max(1.0, std::ceil(w.concurrency / dp));
    case LoadMode::kOffline: return static_cast<double>(std::max<int64_t>(1, c.max_concurrency_kv));
    case LoadMode::kQps: {
      const double rate = w.qps / dp;
      double conc = 1;
      for (int i = 0; i < 50; ++i) {  // fixed point of conc = rate x latency(conc)
        LoadPoint p = predict_load(in, conc, w.input_len, w.output_len);
        double latency_s = (p.ttft_ms + p.tpot_ms * (w.output_len - 1)) * 1e-3;
        double next = std::max(1.0, rate * latency_s);
        if (next > 1e6) return next;
        if (std::fabs(next - conc) < 0.01) return next;
        conc = 0.5 * (conc + next);
      }
      return conc;
    }
  }
  return 1;
}

}  // namespace

void evaluate_candidates(const PlanRequest& r, const ParamCounts& p, int64_t max_model_len,
                         std::vector<Candidate>* out) {
  const Fabric& f = r.fabric;
  const Workload& w = r.workload;
  const double price = device_hour_price(r);  // cost_model.h: rent or depreciation + power, per device-hour
  for (const Layout& l : enumerate_layouts(r.model, f.gpus_per_node, f.nodes, r.pinned)) {
    Candidate c;
    c.layout = l;
    c.tp_link = best_group(f, l.tp);
    c.memory = device_memory(r.model, p, r.weights, r.kv_elem_bytes, r.gpu, l, r.memory, max_model_len);
    c.fits = c.memory.fits;
    const int64_t per_seq = w.input_len + w.output_len;
    c.max_concurrency_kv = std::min<int64_t>(r.memory.max_num_seqs, c.memory.kv_capacity_tokens / std::max<int64_t>(1, per_seq));
    if (c.fits && c.max_concurrency_kv >= 1) {
      PerfInputs in = perf_inputs(r, p, c);
      const double load = replica_load(r, in, c);
      c.at_load = predict_load(in, std::min<double>(load, static_cast<double>(c.max_concurrency_kv)), w.input_len, w.output_len);
      c.output_tokens_per_s = c.at_load.output_tokens_per_s * l.dp;
      c.max_concurrency_slo = max_concurrency_at_slo(in, c.max_concurrency_kv, w.input_len, w.output_len,
                                                     w.ttft_slo_ms, w.tpot_slo_ms);
      c.meets_slo = (w.ttft_slo_ms <= 0 || c.at_load.ttft_ms <= w.ttft_slo_ms) &&
                    (w.tpot_slo_ms <= 0 || c.at_load.tpot_ms <= w.tpot_slo_ms);
      c.meets_load = c.meets_slo && load <= static_cast<double>(c.max_concurrency_slo);
      if (c.max_concurrency_slo > 0) {
        c.at_capacity = predict_load(in, static_cast<double>(c.max_concurrency_slo), w.input_len, w.output_len);
        c.capacity_tokens_per_s = c.at_capacity.output_tokens_per_s * l.dp;
        c.cost_per_million_output_tokens = price * l.gpus() / 3600.0 / c.capacity_tokens_per_s * 1e6;
      }
    }
    out->push_back(c);
  }
  auto rank = [](const Candidate& c) {
    if (!c.fits) return 4;
    if (c.max_concurrency_slo <= 0) return 3;
    if (!c.meets_load) return c.meets_slo ? 1 : 2;
    return 0;
  };
  // NOTE: the playbook prefers small replicas (one device when the model fits)
  // for their simplicity and isolation; a layout must be more than 10% cheaper
  // per doubling of devices per replica to win. Applied as a factor on cost so
  // the order stays a strict weak ordering.
  auto ranked_cost = [](const Candidate& c) {
    return c.cost_per_million_output_tokens * (1.0 + 0.10 * std::log2(static_cast<double>(c.layout.gpus_per_replica())));
  };
  std::stable_sort(out->begin(), out->end(), [&](const Candidate& a, const Candidate& b) {
    if (rank(a) != rank(b)) return rank(a) < rank(b);
    const double ca = ranked_cost(a), cb = ranked_cost(b);
    if (ca > 0 && cb > 0 && std::fabs(ca - cb) > 1e-9 * std::max(ca, cb)) return ca < cb;
    if (a.layout.gpus_per_replica() != b.layout.gpus_per_replica())
      return a.layout.gpus_per_replica() < b.layout.gpus_per_replica();
    return a.at_load.tpot_ms < b.at_load.tpot_ms;
  });
}

}  // namespace parallm::planner
