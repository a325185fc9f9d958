// The --json report. Field names follow the schema (docs/bench.md):
// results[] with concurrency, rate, requests, errors{kind: n}, input_tokens,
// output_tokens, duration_s, output_tokens_per_s, requests_per_s, goodput and
// ttft_ms/tpot_ms/itl_ms/e2e_ms as {mean, p50, p90, p95, p99}; extra fields
// only add. `rate` is "inf" for closed loop; `concurrency` is null for an
// uncapped open loop. --save-detailed adds results[].detailed: per-request
// arrays (start_s, ttft_ms, tpot_ms, e2e_ms, input_tokens, output_tokens,
// error) in issue order.
#include <nlohmann/json.hpp>

#include "loadtest/bench_runner.h"

namespace parallm::loadtest {
namespace {

using nlohmann::json;

json summary_json(const Summary& s) {
  return {{"mean", s.mean}, {"p50", s.p50}, {"p90", s.p90}, {"p95", s.p95}, {"p99", s.p99}, {"count", s.count}};
}

// --save-detailed: one array per field, request i at index i (issue order).
json detailed_json(const std::vector<RequestDetail>& d) {
  json start = json::array(), ttft = json::array(), tpot = json::array(), e2e = json::array();
  json in = json::array(), out = json::array(), error = json::array();
  auto opt = [](double v) { return v >= 0 ? json(v) : json(nullptr); };
  for (const RequestDetail& r : d) {
    start.push_back(r.start_s);
    ttft.push_back(opt(r.ttft_ms));
    tpot.push_back(opt(r.tpot_ms));
    e2e.push_back(opt(r.e2e_ms));
    in.push_back(r.input_tokens);
    out.push_back(r.output_tokens);
    error.push_back(r.error == ErrorKind::kNone ? json(nullptr) : json(std::string(error_kind_name(r.error))));
  }
  return {{"start_s", start},   {"ttft_ms", ttft},      {"tpot_ms", tpot}, {"e2e_ms", e2e},
          {"input_tokens", in}, {"output_tokens", out}, {"error", error}};
}

json level_json(const LevelResult& r, bool save_detailed) {
  json errors = json::object();
  json samples = json::object();
  for (int k = 1; k < kNumErrorKinds; ++k) {
    const std::string name(error_kind_name(static_cast<ErrorKind>(k)));
    errors[name] = r.errors[k];
    if (r.errors[k] > 0) samples[name] = r.error_sample[k];
  }
  json j;
  j["concurrency"] = r.concurrency > 0 ? json(r.concurrency) : json(nullptr);
  j["rate"] = r.rate > 0 ? json(r.rate) : json("inf");
  j["requests"] = r.requests;
  j["completed"] = r.completed;
  j["failed"] = r.failed();
  j["errors"] = errors;
  j["error_samples"] = samples;
  j["input_tokens"] = r.input_tokens;
  j["output_tokens"] = r.output_tokens;
  j["output_tokens_counted"] = r.output_tokens_counted;
  j["usage_reported"] = r.usage_reported;
  j["duration_s"] = r.duration_s;
  j["output_tokens_per_s"] = r.output_tokens_per_s;
  j["decode_tokens_per_s"] = r.decode_tokens_per_s;
  j["input_tokens_per_s"] = r.input_tokens_per_s;
  j["requests_per_s"] = r.requests_per_s;
  j["goodput"] = r.goodput;
  j["goodput_requests_per_s"] = r.goodput_requests_per_s;
  j["ttft_ms"] = summary_json(r.ttft_ms);
  j["tpot_ms"] = summary_json(r.tpot_ms);
  j["itl_ms"] = summary_json(r.itl_ms);
  j["e2e_ms"] = summary_json(r.e2e_ms);
  j["max_in_flight"] = r.max_in_flight;
  j["client"] = {{"cpu_s", r.client_cpu_s},
                 {"cpu_us_per_token", r.client_cpu_us_per_token},
                 {"cpu_share", r.client_cpu_share},
                 {"connections_opened", r.connections_opened},
                 {"threads", 1}};
  if (save_detailed) j["detailed"] = detailed_json(r.detailed);
  return j;
}

}  // namespace

std::string json_report(const BenchReport& report) {
  const BenchOptions& o = report.options;
  json config = {
      {"url", o.url.to_string()},
      {"request_path", report.request_path},
      {"model", report.model},
      {"endpoint", endpoint_name(o.endpoint)},
      {"mode", o.open_loop() ? "poisson" : "closed_loop"},
      {"num_requests", o.num_requests},
      {"duration_s", o.duration_s},
      {"input_len", {{"min", o.input_len.min}, {"max", o.input_len.max}}},
      {"output_len", {{"min", o.output_len.min}, {"max", o.output_len.max}}},
      {"dataset", o.dataset_path.empty() ? json(nullptr) : json(o.dataset_path)},
      {"ttft_slo_ms", o.ttft_slo_ms > 0 ? json(o.ttft_slo_ms) : json(nullptr)},
      {"tpot_slo_ms", o.tpot_slo_ms > 0 ? json(o.tpot_slo_ms) : json(nullptr)},
      {"seed", o.seed},
      {"timeout_s", o.timeout_s},
  };
  json j;
  j["tool"] = "parallm bench";
  j["config"] = config;
  j["results"] = json::array();
  for (const LevelResult& r : report.results) j["results"].push_back(level_json(r, o.save_detailed));
  if (report.capacity) {
    const CapacityResult& c = *report.capacity;
    json levels = json::array();
    for (size_t i = 0; i < c.levels.size(); ++i) {
      const LevelResult& r = c.levels[i];
      levels.push_back({{"load", c.open_loop ? r.rate : static_cast<double>(r.concurrency)},
                        {"goodput", r.goodput},
                        {"passed", static_cast<bool>(c.passed[i])}});
    }
    auto opt = [](double v) { return v > 0 ? json(v) : json(nullptr); };
    auto opt_servers = [](int64_t v) { return v > 0 ? json(v) : json(nullptr); };
    j["capacity"] = {
        {"search", c.open_loop ? "rate" : "concurrency"},
        {"goodput_target", o.goodput_target},
        {"capacity", c.best_level >= 0 ? json(c.capacity) : json(nullptr)},
        {"reached_max", c.reached_max},
        {"per_server_concurrency", opt(c.per_server_concurrency)},
        {"per_server_qps", opt(c.per_server_qps)},
        {"peak_concurrency", opt(c.peak_concurrency)},
        {"peak_qps", opt(c.peak_qps)},
        {"headroom", c.headroom},
        {"servers_for_peak_concurrency", opt_servers(c.servers_for_peak_concurrency)},
        {"servers_for_peak_qps", opt_servers(c.servers_for_peak_qps)},
        {"levels", levels},
    };
  } else {
    j["capacity"] = nullptr;
  }
  return j.dump(2) + "\n";
}

}  // namespace parallm::loadtest
