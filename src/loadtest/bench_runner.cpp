// Orchestration of a bench run; see bench_runner.h.
#include "loadtest/bench_runner.h"

#include <chrono>
#include <nlohmann/json.hpp>
#include <thread>

#include "loadtest/stream_client.h"
#include "loadtest/workload.h"
#include "util/check.h"
#include "util/json_parse.h"
#include "util/log.h"

namespace parallm::loadtest {
namespace {

// The first model id the server lists, or "" (llama.cpp and others accept none).
std::string discover_model(const ServerAddress& server, const BenchOptions& o) {
  try {
    const HttpGetResult r = http_get(server, o.url, models_path(o.url), o.api_key, 5.0);
    if (r.status != 200) return "";
    const auto parsed = try_parse_json<nlohmann::json>(r.body, JsonLimits{kRequestJsonDepth});
    if (!parsed) return "";
    const nlohmann::json& j = *parsed;
    if (j.is_object() && j.contains("data") && j["data"].is_array() && !j["data"].empty() && j["data"][0].is_object() &&
        j["data"][0].contains("id") && j["data"][0]["id"].is_string()) {
      return j["data"][0]["id"].get<std::string>();
    }
  } catch (const InputError&) {
  }
  return "";
}

// A server that is up but still loading its model answers 503 (parallm,
// vLLM): wait for it, as vLLM's benchmark does, rather than record every
// request of the first level as failed.
void wait_until_ready(const ServerAddress& server, const BenchOptions& o, std::ostream* progress) {
  const auto start = std::chrono::steady_clock::now();
  bool said = false;
  for (;;) {
    const HttpGetResult r = http_get(server, o.url, models_path(o.url), o.api_key, 5.0);
    if (r.status != 503) return;
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (waited >= o.ready_timeout_s) {
      throw InputError(
          strfmt("the server still answers 503 (not ready) after %.0f s; raise --ready-timeout", o.ready_timeout_s));
    }
    if (!said && progress != nullptr) {
      *progress << "bench: the server is not ready yet (503), waiting up to " << o.ready_timeout_s << " s\n";
      progress->flush();
      said = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
}

void print_progress(std::ostream* progress, const LevelResult& r) {
  if (progress == nullptr) return;
  *progress << "bench: "
            << (r.rate > 0 ? strfmt("rate %.3g req/s", r.rate)
                           : strfmt("concurrency %lld", static_cast<long long>(r.concurrency)))
            << strfmt(": %lld requests, %lld failed, %.1f s, %.1f output tok/s, TTFT p95 %.1f ms, goodput %.1f%%\n",
                      static_cast<long long>(r.requests), static_cast<long long>(r.failed()), r.duration_s,
                      r.output_tokens_per_s, r.ttft_ms.p95, r.goodput * 100);
  progress->flush();
}

}  // namespace

BenchReport run_bench(const BenchOptions& o, std::ostream* progress) {
  BenchReport report;
  report.options = o;
  if (!o.dataset_path.empty()) load_dataset(o.dataset_path);  // bad files fail before any traffic
  const ServerAddress server = resolve_address(o.url);
  probe_connect(server, 5.0);
  wait_until_ready(server, o, progress);
  report.model = o.model.empty() ? discover_model(server, o) : o.model;
  report.request_path = endpoint_path(o.url, o.endpoint == Endpoint::kChat);
  if (progress != nullptr) {
    *progress << "bench: " << server.display << report.request_path << " model '"
              << (report.model.empty() ? "(none)" : report.model) << "'\n";
  }
  const Workload workload(report.options, report.model);
  const Slo slo{o.ttft_slo_ms, o.tpot_slo_ms};
  int level = 0;
  auto run_one = [&](int64_t concurrency, double rate, int64_t num_requests) {
    LevelSpec spec;
    spec.level = level++;
    spec.concurrency = concurrency;
    spec.rate = rate;
    spec.num_requests = num_requests;
    spec.duration_s = o.duration_s;
    spec.timeout_s = o.timeout_s;
    spec.seed = o.seed;
    const LevelRun run = run_level(server, workload, spec);
    LevelResult r = aggregate(run, slo, concurrency, rate);
    if (o.save_detailed) r.detailed = request_details(run);
    print_progress(progress, r);
    return r;
  };
  const int64_t cap = o.concurrency.empty() ? 0 : o.concurrency[0];
  if (o.find_capacity) {
    CapacitySearchSpec spec;
    spec.open_loop = o.open_loop();
    spec.start = o.open_loop() ? o.rates[0] : static_cast<double>(o.concurrency[0]);
    spec.max = o.capacity_max > 0 ? o.capacity_max : (o.open_loop() ? 10000.0 : 1024.0);
    spec.max = std::max(spec.max, spec.start);
    spec.rate_resolution = o.rate_resolution;
    spec.goodput_target = o.goodput_target;
    CapacityResult cr = find_capacity(spec, [&](double load) {
      if (o.open_loop()) {
        // At least ~2 s of arrivals when bounded by count, so the rate is visible.
        const int64_t n = o.num_requests > 0 ? std::max<int64_t>(o.num_requests, static_cast<int64_t>(load * 2)) : 0;
        return run_one(cap, load, n);
      }
      const int64_t c = static_cast<int64_t>(load);
      // At least two full waves so every level reaches its concurrency.
      const int64_t n = o.num_requests > 0 ? std::max<int64_t>(o.num_requests, 2 * c) : 0;
      return run_one(c, 0, n);
    });
    plan_capacity(cr, o.peak_concurrency, o.peak_qps, o.headroom);
    report.results = cr.levels;
    report.capacity = std::move(cr);
  } else if (o.open_loop()) {
    for (double rate : o.rates) report.results.push_back(run_one(cap, rate, o.num_requests));
  } else {
    for (int64_t c : o.concurrency) report.results.push_back(run_one(c, 0, o.num_requests));
  }
  return report;
}

}  // namespace parallm::loadtest
