// The --html report: one self-contained page (inline CSS and SVG, no script,
// nothing fetched) with the results table, throughput and P95 latency against
// load, and the latency CDFs of every level.
#include <algorithm>

#include "loadtest/bench_runner.h"
#include "loadtest/svg_chart.h"
#include "util/log.h"

namespace parallm::loadtest {
namespace {

double load_of(const LevelResult& r) { return r.rate > 0 ? r.rate : static_cast<double>(r.concurrency); }

std::string level_name(const LevelResult& r) {
  return r.rate > 0 ? strfmt("%.4g req/s", r.rate) : strfmt("concurrency %lld", static_cast<long long>(r.concurrency));
}

// At most ~200 points of the empirical CDF of sorted samples.
std::vector<std::pair<double, double>> cdf_points(const std::vector<double>& sorted) {
  std::vector<std::pair<double, double>> pts;
  const size_t n = sorted.size();
  if (n == 0) return pts;
  const size_t step = std::max<size_t>(1, n / 200);
  pts.emplace_back(sorted[0], 0.0);
  for (size_t i = 0; i < n; i += step) pts.emplace_back(sorted[i], static_cast<double>(i + 1) / static_cast<double>(n));
  pts.emplace_back(sorted[n - 1], 1.0);
  return pts;
}

std::string cdf_chart(const BenchReport& rep, const char* title, const char* x_label,
                      std::vector<double> LevelResult::*samples, double slo) {
  ChartSpec spec;
  spec.title = title;
  spec.x_label = x_label;
  spec.y_label = "share of requests";
  for (const LevelResult& r : rep.results) spec.series.push_back({level_name(r), cdf_points(r.*samples), false});
  std::string svg = render_line_chart(spec);
  (void)slo;
  return svg;
}

std::string vs_load_chart(const BenchReport& rep, const std::string& title, const std::string& y_label,
                          const std::vector<std::pair<std::string, double (*)(const LevelResult&)>>& metrics,
                          double slo, const std::string& slo_label) {
  ChartSpec spec;
  spec.title = title;
  spec.x_label = rep.options.open_loop() ? "request rate (req/s)" : "concurrency (streams in flight)";
  spec.y_label = y_label;
  std::vector<const LevelResult*> sorted;
  for (const LevelResult& r : rep.results) sorted.push_back(&r);
  std::sort(sorted.begin(), sorted.end(), [](auto* a, auto* b) { return load_of(*a) < load_of(*b); });
  double lo = 0, hi = 0;
  if (!sorted.empty()) lo = load_of(*sorted.front()), hi = load_of(*sorted.back());
  spec.log_x = lo > 0 && hi / lo >= 8;
  for (const auto& [name, get] : metrics) {
    ChartSeries s{name, {}, true};
    for (const LevelResult* r : sorted) s.points.emplace_back(load_of(*r), get(*r));
    spec.series.push_back(std::move(s));
  }
  if (slo > 0) spec.h_lines.emplace_back(slo_label, slo);
  return render_line_chart(spec);
}

}  // namespace

std::string html_report(const BenchReport& rep) {
  const BenchOptions& o = rep.options;
  std::string h;
  h += "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>parallm bench report</title>\n";
  h += "<style>body{font-family:sans-serif;margin:24px;color:#222;max-width:1200px}"
       "h1{font-size:22px}h2{font-size:17px;margin-top:28px}"
       "table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ccc;padding:4px 8px;text-align:right}"
       "th{background:#f2f2f2}td:first-child,th:first-child{text-align:left}"
       ".charts{display:flex;flex-wrap:wrap;gap:12px}.charts svg{border:1px solid #ddd;max-width:100%;height:auto}"
       ".box{background:#f6f8fa;border:1px solid #d0d7de;padding:10px 14px;margin:10px 0}"
       "dl{font-size:13px}dt{font-weight:bold}dd{margin:0 0 6px 16px}</style>\n</head><body>\n";
  h += "<h1>parallm bench report</h1>\n<div class=\"box\">";
  h += "<b>Server:</b> " + xml_escape(o.url.to_string().substr(0, 7 + o.url.authority().size()) + rep.request_path);
  h += " &nbsp; <b>Model:</b> " + xml_escape(rep.model.empty() ? "(none)" : rep.model);
  h += strfmt(" &nbsp; <b>Load:</b> %s", o.open_loop() ? "Poisson arrivals" : "closed loop");
  h += strfmt(" &nbsp; <b>Input:</b> %lld&ndash;%lld tokens &nbsp; <b>Output:</b> %lld&ndash;%lld tokens",
              static_cast<long long>(o.input_len.min), static_cast<long long>(o.input_len.max),
              static_cast<long long>(o.output_len.min), static_cast<long long>(o.output_len.max));
  h += "<br><b>SLOs:</b> ";
  h += o.ttft_slo_ms > 0 ? strfmt("TTFT &le; %.4g ms ", o.ttft_slo_ms) : "";
  h += o.tpot_slo_ms > 0 ? strfmt("TPOT &le; %.4g ms", o.tpot_slo_ms) : "";
  if (o.ttft_slo_ms <= 0 && o.tpot_slo_ms <= 0) h += "none (goodput = share of successful requests)";
  h += "</div>\n";
  if (rep.capacity) {
    const CapacityResult& c = *rep.capacity;
    h += "<h2>Capacity</h2>\n<div class=\"box\" id=\"capacity\">";
    if (c.best_level < 0) {
      h += "No load tried met the SLOs.";
    } else {
      h += strfmt(
          "Largest load meeting the SLOs (goodput &ge; %.0f%%): <b>%s%s</b> per server "
          "(%.2f req/s, %.1f streams in flight).",
          o.goodput_target * 100, c.reached_max ? "at least " : "",
          c.open_loop ? strfmt("%.4g req/s", c.capacity).c_str() : strfmt("concurrency %.0f", c.capacity).c_str(),
          c.per_server_qps, c.per_server_concurrency);
      if (c.servers_for_peak_concurrency > 0) {
        h += strfmt("<br>Peak concurrency %.6g &times; headroom %.2f needs <b>%lld server(s)</b>.", c.peak_concurrency,
                    c.headroom, static_cast<long long>(c.servers_for_peak_concurrency));
      }
      if (c.servers_for_peak_qps > 0) {
        h += strfmt("<br>Peak %.6g req/s &times; headroom %.2f needs <b>%lld server(s)</b>.", c.peak_qps, c.headroom,
                    static_cast<long long>(c.servers_for_peak_qps));
      }
    }
    h += "</div>\n";
  }
  h += "<h2>Results</h2>\n<table id=\"results\"><tr><th>load</th><th>requests</th><th>failed</th><th>req/s</th>"
       "<th>output tok/s</th><th>decode tok/s</th><th>TTFT p50 / p95 / p99 (ms)</th><th>TPOT p50 / p95 / p99 (ms)</th>"
       "<th>ITL p95 (ms)</th><th>E2E p50 / p95 (ms)</th><th>goodput</th></tr>\n";
  for (const LevelResult& r : rep.results) {
    h += strfmt(
        "<tr><td>%s</td><td>%lld</td><td>%lld</td><td>%.2f</td><td>%.1f</td><td>%.1f</td><td>%.1f / %.1f / %.1f</td>"
        "<td>%.2f / %.2f / %.2f</td><td>%.2f</td><td>%.0f / %.0f</td><td>%.1f%%</td></tr>\n",
        level_name(r).c_str(), static_cast<long long>(r.requests), static_cast<long long>(r.failed()), r.requests_per_s,
        r.output_tokens_per_s, r.decode_tokens_per_s, r.ttft_ms.p50, r.ttft_ms.p95, r.ttft_ms.p99, r.tpot_ms.p50,
        r.tpot_ms.p95, r.tpot_ms.p99, r.itl_ms.p95, r.e2e_ms.p50, r.e2e_ms.p95, r.goodput * 100);
  }
  h += "</table>\n";
  bool any_errors = false;
  for (const LevelResult& r : rep.results) any_errors = any_errors || r.failed() > 0;
  if (any_errors) {
    h += "<h2>Errors</h2>\n<table id=\"errors\"><tr><th>load</th><th>kind</th><th>count</th><th>first "
         "message</th></tr>\n";
    for (const LevelResult& r : rep.results) {
      for (int k = 1; k < kNumErrorKinds; ++k) {
        if (r.errors[k] == 0) continue;
        h += "<tr><td>" + level_name(r) + "</td><td>" + std::string(error_kind_name(static_cast<ErrorKind>(k))) +
             "</td><td>" + std::to_string(r.errors[k]) + "</td><td style=\"text-align:left\">" +
             xml_escape(r.error_sample[k]) + "</td></tr>\n";
      }
    }
    h += "</table>\n";
  }
  h += "<h2>Throughput and tail latency against load</h2>\n<div class=\"charts\">\n";
  h += vs_load_chart(rep, "Output throughput", "output tokens/s",
                     {{"output tokens/s", [](const LevelResult& r) { return r.output_tokens_per_s; }}}, 0, "");
  h += vs_load_chart(rep, "P95 time to first token", "ms",
                     {{"TTFT p95", [](const LevelResult& r) { return r.ttft_ms.p95; }}}, o.ttft_slo_ms, "TTFT SLO");
  h += vs_load_chart(rep, "P95 time per output token", "ms",
                     {{"TPOT p95", [](const LevelResult& r) { return r.tpot_ms.p95; }},
                      {"ITL p95", [](const LevelResult& r) { return r.itl_ms.p95; }}},
                     o.tpot_slo_ms, "TPOT SLO");
  h +=
      vs_load_chart(rep, "Goodput", "share meeting SLOs", {{"goodput", [](const LevelResult& r) { return r.goodput; }}},
                    rep.capacity ? o.goodput_target : 0, "target");
  h += "</div>\n<h2>Latency distributions (CDF)</h2>\n<div class=\"charts\">\n";
  h += cdf_chart(rep, "Time to first token", "TTFT (ms)", &LevelResult::ttft_samples, o.ttft_slo_ms);
  h += cdf_chart(rep, "Time per output token", "TPOT (ms)", &LevelResult::tpot_samples, o.tpot_slo_ms);
  h += cdf_chart(rep, "Inter-token latency", "ITL (ms)", &LevelResult::itl_samples, 0);
  h += cdf_chart(rep, "End-to-end latency", "E2E (ms)", &LevelResult::e2e_samples, 0);
  h += "</div>\n<h2>Client overhead</h2>\n<table id=\"client\"><tr><th>load</th><th>CPU &micro;s per token</th>"
       "<th>event loop busy</th><th>max streams in flight</th><th>connections opened</th></tr>\n";
  for (const LevelResult& r : rep.results) {
    h += strfmt("<tr><td>%s</td><td>%.2f</td><td>%.1f%%</td><td>%lld</td><td>%lld</td></tr>\n", level_name(r).c_str(),
                r.client_cpu_us_per_token, r.client_cpu_share * 100, static_cast<long long>(r.max_in_flight),
                static_cast<long long>(r.connections_opened));
  }
  h += "</table>\n<h2>Definitions</h2>\n<dl>"
       "<dt>TTFT</dt><dd>request sent (connection opened when a new one was needed) to the first chunk carrying "
       "text.</dd>"
       "<dt>TPOT</dt><dd>per request, (end-to-end &minus; TTFT) / (output tokens &minus; 1).</dd>"
       "<dt>ITL</dt><dd>gaps between successive text-bearing chunks, pooled over all requests.</dd>"
       "<dt>Goodput</dt><dd>share of issued requests that succeeded and met every SLO given.</dd>"
       "<dt>Percentiles</dt><dd>linear interpolation between order statistics; latencies of successful requests "
       "only.</dd>"
       "</dl>\n</body></html>\n";
  return h;
}

}  // namespace parallm::loadtest
