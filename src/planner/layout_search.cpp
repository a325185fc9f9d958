// Layout search: enumerate valid (dp, tp, pp, ep) layouts for the devices
// given, evaluate memory and performance of each (static batches for
// --offline, continuous batching under load_model.h otherwise), and rank
// them: fitting layouts that meet the SLOs and carry the load first, then the
// objective (plan.h: cost at the workload when one is given, cost at full
// SLO capacity when not), then fewer devices per replica, then lower TPOT.
#include <algorithm>
#include <cmath>
#include <limits>

#include "planner/load_model.h"
#include "planner/plan.h"
#include "util/check.h"
#include "util/log.h"

namespace parallm::planner {

const char* objective_name(Objective o) {
  switch (o) {
    case Objective::kAuto:
      return "auto";
    case Objective::kLatency:
      return "latency";
    case Objective::kThroughput:
      return "throughput";
    case Objective::kCost:
      return "cost";
  }
  return "?";
}

Objective parse_objective(const std::string& s) {
  for (Objective o : {Objective::kAuto, Objective::kLatency, Objective::kThroughput, Objective::kCost})
    if (s == objective_name(o)) return o;
  throw InputError("--objective must be latency, throughput or cost, not '" + s + "'");
}

std::vector<Layout> enumerate_layouts(const ModelSpec& m, int gpus_per_node, int nodes, const Layout& pin) {
  std::vector<Layout> out;
  const int total = gpus_per_node * nodes;
  for (int tp = 1; tp <= gpus_per_node; ++tp) {
    if (pin.tp > 0 && tp != pin.tp) continue;
    if (m.config.n_head % tp != 0) continue;
    if (!m.config.mla() && m.config.n_kv_head % tp != 0 && tp % m.config.n_kv_head != 0) continue;
    for (int pp = 1; tp * pp <= total; ++pp) {
      if (pin.pp > 0 && pp != pin.pp) continue;
      if (pp > m.config.n_layer) break;
      // Pipeline stages beyond a node only in whole nodes.
      if (tp * pp > gpus_per_node && (tp * pp) % gpus_per_node != 0) continue;
      const int max_dp = total / (tp * pp);
      int dp = pin.dp > 0 ? pin.dp : max_dp;
      if (dp < 1 || dp > max_dp) continue;
      std::vector<int> eps{1};
      if (m.config.is_moe())
        for (int ep = 2; ep <= dp * tp; ++ep) {
          if (m.config.n_expert % ep != 0) continue;
          const bool inside_tp = ep <= tp && tp % ep == 0;
          const bool over_dp = ep > tp && pp == 1 && ep % tp == 0 && (dp * tp) % ep == 0;
          if (inside_tp || over_dp) eps.push_back(ep);
        }
      for (int ep : eps) {
        if (pin.ep > 0 && ep != pin.ep) continue;
        out.push_back(Layout{dp, tp, pp, ep});
      }
    }
  }
  return out;
}

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

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
  in.pp_link =
      best_group(r.fabric, c.layout.tp * c.layout.pp > r.fabric.gpus_per_node ? r.fabric.gpus_per_node + 1 : 2);
  if (c.layout.pp <= 1) in.pp_link = GroupLink{};
  const int ep = c.layout.ep, per_node = r.fabric.gpus_per_node;
  if (ep > c.layout.tp) {
    in.ep_link = best_group(r.fabric, std::min(ep, per_node));
    if (ep > per_node) {
      in.ep_net_link = best_group(r.fabric, per_node + 1);
      in.ep_net_fraction = static_cast<double>(ep - per_node) / (ep - 1);
    }
  }
  in.expert_imbalance = r.expert_imbalance > 0 ? r.expert_imbalance : kDefaultExpertImbalance;
  in.memory = c.memory;
  in.k = r.constants;
  return in;
}

// Attention replicas that must be deployed together (one EP group).
int replicas_per_unit(const Layout& l) { return l.ep > l.tp ? l.ep / l.tp : 1; }

}  // namespace

