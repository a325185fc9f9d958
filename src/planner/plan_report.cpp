// Human-readable report: model facts, a table of candidates, per-device
// memory bars of the recommendation, reasons, capacity and launch commands.
#include <algorithm>
#include <sstream>

#include "planner/plan_output.h"
#include "util/log.h"

namespace parallm::planner {

namespace {

std::string bar(const DeviceMemory& m, int width) {
  // w = weights, k = KV pool, a = activations, o = overhead, . = free
  std::string s;
  auto put = [&](double bytes, char ch) {
    int n = static_cast<int>(bytes / m.capacity_bytes * width + 0.5);
    s.append(static_cast<size_t>(std::max(0, std::min(n, width - static_cast<int>(s.size())))), ch);
  };
  put(m.weights_bytes, 'w');
  put(m.activation_bytes, 'a');
  put(m.overhead_bytes, 'o');
  put(m.kv_bytes, 'k');
  s.append(static_cast<size_t>(std::max(0, width - static_cast<int>(s.size()))), '.');
  return "[" + s + "]";
}

}  // namespace

std::string plan_to_text(const Plan& plan) {
  const PlanRequest& r = plan.request;
  std::ostringstream o;
  o << strfmt("Model    %s: %.2fB parameters (%.2fB active), %s weights = %.1f GB, KV %.0f bytes/token (%s)\n",
              r.model.name.c_str(), plan.params.total / 1e9, plan.params.active / 1e9, r.weights.name.c_str(),
              plan.weight_bytes / 1e9, plan.kv_bytes_per_token, r.kv_dtype.c_str());
  o << strfmt("Hardware %s; %.1f GB and %.0f GB/s per device\n", r.fabric.description.c_str(),
              r.gpu.memory_bytes / 1e9, r.gpu.mem_bw_gbps);
  const Workload& w = r.workload;
  std::string load = w.mode == LoadMode::kOffline ? "offline (max throughput)"
                     : w.mode == LoadMode::kQps   ? strfmt("%.3g requests/s", w.qps)
                                                  : strfmt("%.0f concurrent", w.concurrency);
  o << strfmt("Workload %lld in / %lld out tokens, %s", static_cast<long long>(w.input_len),
              static_cast<long long>(w.output_len), load.c_str());
  if (w.ttft_slo_ms > 0) o << strfmt(", TTFT <= %.0f ms", w.ttft_slo_ms);
  if (w.tpot_slo_ms > 0) o << strfmt(", TPOT <= %.1f ms", w.tpot_slo_ms);
  o << "\n\nVerdict: " << verdict_name(plan.verdict) << "   recommended: " << layout_label(plan.recommended) << "\n\n";
  o << strfmt("  %-22s %4s %4s %9s %9s %9s %8s %9s %9s %8s\n", "layout", "gpus", "fits", "weights/d", "KV tokens",
              "TTFT ms", "TPOT ms", "tok/s", "max@SLO", "$/Mtok");
  size_t shown = 0;
  for (const auto& c : plan.candidates) {
    if (++shown > 12) {
      o << strfmt("  ... %zu more in --json\n", plan.candidates.size() - 12);
      break;
    }
    if (!c.fits) {
      o << strfmt("  %-22s %4d %4s %8.1fG %9lld %9s %8s %9s %9s %8s\n", layout_label(c.layout).c_str(),
                  c.layout.gpus(), "no", c.memory.weights_bytes / 1e9, static_cast<long long>(c.memory.kv_capacity_tokens),
                  "-", "-", "-", "-", "-");
      continue;
    }
    o << strfmt("  %-22s %4d %4s %8.1fG %9lld %9.0f %8.1f %9.0f %9lld %8.3f\n", layout_label(c.layout).c_str(),
                c.layout.gpus(), "yes", c.memory.weights_bytes / 1e9,
                static_cast<long long>(c.memory.kv_capacity_tokens), c.at_load.ttft_ms, c.at_load.tpot_ms,
                c.output_tokens_per_s, static_cast<long long>(c.max_concurrency_slo), c.cost_per_million_output_tokens);
  }
  if (plan.best >= 0) {
    const DeviceMemory& m = plan.candidates[plan.best].memory;
    o << "\nPer-device memory of the recommendation (w weights, a activations, o runtime, k KV pool, . free):\n";
    o << "  " << bar(m, 50)
      << strfmt(" %.1f of %.1f GB (cap %.0f%%)\n", m.total_bytes / 1e9, m.capacity_bytes / 1e9,
                r.memory.gpu_memory_utilization * 100);
  }
  o << "\nWhy:\n";
  for (const auto& s : plan.reasons) o << "  - " << s << "\n";
  if (plan.capacity.replicas > 0)
    o << strfmt("\nCapacity: %lld replica(s), %lld devices, $%.2f/h, $%.0f/month\n",
                static_cast<long long>(plan.capacity.replicas), static_cast<long long>(plan.capacity.gpus),
                plan.capacity.cost_per_hour, plan.capacity.cost_per_month);
  if (!plan.commands.vllm.empty()) {
    o << "\nLaunch:\n";
    o << "  " << plan.commands.parallm << "\n  " << plan.commands.vllm << "\n  " << plan.commands.sglang << "\n  "
      << plan.commands.trtllm << "\n  " << plan.commands.llamacpp << "\n";
  }
  return o.str();
}

}  // namespace parallm::planner
