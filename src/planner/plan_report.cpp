// Human-readable report: model facts, a table of candidates, per-device
// memory bars of the recommendation, reasons, capacity and launch commands.
#include <algorithm>
#include <cmath>
#include <sstream>

#include "planner/plan_output.h"
#include "util/log.h"

namespace parallm::planner {

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

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
  // Memory in GiB (2^30 B; an "80 GB" A100 holds 80 GiB), bandwidth in GB/s (1e9 B/s).
  o << strfmt("Model    %s: %.2fB parameters (%.2fB active), %s weights = %.1f GiB, KV %.0f bytes/token (%s)\n",
              r.model.name.c_str(), plan.params.total / 1e9, plan.params.active / 1e9, r.weights.name.c_str(),
              plan.weight_bytes / kGiB, plan.kv_bytes_per_token, r.kv_dtype.c_str());
  o << strfmt("Hardware %s; %.1f GiB and %.0f GB/s per device\n", r.fabric.description.c_str(),
              r.gpu.memory_bytes / kGiB, r.gpu.mem_bw_gbps);
  const Workload& w = r.workload;
  std::string load = w.mode == LoadMode::kOffline ? "offline (max throughput)"
                     : w.mode == LoadMode::kQps   ? strfmt("%.3g requests/s", w.qps)
                                                  : strfmt("%.0f concurrent", w.concurrency);
  o << strfmt("Workload %lld in / %lld out tokens, %s", static_cast<long long>(w.input_len),
              static_cast<long long>(w.output_len), load.c_str());
  o << (w.ttft_slo_ms > 0 ? strfmt(", TTFT <= %.0f ms", w.ttft_slo_ms) : std::string(", TTFT SLO: none"));
  o << (w.tpot_slo_ms > 0 ? strfmt(", TPOT <= %.1f ms", w.tpot_slo_ms) : std::string(", TPOT SLO: none"));
  o << "\n\nVerdict: " << verdict_name(plan.verdict) << "   recommended: " << layout_label(plan.recommended);
  if (plan.capacity.replicas > 0 && plan.capacity.gpus != plan.recommended.gpus())
    o << strfmt("   for the peak: %lld replica(s) = %lld devices", static_cast<long long>(plan.capacity.replicas),
                static_cast<long long>(plan.capacity.gpus));
  o << "\n\n";
  // TTFT and TPOT at the workload, P50 / P95 over requests; the cost column is
  // the one the ranking compared (at the workload or at full SLO capacity).
  const std::string cost_head = plan.request.economics.currency + (plan.ranked_at_load ? "/Mtok@load" : "/Mtok@cap");
  o << strfmt("  %-22s %4s %4s %8s %9s %8s %8s %7s %7s %9s %7s %11s\n", "layout", "gpus", "fits", "GiB/dev",
              "KV tokens", "TTFT p50", "TTFT p95", "TPOT50", "TPOT95", "tok/s", "max@SLO", cost_head.c_str());
  size_t shown = 0;
  const std::string dash = "\u2013";  // one column wide, three bytes: padded by hand
  auto cell = [](const std::string& v, int width) {
    size_t cols = 0;
    for (unsigned char ch : v) cols += (ch & 0xC0) != 0x80;  // UTF-8 code points
    return std::string(static_cast<size_t>(std::max(0, width - static_cast<int>(cols))) + 1, ' ') + v;
  };
  auto num = [&](double v, const char* fmt) { return std::isfinite(v) ? strfmt(fmt, v) : dash; };
  for (const auto& c : plan.candidates) {
    if (++shown > 12) {
      o << strfmt("  ... %zu more in --json\n", plan.candidates.size() - 12);
      break;
    }
    o << strfmt("  %-22s %4d %4s %8.1f %9lld", layout_label(c.layout).c_str(), c.layout.gpus(), c.fits ? "yes" : "no",
                c.memory.weights_bytes / kGiB, static_cast<long long>(c.memory.kv_capacity_tokens));
    if (!c.fits) {
      for (int width : {8, 8, 7, 7, 9, 7, 11}) o << cell(dash, width);
      o << "\n";
      continue;
    }
    // A candidate that misses the SLOs has no capacity and no cost: "\u2013", never 0.
    const bool has_capacity = c.max_concurrency_slo > 0;
    o << cell(num(c.at_load.ttft_p50_ms, "%.0f"), 8) << cell(num(c.at_load.ttft_p95_ms, "%.0f"), 8)
      << cell(num(c.at_load.tpot_p50_ms, "%.1f"), 7) << cell(num(c.at_load.tpot_p95_ms, "%.1f"), 7)
      << cell(num(c.output_tokens_per_s, "%.0f"), 9)
      << cell(has_capacity ? std::to_string(static_cast<long long>(c.max_concurrency_slo)) : dash, 7)
      << cell(num(ranked_cost(plan, c), "%.3f"), 11) << "\n";
  }
  o << "  Ranked by " << plan.ranking_basis << "; first row = the recommendation.\n";
  o << (plan.ranked_at_load
            ? "  Cost column: per million output tokens at the workload (the devices its replicas need x headroom).\n"
            : "  Cost column: per million output tokens at full SLO capacity.\n");
  if (plan.best >= 0) {
    const DeviceMemory& m = plan.candidates[plan.best].memory;
    o << "\nPer-device memory of the recommendation (w weights, a activations, o runtime, k KV pool, . free):\n";
    o << "  " << bar(m, 50)
      << strfmt(" %.1f of %.1f GiB (cap %.0f%%)\n", m.total_bytes / kGiB, m.capacity_bytes / kGiB,
                r.memory.gpu_memory_utilization * 100);
  }
  o << "\nWhy:\n";
  for (const auto& s : plan.reasons) o << "  - " << s << "\n";
  if (plan.capacity.replicas > 0)
    o << strfmt("\nCapacity: %lld replica(s), %lld devices, %.2f %s/h, %.0f %s/month (30 days)\n",
                static_cast<long long>(plan.capacity.replicas), static_cast<long long>(plan.capacity.gpus),
                plan.capacity.cost_per_hour, plan.cost.currency.c_str(), plan.capacity.cost_per_month,
                plan.cost.currency.c_str());
  const LaunchCommands& cmd = plan.commands;
  const std::pair<const char*, const EngineLaunch*> engines[] = {{"parallm", &cmd.parallm_all},
                                                                 {"vLLM", &cmd.vllm_all},
                                                                 {"SGLang", &cmd.sglang_all},
                                                                 {"TensorRT-LLM", &cmd.trtllm_all},
                                                                 {"llama.cpp", &cmd.llamacpp_all}};
  bool any = false;
  for (const auto& [name, e] : engines) any = any || !e->lines.empty() || !e->note.empty();
  if (any) {
    o << "\nLaunch:\n";
    for (const auto& [name, e] : engines) {
      o << "  " << name << ":\n";
      for (const auto& l : e->lines) o << "    " << (l.where.empty() ? "" : "[" + l.where + "] ") << l.command << "\n";
      if (!e->note.empty()) o << "    # " << e->note << "\n";
    }
  }
  return o.str();
}

}  // namespace parallm::planner
