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

std::string gb(double bytes) { return strfmt("%.1f GB", bytes / 1e9); }

const Candidate* find(const Plan& plan, int tp, int pp) {
  for (const auto& c : plan.candidates)
    if (c.layout.tp == tp && c.layout.pp == pp && c.layout.ep == 1) return &c;
  return nullptr;
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
    out.push_back(strfmt("Doesn't fit: the weights take %s at %s, but one %s has %s usable (%.0f%% of %s) and also "
                         "needs %s for activations and runtime; the model must be split (tensor or pipeline "
                         "parallel) or quantized.",
                         gb(plan->weight_bytes).c_str(), r.weights.name.c_str(), g.name.c_str(), gb(usable).c_str(),
                         r.memory.gpu_memory_utilization * 100, gb(one.capacity_bytes).c_str(),
                         gb(one.activation_bytes + one.overhead_bytes).c_str()));
  } else if (!one.fits) {
    out.push_back(strfmt("Doesn't fit: the weights (%s) load on one %s, but the %s left for the KV cache hold %lld "
                         "tokens, fewer than one %lld-token sequence.",
                         gb(plan->weight_bytes).c_str(), g.name.c_str(), gb(one.kv_bytes).c_str(),
                         static_cast<long long>(one.kv_capacity_tokens), static_cast<long long>(plan->max_model_len)));
  } else {
    out.push_back(strfmt("Fits on one %s: weights %s, leaving %s of KV cache = %lld tokens (%.0f KB per token).",
                         g.name.c_str(), gb(plan->weight_bytes).c_str(), gb(one.kv_bytes).c_str(),
                         static_cast<long long>(one.kv_capacity_tokens), plan->kv_bytes_per_token / 1e3));
  }
  // 2. Quantization as the alternative to more cards.
  if (!one.fits) {
    for (const char* q : {"fp8", "int8", "int4"}) {
      WeightFormat f = parse_weight_format(q);
      if (f.bits_per_weight >= r.weights.bits_per_weight) continue;
      ModelSpec m = r.model;
      m.file_weight_bytes = 0;
      DeviceMemory d = device_memory(m, plan->params, f, r.kv_elem_bytes, g, Layout{1, 1, 1, 1}, r.memory,
                                     plan->max_model_len);
      if (d.fits) {
        out.push_back(strfmt("Quantization alternative: at %s the weights shrink to %s and fit one %s with %lld "
                             "tokens of KV cache, removing the need for another card (at some quality cost).",
                             q, gb(static_cast<double>(plan->params.total) * f.bits_per_weight / 8).c_str(),
                             g.name.c_str(), static_cast<long long>(d.kv_capacity_tokens)));
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
  out.push_back(strfmt("Recommended %s on %d device(s): %s weights and %s KV per device, %lld sequences of %lld "
                       "tokens per replica; at the workload TTFT %.0f ms, TPOT %.1f ms, %.0f output tokens/s in all.",
                       layout_label(b.layout).c_str(), b.layout.gpus(), gb(b.memory.weights_bytes).c_str(),
                       gb(b.memory.kv_bytes).c_str(), static_cast<long long>(b.max_concurrency_kv),
                       static_cast<long long>(w.input_len + w.output_len), b.at_load.ttft_ms, b.at_load.tpot_ms,
                       b.output_tokens_per_s));
  if (w.ttft_slo_ms > 0 || w.tpot_slo_ms > 0)
    out.push_back(strfmt("SLOs (TTFT <= %.0f ms, TPOT <= %.1f ms) hold up to %lld concurrent sequences per replica%s.",
                         w.ttft_slo_ms, w.tpot_slo_ms, static_cast<long long>(b.max_concurrency_slo),
                         b.meets_load ? "" : "; the workload exceeds that"));
  // 4. Replicas versus tensor parallelism when one device holds the model.
  if (one.fits && b.layout.tp == 1 && b.layout.pp == 1 && b.layout.dp > 1) {
    const Candidate* tpc = find(*plan, 2, 1);
    if (tpc != nullptr && tpc->fits && tpc->capacity_tokens_per_s > 0)
      out.push_back(strfmt("Replicas beat tensor parallelism: each copy fits one device, so dp=%d serves %.0f tokens/s "
                           "($%.3f per million) while tp=2 reaches %.0f ($%.3f): tp makes two devices work on the same "
                           "requests and adds two all-reduces per layer.",
                           b.layout.dp, b.capacity_tokens_per_s, b.cost_per_million_output_tokens,
                           tpc->capacity_tokens_per_s, tpc->cost_per_million_output_tokens));
  }
  // 5. Tensor parallelism over slow links.
  for (const auto& c : plan->candidates) {
    if (c.layout.tp > 1 && !c.tp_link.fast && c.fits) {
      out.push_back(strfmt("tp=%d would run its all-reduces over %s (%.0f GB/s): two per layer per token, %s.",
                           c.layout.tp, c.tp_link.kind.c_str(), c.tp_link.bw_gbps,
                           one.fits ? "so replicas are preferred since one device holds the model"
                                    : "acceptable only because the model must be split; pipeline stages need less traffic"));
      break;
    }
  }
  // 6. Runner-up.
  if (plan->runner_up >= 0) {
    const Candidate& ru = plan->candidates[plan->runner_up];
    std::string why;
    if (!ru.meets_load && b.meets_load) why = "it does not carry the workload within the SLOs";
    else if (ru.cost_per_million_output_tokens > b.cost_per_million_output_tokens)
      why = strfmt("it costs $%.3f instead of $%.3f per million output tokens", ru.cost_per_million_output_tokens,
                   b.cost_per_million_output_tokens);
    else why = "it needs more devices per replica";
    out.push_back("Runner-up " + layout_label(ru.layout) + ": " + why + ".");
  }
  // 7. Capacity.
  const Capacity& cap = plan->capacity;
  if (cap.unit != "offline" && cap.per_replica > 0)
    out.push_back(strfmt("Capacity: peak %.4g %s / %.4g per replica x headroom %.2f -> %lld replica(s) = %lld devices, "
                         "$%.0f per month.",
                         cap.peak, cap.unit.c_str(), cap.per_replica, r.economics.headroom,
                         static_cast<long long>(cap.replicas), static_cast<long long>(cap.gpus), cap.cost_per_month));
  if (plan->verdict == Verdict::kCantKeepUp)
    out.push_back("Can't keep up on one device: the model fits, but the load needs replicas (data parallel), not "
                  "tensor parallelism.");
}

}  // namespace parallm::planner