void evaluate_candidates(const PlanRequest& r, const ParamCounts& p, int64_t max_model_len,
                         std::vector<Candidate>* out) {
  const Fabric& f = r.fabric;
  const Workload& w = r.workload;
  const double price = device_hour_price(r);  // cost_model.h: rent or depreciation + power, per device-hour
  const double headroom = std::max(1.0, r.economics.headroom);
  for (const Layout& l : enumerate_layouts(r.model, f.gpus_per_node, f.nodes, r.pinned)) {
    Candidate c;
    c.layout = l;
    c.tp_link = best_group(f, l.tp);
    c.memory = device_memory(r.model, p, r.weights, r.kv_elem_bytes, r.gpu, l, r.memory, max_model_len);
    c.fits = c.memory.fits;
    c.cost_per_million_output_tokens = kNaN;
    c.cost_per_million_at_load = kNaN;
    const int64_t per_seq = w.input_len + w.output_len;
    c.max_concurrency_kv =
        std::min<int64_t>(r.memory.max_num_seqs, c.memory.kv_capacity_tokens / std::max<int64_t>(1, per_seq));
    if (c.fits && c.max_concurrency_kv >= 1) {
      const PerfInputs in = perf_inputs(r, p, c);
      ServingLoad base;
      base.input_len = w.input_len;
      base.output_len = w.output_len;
      base.max_num_batched_tokens = r.memory.max_num_batched_tokens;
      base.max_num_seqs = c.max_concurrency_kv;
      const double dp = l.dp;
      if (w.mode == LoadMode::kOffline) {
        // Offline: static batches of everything memory holds (the benchmark tables' method).
        c.at_load = predict_load(in, static_cast<double>(c.max_concurrency_kv), w.input_len, w.output_len);
        c.max_concurrency_slo = c.max_concurrency_kv;
        c.at_capacity = c.at_load;
        c.meets_slo = meets_slo(c.at_load, w.ttft_slo_ms, w.tpot_slo_ms);
        c.meets_load = c.meets_slo;
        if (!c.meets_slo) {
          c.max_concurrency_slo = max_concurrency_at_slo(in, base, c.max_concurrency_kv, w.ttft_slo_ms, w.tpot_slo_ms);
          if (c.max_concurrency_slo > 0)
            c.at_capacity = predict_load(in, static_cast<double>(c.max_concurrency_slo), w.input_len, w.output_len);
        }
        c.replicas_needed = l.dp;
      } else {
        ServingLoad at = base;
        double load_per_replica = 0;
        if (w.mode == LoadMode::kConcurrency) {
          at.closed_loop = true;
          at.concurrency = std::max(1.0, std::ceil(w.concurrency / dp));
          at.concurrency = std::min(at.concurrency, static_cast<double>(c.max_concurrency_kv));
          load_per_replica = std::ceil(w.concurrency / dp);
        } else {
          at.closed_loop = false;
          at.qps = w.qps / dp;
          load_per_replica = at.qps;
        }
        c.at_load = predict_serving(in, at);
        c.max_concurrency_slo = max_concurrency_at_slo(in, base, c.max_concurrency_kv, w.ttft_slo_ms, w.tpot_slo_ms);
        if (w.mode == LoadMode::kQps || r.economics.peak_qps > 0)
          c.max_qps_slo = max_qps_at_slo(in, base, c.max_concurrency_kv, w.ttft_slo_ms, w.tpot_slo_ms);
        c.meets_slo = meets_slo(c.at_load, w.ttft_slo_ms, w.tpot_slo_ms) &&
                      c.at_load.concurrency <= static_cast<double>(c.max_concurrency_kv) + 1e-9;
        c.meets_load = c.meets_slo && (w.mode == LoadMode::kConcurrency
                                           ? load_per_replica <= static_cast<double>(c.max_concurrency_slo)
                                           : load_per_replica <= c.max_qps_slo * (1 + 1e-9));
        if (c.max_concurrency_slo > 0) {
          ServingLoad cap = base;
          cap.concurrency = static_cast<double>(c.max_concurrency_slo);
          c.at_capacity = predict_serving(in, cap);
        }
        // Replicas of this layout the load needs, in whole EP groups.
        const double per_replica =
            w.mode == LoadMode::kConcurrency ? static_cast<double>(c.max_concurrency_slo) : c.max_qps_slo;
        const double total_load = w.mode == LoadMode::kConcurrency ? w.concurrency : w.qps;
        const int unit = replicas_per_unit(l);
        if (per_replica > 0) {
          const int64_t n = static_cast<int64_t>(std::ceil(total_load / per_replica * headroom - 1e-9));
          c.replicas_needed = (std::max<int64_t>(1, n) + unit - 1) / unit * unit;
        }
      }
      // All replicas at the workload: with fewer users than replicas, only some are busy.
      const double busy = w.mode == LoadMode::kConcurrency && c.at_load.concurrency > 0
                              ? std::min(dp, w.concurrency / c.at_load.concurrency)
                              : dp;
      c.output_tokens_per_s = c.at_load.output_tokens_per_s * busy;
      if (c.max_concurrency_slo > 0) {
        c.capacity_tokens_per_s = c.at_capacity.output_tokens_per_s * l.dp;
        c.cost_per_million_output_tokens = price * l.gpus() / 3600.0 / c.capacity_tokens_per_s * 1e6;
        c.has_cost = true;
      }
      // At the workload: the devices its replicas need (x headroom) over the
      // tokens the workload draws from them.
      if (c.at_load.stable && c.output_tokens_per_s > 0 && c.replicas_needed > 0)
        c.cost_per_million_at_load = price * static_cast<double>(c.replicas_needed * l.gpus_per_replica()) / 3600.0 /
                                     c.output_tokens_per_s * 1e6;
    }
    out->push_back(c);
  }
  rank_candidates(r, out);  // decision.cpp records the basis
}

}  // namespace parallm::planner
