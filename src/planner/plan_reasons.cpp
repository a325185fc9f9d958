// The reasons of a plan in plain sentences: what the memory says, why the
// winner wins and what the runner-up lacks, why replicas beat tensor
// parallelism for a model that fits, why not tensor parallelism over PCIe,
// when quantization removes the need for another card, and the capacity sum.
#include <algorithm>
#include <cmath>

#include "planner/plan.h"
#include "util/log.h"

namespace parallm::planner {

std::string layout_label(const Layout& l) {
  std::string s = strfmt("tp=%d pp=%d dp=%d", l.tp, l.pp, l.dp);
  if (l.ep > 1) s += strfmt(" ep=%d", l.ep);
  return s;
}

namespace {

// Memory in GiB (2^30 bytes): an "80 GB" A100/H100 holds 80 GiB.
std::string gb(double bytes) { return strfmt("%.1f GiB", bytes / (1024.0 * 1024.0 * 1024.0)); }

std::string slo_text(double ms, const char* name, const char* fmt) {
  return ms > 0 ? std::string(name) + " <= " + strfmt(fmt, ms) + " ms" : std::string(name) + ": none";
}

std::string money(const Plan& plan, double v) { return strfmt("%.0f %s", v, plan.cost.currency.c_str()); }

// The candidates' cost per million, at device_hour_price() (in --currency;
// the catalog's prices are USD, and another currency needs a price).
std::string rank_money(const Plan& plan, double v) {
  return strfmt("%.3f %s", v, plan.request.economics.currency.c_str());
}

const Candidate* find(const Plan& plan, int tp, int pp) {
  for (const auto& c : plan.candidates)
    if (c.layout.tp == tp && c.layout.pp == pp && c.layout.ep == 1) return &c;
  return nullptr;
}

// The value the ranking compared for `c`, in words with its number.
std::string ranked_value(const Plan& plan, const Candidate& c) {
  switch (plan.ranked_by) {
    case Objective::kLatency:
      return strfmt("P95 TPOT %.2f ms, P95 TTFT %.0f ms at the workload", c.at_load.tpot_p95_ms, c.at_load.ttft_p95_ms);
    case Objective::kThroughput:
      return strfmt("%.0f output tokens/s at full SLO capacity", c.capacity_tokens_per_s);
    default: {
      const double v = ranked_cost(plan, c);
      if (!std::isfinite(v))
        return std::string("no cost ") + (plan.ranked_at_load ? "at the workload" : "at full SLO capacity");
      return rank_money(plan, v) + " per million output tokens " +
             (plan.ranked_at_load ? "at the workload" : "at full SLO capacity");
    }
  }
}

// The ranking's tiers (ranking.cpp): why a runner-up in a worse tier loses.
int tier(const Candidate& c) {
  if (!c.fits) return 4;
  if (c.max_concurrency_slo <= 0) return 3;
  if (!c.meets_load) return c.meets_slo ? 1 : 2;
  return 0;
}

// Why `ru` ranks below `b`: the first comparison of the ranking that tells
// them apart, named by both numbers.
std::string runner_up_why(const Plan& plan, const Candidate& b, const Candidate& ru) {
  const int tb = tier(b), tr = tier(ru);
  if (tr > tb) {
    if (tr == 4) return "it does not fit";
    if (tr == 3) return "it misses the SLOs even with one request";
    if (tr == 2) return "it does not carry the workload within the SLOs, and misses them at its share of it";
    return "it does not carry the workload within the SLOs";
  }
  const int gb_ = b.layout.gpus_per_replica(), gr = ru.layout.gpus_per_replica();
  switch (plan.ranked_by) {
    case Objective::kLatency:
      if (ru.at_load.tpot_p95_ms > b.at_load.tpot_p95_ms + 1e-9)
        return strfmt("its P95 TPOT at the workload is %.2f ms against %.2f ms", ru.at_load.tpot_p95_ms,
                      b.at_load.tpot_p95_ms);
      return strfmt("the same P95 TPOT (%.2f ms), and its P95 TTFT is %.0f ms against %.0f ms", ru.at_load.tpot_p95_ms,
                    ru.at_load.ttft_p95_ms, b.at_load.ttft_p95_ms);
    case Objective::kThroughput:
      if (ru.capacity_tokens_per_s < b.capacity_tokens_per_s)
        return strfmt("it serves %.0f output tokens/s at full SLO capacity against %.0f", ru.capacity_tokens_per_s,
                      b.capacity_tokens_per_s);
      return strfmt("the same %.0f output tokens/s at full SLO capacity, on %d instead of %d devices per replica",
                    ru.capacity_tokens_per_s, gr, gb_);
    default:
      break;
  }
  const char* at = plan.ranked_at_load ? "at the workload" : "at full SLO capacity";
  const double cb = ranked_cost(plan, b), cr = ranked_cost(plan, ru);
  if (!std::isfinite(cr))
    return std::string("it has no cost ") + at + (plan.ranked_at_load ? " (it cannot serve it stably)" : "");
  if (cr > cb)
    return strfmt("it costs %s instead of %s per million output tokens %s", rank_money(plan, cr).c_str(),
                  rank_money(plan, cb).c_str(), at);
  const double fr = small_replica_factor(gr), fb = small_replica_factor(gb_);
  if (cr * fr > cb * fb * (1 + 1e-9))
    return strfmt(
        "it is %s against %s per million output tokens %s, %.1f%% cheaper, not enough for %d instead of %d "
        "devices per replica (the ranking asks 10%% per doubling: %.3f x %.2f > %.3f x %.2f)",
        rank_money(plan, cr).c_str(), rank_money(plan, cb).c_str(), at, (1 - cr / cb) * 100, gr, gb_, cr, fr, cb, fb);
  return strfmt("it ties at %s against %s per million output tokens %s; the tie goes to %s",
                rank_money(plan, cr).c_str(), rank_money(plan, cb).c_str(), at,
                gr != gb_ ? "fewer devices per replica" : "the lower mean TPOT");
}

}  // namespace

void add_reasons(Plan* plan) {
  const PlanRequest& r = plan->request;
  auto& out = plan->reasons;
  const GpuSpec& g = r.gpu;
  DeviceMemory one = device_memory(r.model, plan->params, r.weights, r.kv_elem_bytes, g, Layout{1, 1, 1, 1}, r.memory,
                                   plan->max_model_len);
  const double usable = one.usable_bytes;
  // 1. Memory.
  if (!one.weights_fit) {
    out.push_back(
        strfmt("Doesn't fit: the weights take %s at %s, but one %s has %s usable (%.0f%% of %s) and also "
               "needs %s for activations and runtime; the model must be split (tensor or pipeline "
               "parallel) or quantized.",
               gb(plan->weight_bytes).c_str(), r.weights.name.c_str(), g.name.c_str(), gb(usable).c_str(),
               r.memory.gpu_memory_utilization * 100, gb(one.capacity_bytes).c_str(),
               gb(one.activation_bytes + one.overhead_bytes).c_str()));
  } else if (!one.fits) {
    out.push_back(
        strfmt("Doesn't fit: the weights (%s) load on one %s, but the %s left for the KV cache hold %lld "
               "tokens, fewer than one %lld-token sequence.",
               gb(plan->weight_bytes).c_str(), g.name.c_str(), gb(one.kv_bytes).c_str(),
               static_cast<long long>(one.kv_capacity_tokens), static_cast<long long>(plan->max_model_len)));
  } else {
    out.push_back(strfmt("Fits on one %s: weights %s, leaving %s of KV cache = %lld tokens (%.0f KB per token).",
                         g.name.c_str(), gb(plan->weight_bytes).c_str(), gb(one.kv_bytes).c_str(),
                         static_cast<long long>(one.kv_capacity_tokens), plan->kv_bytes_per_token / 1e3));
  }
  // 1b. Where the playbook's formulas differ from this model's real numbers.
  {
    // Weights: "参数量 × 精度字节数" with the nominal 4 / 2 / 1 / 0.5 bytes; the
    // real formats carry block scales (int4 AWQ/GPTQ 4.25 bits, GGUF q4_k 4.5).
    const double nominal_bits = r.weights.name == "int4"                              ? 4
                                : r.weights.name == "int8" || r.weights.name == "fp8" ? 8
                                : r.weights.name == "fp32"                            ? 32
                                                                                      : 16;
    const bool gguf = r.weights.name.rfind("q", 0) == 0;
    if (!gguf && std::fabs(r.weights.bits_per_weight - nominal_bits) > 1e-9)
      out.push_back(
          strfmt("Weights: %.4g B parameters x %.4g bits (%s with its scales) = %.1f GB (%s), not the "
                 "playbook's %.4g bits a weight = %.1f GB.",
                 plan->params.total / 1e9, r.weights.bits_per_weight, r.weights.name.c_str(), plan->weight_bytes / 1e9,
                 gb(plan->weight_bytes).c_str(), nominal_bits,
                 static_cast<double>(plan->params.total) * nominal_bits / 8 / 1e9));
  }
  {
    const ModelConfig& m = r.model.config;
    const double textbook = 2.0 * static_cast<double>(m.n_layer) * static_cast<double>(m.n_embd) * r.kv_elem_bytes;
    if (textbook > 0 && std::fabs(plan->kv_bytes_per_token - textbook) > 0.01 * textbook) {
      std::string why = m.mla() ? strfmt("MLA caches one %lld-wide latent per layer",
                                         static_cast<long long>(m.kv_lora_rank + m.qk_rope_dim))
                        : m.n_kv_head < m.n_head
                            ? strfmt("grouped-query attention keeps %lld KV heads of %lld",
                                     static_cast<long long>(m.n_kv_head), static_cast<long long>(m.n_head))
                            : strfmt("head_dim x heads = %lld, not hidden = %lld",
                                     static_cast<long long>(m.head_dim * m.n_head), static_cast<long long>(m.n_embd));
      out.push_back(
          strfmt("KV cache: %.0f KB per token, not the textbook 2 x layers x hidden x bytes = %.0f KB: %s, "
                 "so %.1fx the sequences fit.",
                 plan->kv_bytes_per_token / 1e3, textbook / 1e3, why.c_str(), textbook / plan->kv_bytes_per_token));
    }
  }
  // 2. Quantization as the alternative to more cards.
  if (!one.fits) {
    for (const char* q : {"fp8", "int8", "int4"}) {
      WeightFormat f = parse_weight_format(q);
      if (f.bits_per_weight >= r.weights.bits_per_weight) continue;
      ModelSpec m = r.model;
      m.file_weight_bytes = 0;
      DeviceMemory d =
          device_memory(m, plan->params, f, r.kv_elem_bytes, g, Layout{1, 1, 1, 1}, r.memory, plan->max_model_len);
      if (d.fits) {
        out.push_back(
            strfmt("Quantization alternative: at %s the weights shrink to %s and fit one %s with %lld "
                   "tokens of KV cache, removing the need for another card (at some quality cost).",
                   q, gb(static_cast<double>(plan->params.total) * f.bits_per_weight / 8).c_str(), g.name.c_str(),
                   static_cast<long long>(d.kv_capacity_tokens)));
        break;
      }
    }
  }
  if (plan->best < 0) {
    if (plan->recommended.tp > 0)
      out.push_back(strfmt("Not enough devices: the smallest layout that fits is %s (%d x %s); %d %s given.",
                           layout_label(plan->recommended).c_str(), plan->recommended.gpus_per_replica(),
                           g.name.c_str(), r.fabric.gpus_per_node * r.fabric.nodes,
                           r.fabric.gpus_per_node * r.fabric.nodes == 1 ? "is" : "are"));
    else
      out.push_back("No layout up to 64 pipeline stages of 8 devices fits this model on " + g.name + ".");
    return;
  }
  // 3. Winner.
  const Candidate& b = plan->candidates[plan->best];
  const Workload& w = r.workload;
  out.push_back(
      strfmt("Recommended %s on %d device(s): %s weights and %s KV per device, %lld sequences of %lld "
             "tokens per replica; at the workload TTFT P50 %.0f ms / P95 %.0f ms, TPOT P50 %.1f ms / P95 %.1f "
             "ms, %.0f output tokens/s in all.",
             layout_label(b.layout).c_str(), b.layout.gpus(), gb(b.memory.weights_bytes).c_str(),
             gb(b.memory.kv_bytes).c_str(), static_cast<long long>(b.max_concurrency_kv),
             static_cast<long long>(w.input_len + w.output_len), b.at_load.ttft_p50_ms, b.at_load.ttft_p95_ms,
             b.at_load.tpot_p50_ms, b.at_load.tpot_p95_ms, b.output_tokens_per_s));
  out.push_back("Ranked by " + plan->ranking_basis + ": " + ranked_value(*plan, b) + ".");
  if (w.ttft_slo_ms > 0 || w.tpot_slo_ms > 0)
    out.push_back(strfmt("SLOs (%s, %s) hold up to %lld concurrent sequences per replica%s.",
                         slo_text(w.ttft_slo_ms, "TTFT", "%.0f").c_str(),
                         slo_text(w.tpot_slo_ms, "TPOT", "%.1f").c_str(), static_cast<long long>(b.max_concurrency_slo),
                         b.meets_load ? "" : "; the workload exceeds that"));
  // 4. Replicas versus tensor parallelism when one device holds the model:
  // the sentence follows the comparison, per device so that layouts of
  // different sizes compare.
  if (one.fits && b.layout.tp == 1 && b.layout.pp == 1 && b.layout.dp > 1) {
    const Candidate* tpc = find(*plan, 2, 1);
    if (tpc != nullptr && tpc->fits && tpc->capacity_tokens_per_s > 0 && b.capacity_tokens_per_s > 0) {
      const double rep_per_dev = b.capacity_tokens_per_s / b.layout.gpus();
      const double tp_per_dev = tpc->capacity_tokens_per_s / tpc->layout.gpus();
      const bool rep_more = rep_per_dev >= tp_per_dev;
      // The cost compared is the ranking's (at the workload when it ranks
      // there), so the sentence cannot contradict the order.
      const bool by_cost = plan->ranked_by == Objective::kCost;
      const double rep_cost = by_cost ? ranked_cost(*plan, b) : b.cost_per_million_output_tokens;
      const double tp_cost = by_cost ? ranked_cost(*plan, *tpc) : tpc->cost_per_million_output_tokens;
      const char* cost_at = by_cost && plan->ranked_at_load ? "at the workload" : "at full SLO capacity";
      const bool rep_cheaper = !(tp_cost < rep_cost);  // NaN (no cost) is never cheaper
      auto cost_text = [&](double v) { return std::isfinite(v) ? rank_money(*plan, v) : std::string("no cost"); };
      const std::string nums = strfmt(
          "dp=%d (one device a copy) serves %.0f tokens/s per device at TPOT %.1f ms, %s per "
          "million %s; tp=2 serves %.0f per device at TPOT %.1f ms, %s",
          b.layout.dp, rep_per_dev, b.at_capacity.tpot_ms, cost_text(rep_cost).c_str(), cost_at, tp_per_dev,
          tpc->at_capacity.tpot_ms, cost_text(tp_cost).c_str());
      if (rep_more && rep_cheaper)
        out.push_back("Replicas beat tensor parallelism: " + nums +
                      "; tp makes two devices work on the same requests and adds two all-reduces per layer.");
      else if (tpc->at_capacity.tpot_ms < b.at_capacity.tpot_ms && !rep_cheaper)
        out.push_back("Tensor parallelism is faster and cheaper here, but " + nums + "; " +
                      (by_cost && tier(*tpc) == tier(b)
                           ? std::string("the replicas rank first only by the ranking's preference for smaller "
                                         "replicas (docs/plan.md).")
                           : "the replicas rank first by " + plan->ranking_basis + "."));
      else if (tpc->at_capacity.tpot_ms < b.at_capacity.tpot_ms)
        out.push_back("Replicas for throughput, tensor parallelism for latency: " + nums + ".");
      else
        out.push_back("Replicas and tp=2 compared: " + nums + ".");
    }
  }
  // 5. Tensor parallelism over slow links.
  for (const auto& c : plan->candidates) {
    if (c.layout.tp > 1 && !c.tp_link.fast && c.fits) {
      out.push_back(strfmt("tp=%d would run its all-reduces over %s (%.0f GB/s): two per layer per token, %s.",
                           c.layout.tp, c.tp_link.kind.c_str(), c.tp_link.bw_gbps,
                           one.fits
                               ? "so replicas are preferred since one device holds the model"
                               : "acceptable only because the model must be split; pipeline stages need less traffic"));
      break;
    }
  }
  // 6. Runner-up, by the comparison the ranking made.
  if (plan->runner_up >= 0) {
    const Candidate& ru = plan->candidates[plan->runner_up];
    out.push_back("Runner-up " + layout_label(ru.layout) + ": " + runner_up_why(*plan, b, ru) + ".");
  }
  // 7. Capacity and the seeds' cost. The recommended layout fills the
  // devices given; the capacity line is what the peak needs: say which to buy.
  const Capacity& cap = plan->capacity;
  if (cap.unit != "offline" && cap.per_replica > 0) {
    std::string s = strfmt(
        "Capacity: peak %.4g %s / %.4g per replica x headroom %.2f -> %lld replica(s) of %s = %lld devices", cap.peak,
        cap.unit.c_str(), cap.per_replica, r.economics.headroom, static_cast<long long>(cap.replicas),
        layout_label(Layout{1, b.layout.tp, b.layout.pp, b.layout.ep}).c_str(), static_cast<long long>(cap.gpus));
    if (cap.gpus > b.layout.gpus())
      s += strfmt("; the %d device(s) given hold %d of them: the peak needs %lld more", b.layout.gpus(), b.layout.dp,
                  static_cast<long long>(cap.gpus - b.layout.gpus()));
    else if (cap.gpus < b.layout.gpus())
      s += strfmt("; the recommendation's dp=%d uses all %d devices given, %lld replica(s) already carry the peak",
                  b.layout.dp, b.layout.gpus(), static_cast<long long>(cap.replicas));
    out.push_back(s + ".");
  }
  const MonthlyCost& mc = plan->cost;
  {
    std::string s =
        strfmt("Cost per month (30 days): cards %s (%s) + power %s (%.0f kWh%s) + ops %s = %s",
               money(*plan, mc.cards_month).c_str(), mc.card_basis.c_str(), money(*plan, mc.power_month).c_str(),
               mc.power_kwh_month, r.economics.power_price > 0 ? "" : ", no --power-price",
               money(*plan, mc.ops_month).c_str(), money(*plan, mc.total_month).c_str());
    if (mc.cost_per_million_volume > 0)
      s += strfmt("; %.4g M output tokens a month at %.0f requests a day -> %.3f %s per million (%.0f%% of capacity)",
                  mc.tokens_month_volume / 1e6, r.economics.daily_requests, mc.cost_per_million_volume,
                  mc.currency.c_str(), mc.utilization * 100);
    if (mc.cost_per_million_capacity > 0)
      s += strfmt("; at full capacity %.3f %s per million", mc.cost_per_million_capacity, mc.currency.c_str());
    out.push_back(s + ".");
  }
  if (plan->verdict == Verdict::kCantKeepUp) {
    if (cap.replicas > 1 || plan->recommended.dp > 1)
      out.push_back(
          strfmt("Can't keep up on one device: the model fits, but the load needs %lld replicas (data parallel), "
                 "not a bigger one.",
                 static_cast<long long>(std::max<int64_t>(cap.replicas, plan->recommended.dp))));
    else
      out.push_back(
          strfmt("Can't keep up on one device: the model fits, but one device misses the load within the SLOs; "
                 "%s carries it as one replica on %d devices.",
                 layout_label(b.layout).c_str(), b.layout.gpus()));
  }
}

}  // namespace parallm::planner
