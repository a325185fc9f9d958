// Aggregation and capacity-search tests without a network: percentiles
// against NumPy's values, goodput and token accounting on hand-made records,
// the capacity search against synthetic latency laws, and the planning maths.
#include <gtest/gtest.h>

#include <cmath>

#include "loadtest/capacity.h"
#include "loadtest/stats.h"

namespace parallm::loadtest {
namespace {

TEST(Stats, PercentilesMatchNumpyLinear) {
  // numpy.percentile(v, [50, 90, 95, 99]) and numpy.mean(v), NumPy 1.24.
  std::vector<double> v{12.5, 3.0, 7.25, 100.0, 42.0, 8.0, 15.5, 3.0, 61.0, 27.0, 9.75, 33.0, 5.5};
  const Summary s = summarize(v);
  EXPECT_EQ(s.count, 13);
  EXPECT_NEAR(s.mean, 25.192307692307693, 1e-9);
  EXPECT_NEAR(s.p50, 12.5, 1e-9);
  EXPECT_NEAR(s.p90, 57.2, 1e-9);
  EXPECT_NEAR(s.p95, 76.6, 1e-9);
  EXPECT_NEAR(s.p99, 95.32, 1e-9);
  std::vector<double> one{4.0};
  EXPECT_EQ(summarize(one).p99, 4.0);
  std::vector<double> none;
  EXPECT_EQ(summarize(none).count, 0);
}

RequestRecord record(double ttft_ms, int64_t tokens, double gap_ms) {
  RequestRecord r;
  r.start_s = 10.0;
  r.first_token_s = r.start_s + ttft_ms / 1e3;
  r.last_token_s = r.first_token_s + gap_ms * static_cast<double>(tokens - 1) / 1e3;
  r.end_s = r.last_token_s;
  r.chunks_with_text = tokens;
  for (int64_t i = 1; i < tokens; ++i) r.itl_ms.push_back(static_cast<float>(gap_ms));
  r.prompt_tokens_sent = 10;
  return r;
}

TEST(Stats, AggregateCountsGoodputAndTokens) {
  LevelRun run;
  run.start_s = 10.0;
  run.end_s = 12.0;  // 2 s
  run.client_cpu_s = 0.001;
  run.records.push_back(record(50, 11, 10));   // meets TTFT 100 / TPOT 20
  run.records.push_back(record(150, 11, 10));  // misses TTFT
  run.records.push_back(record(50, 11, 30));   // misses TPOT
  RequestRecord usage = record(50, 5, 10);     // usage overrides counting
  usage.usage_completion_tokens = 10;
  usage.usage_prompt_tokens = 17;
  run.records.push_back(usage);             // TPOT = 40 ms / 9 = 4.44: meets
  RequestRecord single = record(50, 1, 0);  // one token: no TPOT, meets
  run.records.push_back(single);
  RequestRecord failed;
  failed.error = ErrorKind::kHttp5xx;
  failed.error_message = "HTTP 500: boom";
  run.records.push_back(failed);
  failed.error = ErrorKind::kTimeout;
  run.records.push_back(failed);
  run.records.push_back(failed);

  const LevelResult r = aggregate(run, Slo{100, 20}, 4, 0);
  EXPECT_EQ(r.requests, 8);
  EXPECT_EQ(r.completed, 5);
  EXPECT_EQ(r.failed(), 3);
  EXPECT_EQ(r.errors[static_cast<int>(ErrorKind::kHttp5xx)], 1);
  EXPECT_EQ(r.errors[static_cast<int>(ErrorKind::kTimeout)], 2);
  EXPECT_EQ(r.error_sample[static_cast<int>(ErrorKind::kHttp5xx)], "HTTP 500: boom");
  EXPECT_DOUBLE_EQ(r.goodput, 3.0 / 8.0);
  EXPECT_EQ(r.output_tokens, 11 + 11 + 11 + 10 + 1);
  EXPECT_EQ(r.output_tokens_counted, 11 + 11 + 11 + 5 + 1);
  EXPECT_EQ(r.input_tokens, 10 * 4 + 17);
  EXPECT_EQ(r.usage_reported, 1);
  EXPECT_DOUBLE_EQ(r.duration_s, 2.0);
  EXPECT_DOUBLE_EQ(r.output_tokens_per_s, 44 / 2.0);
  // Decode: 10+10+10+9 tokens after the first in 0.1+0.1+0.3+0.04 s; streams
  // in flight 0.89 s of successful requests over 2 s.
  EXPECT_NEAR(r.decode_tokens_per_s, 39 / 0.54 * (0.89 / 2.0), 1e-9);
  EXPECT_DOUBLE_EQ(r.requests_per_s, 2.5);
  EXPECT_EQ(r.ttft_ms.count, 5);
  EXPECT_NEAR(r.ttft_ms.p50, 50, 1e-6);
  EXPECT_EQ(r.tpot_ms.count, 4);
  EXPECT_NEAR(r.tpot_ms.mean, (10 + 10 + 30 + 40.0 / 9) / 4, 1e-6);
  EXPECT_EQ(r.itl_ms.count, 10 + 10 + 10 + 4);
  EXPECT_NEAR(r.client_cpu_us_per_token, 1000.0 / 39, 1e-6);
}

// A law: loads up to `knee` pass, above fail.
std::function<LevelResult(double)> law(double knee, std::vector<double>* tried) {
  return [knee, tried](double load) {
    tried->push_back(load);
    LevelResult r;
    r.requests = 10;
    r.goodput = load <= knee ? 1.0 : 0.5;
    r.concurrency = static_cast<int64_t>(load);
    r.requests_per_s = load * 2;
    r.e2e_ms.mean = 500;
    return r;
  };
}

TEST(Capacity, ConcurrencySearchFindsTheKneeExactly) {
  for (double knee : {1.0, 2.0, 3.0, 11.0, 37.0, 64.0, 100.0}) {
    for (double start : {1.0, 4.0, 50.0}) {
      std::vector<double> tried;
      CapacitySearchSpec spec;
      spec.start = start;
      spec.max = 1024;
      const CapacityResult r = find_capacity(spec, law(knee, &tried));
      EXPECT_EQ(r.capacity, knee) << "knee " << knee << " start " << start;
      EXPECT_FALSE(r.reached_max);
      EXPECT_LE(tried.size(), 16u);
      EXPECT_EQ(r.levels.size(), tried.size());
    }
  }
  std::vector<double> tried;
  CapacitySearchSpec spec;
  spec.max = 16;
  const CapacityResult r = find_capacity(spec, law(1000, &tried));
  EXPECT_TRUE(r.reached_max);
  EXPECT_EQ(r.capacity, 16);
  EXPECT_EQ(tried, (std::vector<double>{1, 2, 4, 8, 16}));
  tried.clear();
  const CapacityResult none = find_capacity(CapacitySearchSpec{}, law(0.5, &tried));
  EXPECT_EQ(none.best_level, -1);
  EXPECT_EQ(none.capacity, 0);
}

TEST(Capacity, RateSearchWithinResolution) {
  for (double knee : {0.3, 7.0, 123.0}) {
    std::vector<double> tried;
    CapacitySearchSpec spec;
    spec.open_loop = true;
    spec.start = 1;
    spec.max = 10000;
    spec.rate_resolution = 0.05;
    const CapacityResult r = find_capacity(spec, law(knee, &tried));
    EXPECT_LE(r.capacity, knee);
    EXPECT_GE(r.capacity * 1.05, knee) << knee;
  }
}

TEST(Capacity, PlanningDividesThePeakWithHeadroom) {
  std::vector<double> tried;
  CapacityResult r = find_capacity(CapacitySearchSpec{}, law(11, &tried));
  plan_capacity(r, 100, 50, 1.3);
  EXPECT_EQ(r.per_server_concurrency, 11);
  EXPECT_EQ(r.per_server_qps, 22);                // measured at the capacity level
  EXPECT_EQ(r.servers_for_peak_concurrency, 12);  // ceil(130 / 11)
  EXPECT_EQ(r.servers_for_peak_qps, 3);           // ceil(65 / 22)
  plan_capacity(r, 110, 0, 1.0);
  EXPECT_EQ(r.servers_for_peak_concurrency, 10);  // exactly 10, not 11
  EXPECT_EQ(r.servers_for_peak_qps, -1);

  CapacitySearchSpec rate;
  rate.open_loop = true;
  rate.start = 8;
  rate.max = 8;
  CapacityResult rr = find_capacity(rate, law(100, &tried));
  plan_capacity(rr, 40, 20, 1.3);
  EXPECT_EQ(rr.per_server_qps, 8);
  EXPECT_DOUBLE_EQ(rr.per_server_concurrency, 4);  // Little: 8/s x 0.5 s
  EXPECT_EQ(rr.servers_for_peak_qps, 4);           // ceil(26 / 8)
  EXPECT_EQ(rr.servers_for_peak_concurrency, 13);  // ceil(52 / 4)
}

}  // namespace
}  // namespace parallm::loadtest
