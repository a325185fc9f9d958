// simulate's JSON has bench's schema: the same keys at every level (checked
// against loadtest::json_report, bench's own writer), plus "simulation".
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>

#include "loadtest/bench_runner.h"
#include "sim_fixture.h"

namespace parallm::sim {
namespace {

using nlohmann::json;

// Every key path of an object tree ("results[].ttft_ms.p95"), arrays by their first element.
void key_paths(const json& j, const std::string& prefix, std::set<std::string>* out) {
  if (j.is_object()) {
    for (const auto& [k, v] : j.items()) {
      out->insert(prefix + k);
      key_paths(v, prefix + k + ".", out);
    }
  } else if (j.is_array() && !j.empty()) {
    key_paths(j.front(), prefix + "[].", out);
  }
}

TEST(Report, JsonHasBenchSchemaPlusSimulation) {
  SimulationSpec s = testing::spec_for("llama-3.1-8b", "H100-SXM");
  s.load.kind = LoadKind::kPoisson;
  s.load.rate = 5;
  s.load.num_requests = 20;
  s.slo = {200, 20};
  const SimulationResult r = run_simulation(s);
  json sim = json::parse(simulation_json(s, r));
  EXPECT_EQ(sim["tool"], "parallm simulate");
  ASSERT_TRUE(sim.contains("simulation"));
  EXPECT_EQ(sim["simulation"]["preemptions"], r.fleet.preemptions);
  sim.erase("simulation");

  // Bench's writer on a bench-shaped report with one level of real records.
  loadtest::BenchReport bench;
  bench.options.url = loadtest::parse_http_url("http://127.0.0.1:8000");
  bench.options.rates = {5};
  loadtest::LevelRun run;
  loadtest::RequestRecord rec;
  rec.start_s = 0;
  rec.first_token_s = 0.1;
  rec.last_token_s = rec.end_s = 0.3;
  rec.chunks_with_text = 3;
  rec.itl_ms = {100, 100};
  run.records.push_back(rec);
  run.end_s = 0.3;
  bench.results.push_back(loadtest::aggregate(run, {200, 20}, 0, 5));
  const json b = json::parse(loadtest::json_report(bench));

  std::set<std::string> ks, kb;
  key_paths(sim, "", &ks);
  key_paths(b, "", &kb);
  EXPECT_EQ(ks, kb);
  EXPECT_EQ(sim["results"][0]["completed"], 20);

  // With --save-detailed both writers add the same per-request arrays.
  s.save_detailed = true;
  bench.options.save_detailed = true;
  bench.results[0].detailed = loadtest::request_details(run);
  json sim_d = json::parse(simulation_json(s, run_simulation(s)));
  sim_d.erase("simulation");
  std::set<std::string> ksd, kbd;
  key_paths(sim_d, "", &ksd);
  key_paths(json::parse(loadtest::json_report(bench)), "", &kbd);
  EXPECT_EQ(ksd, kbd);
  EXPECT_TRUE(kbd.count("results.[].detailed.ttft_ms"));
  EXPECT_EQ(sim_d["results"][0]["detailed"]["ttft_ms"].size(), 20u);
  EXPECT_GT(sim["results"][0]["ttft_ms"]["p95"].get<double>(), 0);
}

}  // namespace
}  // namespace parallm::sim
