// The decision: verdict, recommended layout, reasons in plain sentences, and
// the capacity needed for the peak: replicas = ceil(peak / per-replica
// capacity x headroom), the rule of thumb of the playbook (peak / per-card
// x 1.3-1.5).
#include <algorithm>
#include <cmath>

#include "planner/plan.h"
#include "util/check.h"
#include "util/log.h"

namespace parallm::planner {

const char* verdict_name(Verdict v) {
  switch (v) {
    case Verdict::kFine:
      return "fine";
    case Verdict::kDoesntFit:
      return "doesnt_fit";
    case Verdict::kCantKeepUp:
      return "cant_keep_up";
  }
  return "?";
}

namespace {

void validate(const PlanRequest& r) {
  const Workload& w = r.workload;
  if (w.input_len < 1) throw InputError("--input-len must be at least 1");
  if (w.output_len < 1) throw InputError("--output-len must be at least 1");
  if (w.ttft_slo_ms < 0 || w.tpot_slo_ms < 0) throw InputError("SLOs must be positive milliseconds");
  if (w.mode == LoadMode::kConcurrency && w.concurrency < 1) throw InputError("--concurrency must be at least 1");
  if (w.mode == LoadMode::kQps && !(w.qps > 0)) throw InputError("--qps must be positive");
  if (r.economics.headroom < 1.0) throw InputError("--headroom must be at least 1.0");
  if (r.memory.gpu_memory_utilization <= 0.1 || r.memory.gpu_memory_utilization > 1.0)
    throw InputError("--gpu-memory-utilization must be in (0.1, 1]");
  if (w.max_model_len > 0 && w.max_model_len < w.input_len + w.output_len)
    throw InputError(strfmt("--max-model-len %lld is shorter than --input-len + --output-len (%lld)",
                            static_cast<long long>(w.max_model_len),
                            static_cast<long long>(w.input_len + w.output_len)));
  const Layout& p = r.pinned;
  if (p.tp < 0 || p.pp < 0 || p.dp < 0 || p.ep < 0) throw InputError("--tp/--pp/--dp/--ep must be positive");
  const int total = r.fabric.gpus_per_node * r.fabric.nodes;
  const int pinned = std::max(1, p.tp) * std::max(1, p.pp) * std::max(1, p.dp);
  if (pinned > total)
    throw InputError(
        strfmt("the pinned layout needs %d devices but only %d are given (--gpus x --nodes)", pinned, total));
  if (p.tp > 0 && r.model.config.n_head % p.tp != 0)
    throw InputError(strfmt("--tp %d does not divide the %lld attention heads", p.tp,
                            static_cast<long long>(r.model.config.n_head)));
  if (p.ep > 1 && !r.model.config.is_moe()) throw InputError("--ep applies to mixture-of-experts models only");
  if (r.expert_imbalance != 0 && !(r.expert_imbalance >= 1.0))
    throw InputError("--expert-imbalance must be at least 1 (the busiest expert-parallel rank over the mean)");
  if (r.memory.max_num_batched_tokens < 1) throw InputError("--max-num-batched-tokens must be at least 1");
}

// Smallest tp x pp (tp within a node first, then pipeline stages) whose
// weights fit, for "doesn't fit" answers beyond the devices given.
Layout minimal_fitting_layout(const PlanRequest& r, const ParamCounts& p, int64_t max_model_len, bool* found) {
  const int per_node = std::max(8, r.fabric.gpus_per_node);
  for (int pp = 1; pp <= 64; pp *= 2) {
    for (int tp = 1; tp <= per_node; tp *= 2) {
      if (r.model.config.n_head % tp != 0) continue;
      Layout l{1, tp, pp, 1};
      DeviceMemory d = device_memory(r.model, p, r.weights, r.kv_elem_bytes, r.gpu, l, r.memory, max_model_len);
      if (d.fits) {
        *found = true;
        return l;
      }
    }
  }
  *found = false;
  return Layout{1, 1, 1, 1};
}

}  // namespace

void add_reasons(Plan* plan);  // plan_reasons.cpp

MonthlyCost deployment_cost(const PlanRequest& r, double gpus, double capacity_tokens_per_s) {
  const Economics& e = r.economics;
  CostInputs in;
  in.gpus = gpus;
  in.gpu_hour_price = e.gpu_hour_price > 0 ? e.gpu_hour_price : r.gpu.price_per_hour;
  in.gpu_price = e.gpu_price;
  in.depreciation_months = e.depreciation_months;
  in.gpu_watts = e.gpu_watts > 0 ? e.gpu_watts : r.gpu.watts;
  in.power_price = e.power_price;
  in.ops_cost_month = e.ops_cost_month;
  in.daily_requests = e.daily_requests;
  in.mean_output_tokens = static_cast<double>(r.workload.output_len);
  in.capacity_tokens_per_s = capacity_tokens_per_s;
  in.currency = e.currency;
  return monthly_cost(in);
}

double device_hour_price(const PlanRequest& r) {
  PlanRequest one = r;
  one.economics.ops_cost_month = 0;
  one.economics.daily_requests = 0;
  return deployment_cost(one, 1, 0).total_hour;
}

Plan make_plan(const PlanRequest& request) {
  validate_model(request.model);
  validate(request);
  Plan plan;
  plan.request = request;
  const PlanRequest& r = plan.request;
  const Workload& w = r.workload;
  plan.params = count_params(r.model);
  plan.weight_bytes = model_weight_bytes(r.model, plan.params, r.weights);
  plan.kv_bytes_per_token = kv_bytes_per_token(r.model, r.kv_elem_bytes);
  plan.max_model_len = w.max_model_len > 0 ? w.max_model_len : w.input_len + w.output_len;
  if (r.model.config.n_ctx_train > 0 && plan.max_model_len > r.model.config.n_ctx_train)
    log_warn(strfmt("max model length %lld exceeds the model's trained context %lld",
                    static_cast<long long>(plan.max_model_len), static_cast<long long>(r.model.config.n_ctx_train)));
  evaluate_candidates(r, plan.params, plan.max_model_len, &plan.candidates);
  plan.ranking_basis = rank_candidates(r, &plan.candidates);
  plan.ranked_by = resolved_objective(w);
  plan.ranked_at_load = ranks_at_load(w);
  if (plan.candidates.empty())
    throw InputError("no valid layout: the pinned --tp/--pp/--ep do not divide the model's heads/layers/experts");

  const bool any_fit = plan.candidates.front().fits;
  const bool has_slo = w.ttft_slo_ms > 0 || w.tpot_slo_ms > 0;
  if (any_fit && has_slo && plan.candidates.front().max_concurrency_slo <= 0) {
    // Even one sequence misses the SLO on every layout: say what is reachable.
    double best_ttft = 1e30, best_tpot = 1e30;
    for (const auto& c : plan.candidates) {
      if (!c.fits) continue;
      best_ttft = std::min(best_ttft, c.at_load.concurrency <= 1 ? c.at_load.ttft_ms : best_ttft);
      best_tpot = std::min(best_tpot, c.at_load.tpot_ms);
    }
    std::string what;
    if (w.tpot_slo_ms > 0) what += strfmt("--tpot-slo %.3g ms (best reachable ~%.3g ms)", w.tpot_slo_ms, best_tpot);
    if (w.ttft_slo_ms > 0) what += std::string(what.empty() ? "" : " / ") + strfmt("--ttft-slo %.3g ms", w.ttft_slo_ms);
    throw InputError("impossible SLO: no layout of " + r.fabric.description + " meets " + what +
                     " even with one request in flight; relax the SLO, quantize, or use faster devices");
  }

  if (any_fit) {
    plan.best = 0;
    for (size_t i = 1; i < plan.candidates.size(); ++i)
      if (plan.candidates[i].fits) {
        plan.runner_up = static_cast<int>(i);
        break;
      }
    plan.recommended = plan.candidates[0].layout;
  } else {
    bool found = false;
    plan.recommended = minimal_fitting_layout(r, plan.params, plan.max_model_len, &found);
    if (!found) plan.recommended = Layout{0, 0, 0, 0};
  }

  // Verdict in the playbook's terms, from the single-device layout.
  const Candidate* single = nullptr;
  for (const auto& c : plan.candidates)
    if (c.layout.tp == 1 && c.layout.pp == 1 && (single == nullptr || c.layout.dp < single->layout.dp)) single = &c;
  DeviceMemory one = device_memory(r.model, plan.params, r.weights, r.kv_elem_bytes, r.gpu, Layout{1, 1, 1, 1},
                                   r.memory, plan.max_model_len);
  if (!one.fits) {
    plan.verdict = Verdict::kDoesntFit;
  } else {
    // One device holds the model: can one replica carry the load?
    bool one_carries = false;
    if (single != nullptr && single->fits) {
      const double load1 = w.mode == LoadMode::kConcurrency ? w.concurrency : w.mode == LoadMode::kQps ? -1 : 0;
      if (w.mode == LoadMode::kOffline)
        one_carries = true;  // no load to keep up with
      else if (load1 > 0)
        one_carries = load1 <= static_cast<double>(single->max_concurrency_slo);
      else
        one_carries = single->max_concurrency_slo > 0 && single->max_qps_slo >= w.qps;
    }
    plan.verdict = one_carries ? Verdict::kFine : Verdict::kCantKeepUp;
  }

  // Capacity for the peak with the recommended layout.
  Capacity& cap = plan.capacity;
  if (plan.best >= 0) {
    const Candidate& b = plan.candidates[plan.best];
    const int per_replica_gpus = b.layout.gpus_per_replica();
    if (w.mode == LoadMode::kOffline && r.economics.peak_concurrency <= 0 && r.economics.peak_qps <= 0) {
      cap.unit = "offline";
      cap.replicas = b.layout.dp;
      cap.per_replica = static_cast<double>(b.max_concurrency_slo);
      cap.peak = cap.per_replica * cap.replicas;
    } else if (r.economics.peak_qps > 0 || (w.mode == LoadMode::kQps && r.economics.peak_concurrency <= 0)) {
      cap.unit = "requests/s";
      cap.peak = r.economics.peak_qps > 0 ? r.economics.peak_qps : w.qps;
      cap.per_replica = b.max_qps_slo;
    } else {
      cap.unit = "concurrent requests";
      cap.peak = r.economics.peak_concurrency > 0 ? r.economics.peak_concurrency : w.concurrency;
      cap.per_replica = static_cast<double>(b.max_concurrency_slo);
    }
    if (cap.unit != "offline")
      cap.replicas = cap.per_replica > 0
                         ? static_cast<int64_t>(std::ceil(cap.peak / cap.per_replica * r.economics.headroom - 1e-9))
                         : 0;
    cap.replicas = std::max<int64_t>(cap.replicas, 1);
    // Attention-DP + EP layouts deploy whole EP groups of ep/tp replicas.
    const int64_t unit = b.layout.ep > b.layout.tp ? b.layout.ep / b.layout.tp : 1;
    cap.replicas = (cap.replicas + unit - 1) / unit * unit;
    // One answer to "how many GPUs": the recommended layout runs the capacity's
    // replicas, at most those the devices given hold (the capacity line then
    // says how many more the peak needs); a pinned --dp is the user's.
    if (r.pinned.dp > 0) cap.replicas = std::max<int64_t>(cap.replicas, r.pinned.dp);
    plan.recommended.dp =
        r.pinned.dp > 0 ? r.pinned.dp : static_cast<int>(std::min<int64_t>(cap.replicas, b.layout.dp));
    if (plan.recommended.dp != b.layout.dp) {
      // The winner was evaluated filling the devices given; re-evaluate it at
      // the recommended replicas so that the table's first row, the reasons,
      // the capacity line and the launch lines describe the same deployment.
      // Its cost at the workload does not depend on dp (devices the load
      // needs over the tokens it draws), so the ranking stands.
      PlanRequest at_dp = r;
      at_dp.pinned = plan.recommended;
      std::vector<Candidate> one_layout;
      evaluate_candidates(at_dp, plan.params, plan.max_model_len, &one_layout);
      if (one_layout.size() == 1 && one_layout.front().fits) plan.candidates[plan.best] = one_layout.front();
    }
    cap.gpus = cap.replicas * per_replica_gpus;
    plan.cost = deployment_cost(r, static_cast<double>(cap.gpus),
                                b.capacity_tokens_per_s / std::max(1, b.layout.dp) * static_cast<double>(cap.replicas));
    cap.cost_per_hour = plan.cost.total_hour;
    cap.cost_per_month = plan.cost.total_month;
    cap.cost_per_million_output_tokens = b.cost_per_million_output_tokens;
    if (plan.verdict == Verdict::kFine && cap.replicas > 1 && b.layout.tp * b.layout.pp == 1 && cap.unit != "offline")
      plan.verdict = Verdict::kCantKeepUp;  // headroom pushes the peak past one device
    // The lines launch the recommended replicas, not every replica the devices hold.
    Candidate launched = b;
    launched.layout.dp = plan.recommended.dp;
    plan.commands = launch_commands(plan, launched);
  } else if (plan.recommended.tp > 0) {
    Candidate hypothetical;
    hypothetical.layout = plan.recommended;
    hypothetical.memory = device_memory(r.model, plan.params, r.weights, r.kv_elem_bytes, r.gpu, plan.recommended,
                                        r.memory, plan.max_model_len);
    cap.unit = "concurrent requests";
    cap.replicas = 1;
    cap.gpus = plan.recommended.gpus_per_replica();
    plan.cost = deployment_cost(r, static_cast<double>(cap.gpus), 0);
    cap.cost_per_hour = plan.cost.total_hour;
    cap.cost_per_month = plan.cost.total_month;
    plan.commands = launch_commands(plan, hypothetical);
  }
  add_reasons(&plan);
  return plan;
}

}  // namespace parallm::planner
