// The stdout table: one row per level, then errors, client overhead and the
// capacity plan. Meant to be read in a terminal; the JSON carries everything.
#include <ostream>

#include "loadtest/bench_runner.h"
#include "util/log.h"

namespace parallm::loadtest {
namespace {

std::string load_label(const LevelResult& r) {
  if (r.rate > 0) return strfmt("%.4g/s", r.rate);
  return strfmt("c=%lld", static_cast<long long>(r.concurrency));
}

std::string load_unit(bool open_loop, double load) {
  return open_loop ? strfmt("%.4g req/s", load) : strfmt("concurrency %.0f", load);
}

}  // namespace

void write_text_report(const BenchReport& report, std::ostream& out) {
  const BenchOptions& o = report.options;
  out << "parallm bench " << o.url.to_string().substr(0, 7 + o.url.authority().size()) << report.request_path
      << "  model '" << (report.model.empty() ? "(none)" : report.model) << "'  "
      << (o.open_loop() ? "Poisson arrivals" : "closed loop") << "\n";
  std::string slo_text;
  if (o.ttft_slo_ms > 0) slo_text += strfmt("TTFT <= %.4g ms", o.ttft_slo_ms);
  if (o.tpot_slo_ms > 0) slo_text += strfmt("%sTPOT <= %.4g ms", slo_text.empty() ? "" : ", ", o.tpot_slo_ms);
  out << "SLOs: " << (slo_text.empty() ? "none (goodput = share of successful requests)" : slo_text) << "\n\n";
  out << strfmt("%9s %6s %5s %8s %9s %10s %10s %17s %15s %8s %9s %8s\n", "load", "reqs", "fail", "req/s", "in tok/s",
                "out tok/s", "dec tok/s", "TTFT ms p50/p95", "TPOT ms p50/p95", "ITL p95", "E2E p95", "goodput");
  for (const LevelResult& r : report.results) {
    out << strfmt("%9s %6lld %5lld %8.2f %9.1f %10.1f %10.1f %8.1f/%-8.1f %7.2f/%-7.2f %8.2f %9.1f %7.1f%%\n",
                  load_label(r).c_str(), static_cast<long long>(r.requests), static_cast<long long>(r.failed()),
                  r.requests_per_s, r.input_tokens_per_s, r.output_tokens_per_s, r.decode_tokens_per_s, r.ttft_ms.p50,
                  r.ttft_ms.p95, r.tpot_ms.p50, r.tpot_ms.p95, r.itl_ms.p95, r.e2e_ms.p95, r.goodput * 100);
  }
  bool any_errors = false;
  for (const LevelResult& r : report.results) {
    if (r.failed() == 0) continue;
    if (!any_errors) out << "\nerrors:\n";
    any_errors = true;
    out << "  " << load_label(r) << ":";
    for (int k = 1; k < kNumErrorKinds; ++k) {
      if (r.errors[k] == 0) continue;
      out << " " << error_kind_name(static_cast<ErrorKind>(k)) << " " << r.errors[k] << " ("
          << r.error_sample[k].substr(0, 80) << ")";
    }
    out << "\n";
  }
  double worst_us = 0, worst_share = 0;
  int64_t max_streams = 0;
  for (const LevelResult& r : report.results) {
    worst_us = std::max(worst_us, r.client_cpu_us_per_token);
    worst_share = std::max(worst_share, r.client_cpu_share);
    max_streams = std::max(max_streams, r.max_in_flight);
  }
  out << strfmt(
      "\nclient: %.1f us CPU per token (worst level), event loop busy %.1f%% of a core, "
      "up to %lld streams in flight on 1 thread%s\n",
      worst_us, worst_share * 100, static_cast<long long>(max_streams),
      worst_share > 0.7 ? "  WARNING: the client may be the bottleneck" : "");
  if (report.capacity) {
    const CapacityResult& c = *report.capacity;
    out << "\ncapacity (goodput >= " << strfmt("%.0f%%", o.goodput_target * 100) << "): ";
    if (c.best_level < 0) {
      out << "no load tried meets the SLOs (down to "
          << load_unit(c.open_loop, c.levels.back().rate > 0 ? c.levels.back().rate
                                                             : static_cast<double>(c.levels.back().concurrency))
          << ")\n";
    } else {
      out << (c.reached_max ? "at least " : "") << load_unit(c.open_loop, c.capacity) << " per server"
          << strfmt(" (%.2f req/s, %.1f streams in flight)\n", c.per_server_qps, c.per_server_concurrency);
    }
    if (c.servers_for_peak_concurrency > 0) {
      out << strfmt("plan: peak concurrency %.6g x headroom %.2f -> %lld server(s)\n", c.peak_concurrency, c.headroom,
                    static_cast<long long>(c.servers_for_peak_concurrency));
    }
    if (c.servers_for_peak_qps > 0) {
      out << strfmt("plan: peak %.6g req/s x headroom %.2f -> %lld server(s)\n", c.peak_qps, c.headroom,
                    static_cast<long long>(c.servers_for_peak_qps));
    }
  }
}

}  // namespace parallm::loadtest
