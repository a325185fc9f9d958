// parallm bench against the scripted fake server, in process: measured TTFT,
// TPOT, ITL and percentiles against the script within tight tolerances,
// errors by kind, goodput, usage accounting, Poisson arrivals, bounds, a
// server that dies mid-run, and --find-capacity against a known latency law.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <atomic>
#include <cmath>
#include <iostream>
#include <thread>

#include "fake_openai_server.h"
#include "loadtest/bench_runner.h"
#include "loadtest/stream_client.h"
#include "util/check.h"

namespace parallm::loadtest {
namespace {

using testing::FakeOpenAiServer;
using testing::FakeScript;

BenchOptions options_for(const FakeOpenAiServer& server) {
  BenchOptions o;
  o.url = parse_http_url(server.url());
  o.input_len = {8, 8};
  o.output_len = {16, 16};
  o.timeout_s = 10;
  return o;
}

BenchReport run(BenchOptions o) {
  validate_options(o);
  return run_bench(o, nullptr);
}

int64_t errors_of(const LevelResult& r, ErrorKind k) { return r.errors[static_cast<size_t>(k)]; }

// NOTE: these tests measure milliseconds on machines shared with compilers.
// Where allowed (root in CI), the process raises its scheduling priority
// before any thread starts (threads inherit it), so the fake server and the
// client wake on time; elsewhere the noise-scaled tolerances below apply.
class RaisePriority : public ::testing::Environment {
 public:
  void SetUp() override { setpriority(PRIO_PROCESS, 0, -10); }
};
const auto* const kRaisePriority = ::testing::AddGlobalTestEnvironment(new RaisePriority);

// The server's own account of what it did (its clock, its send times).
Summary server_ttft(const FakeOpenAiServer& server) {
  std::vector<double> v;
  for (const auto& o : server.observed()) v.push_back(o.ttft_ms);
  return summarize(v);
}
Summary server_tpot(const FakeOpenAiServer& server) {
  std::vector<double> v;
  for (const auto& o : server.observed()) v.push_back(o.tpot_ms);
  return summarize(v);
}

// How late this machine wakes sleeping threads *while a run is going on*:
// a probe thread sleeps 1 ms at a time and records its worst lateness. On a
// quiet machine ~0.1 ms; on a shared, oversubscribed one it can be tens of ms,
// and no latency measurement can be more exact than that. Timing tolerances
// are `tight + worst stall`, so they stay tight where the machine allows it.
class NoiseProbe {
 public:
  NoiseProbe()
      : thread_([this] {
          while (!stop_) {
            const auto t0 = std::chrono::steady_clock::now();
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
            const double late =
                std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() - 1;
            worst_ms_ = std::max(worst_ms_.load(), late);
          }
        }) {}
  ~NoiseProbe() { stop(); }
  double stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    return worst_ms_;
  }

 private:
  std::atomic<bool> stop_{false};
  std::atomic<double> worst_ms_{0};
  std::thread thread_;
};

double tolerance(double tight_ms, NoiseProbe& probe) {
  const double noise = probe.stop();
  std::cout << "[ info     ] worst scheduling stall " << noise << " ms -> tolerance " << tight_ms + noise << " ms\n";
  return tight_ms + noise;
}

// Client-side numbers may exceed the server's by the network and wake-up
// latency only: well under a millisecond on loopback.
void expect_agrees(const Summary& client, const Summary& server, double tol_ms, const char* what) {
  EXPECT_EQ(client.count, server.count) << what;
  EXPECT_NEAR(client.mean, server.mean, tol_ms) << what;
  EXPECT_NEAR(client.p50, server.p50, tol_ms) << what;
  EXPECT_NEAR(client.p90, server.p90, tol_ms) << what;
  EXPECT_NEAR(client.p95, server.p95, tol_ms) << what;
  EXPECT_NEAR(client.p99, server.p99, tol_ms) << what;
}

// Fixed 30 ms to the first token, 5 ms between tokens: the measured values
// must match to within scheduling noise, for both endpoints.
TEST(BenchFakeServer, FixedDelaysAreMeasuredExactly) {
  for (Endpoint endpoint : {Endpoint::kChat, Endpoint::kCompletions}) {
    FakeOpenAiServer server([](int64_t, const nlohmann::json&) {
      FakeScript s;
      s.ttft_ms = 30;
      s.gap_ms = 5;
      return s;
    });
    BenchOptions o = options_for(server);
    o.endpoint = endpoint;
    o.num_requests = 12;
    o.concurrency = {2};
    NoiseProbe probe;
    const BenchReport rep = run(o);
    const double tol = tolerance(1.0, probe);
    ASSERT_EQ(rep.results.size(), 1u);
    const LevelResult& r = rep.results[0];
    EXPECT_EQ(rep.model, "fake-model");  // found through GET /v1/models
    EXPECT_EQ(r.requests, 12);
    EXPECT_EQ(r.completed, 12);
    // Against the script: TTFT is never early and, at the median, on time.
    EXPECT_GE(r.ttft_ms.p50, 30);
    EXPECT_NEAR(r.ttft_ms.p50, 30, tol + 1);
    EXPECT_NEAR(r.tpot_ms.p50, 5, 0.2);
    EXPECT_NEAR(r.tpot_ms.mean, 5, 0.3);
    EXPECT_NEAR(r.itl_ms.p50, 5, 0.5);
    EXPECT_EQ(r.itl_ms.count, 12 * 15);
    EXPECT_NEAR(r.e2e_ms.p50, 30 + 15 * 5, tol + 1);
    // Against what the server did, by its own clock.
    // (+3 ms: the first request of a new connection also waits for the
    // server's accept() and thread start, which its clock cannot see.)
    expect_agrees(r.ttft_ms, server_ttft(server), tol + 3, "TTFT");
    // TPOT spreads one late wake-up (at a request's first or last token)
    // over its 15 gaps. NOTE: a fixed 0.15 ms failed once in CI with 7-12 ms
    // stalls on the host (p90-p99 0.19-0.27 ms apart).
    const double stall_ms = tol - 1.0;
    expect_agrees(r.tpot_ms, server_tpot(server), 0.15 + stall_ms / 15, "TPOT");
    EXPECT_EQ(r.output_tokens, 12 * 16);
    EXPECT_EQ(r.output_tokens_counted, 12 * 16);
    EXPECT_EQ(r.usage_reported, 12);
    // usage.prompt_tokens = 8 words + the fake template's 7 (chat) or 1 (completions).
    EXPECT_EQ(r.input_tokens, 12 * (8 + (endpoint == Endpoint::kChat ? 7 : 1)));
    EXPECT_DOUBLE_EQ(r.goodput, 1.0);
    EXPECT_NEAR(r.output_tokens_per_s, r.output_tokens / r.duration_s, 1e-9);
    // Two streams in flight, 12 requests of ~105 ms: 6 rounds.
    EXPECT_GE(r.duration_s, 6 * 0.105);
    EXPECT_NEAR(r.duration_s, 6 * 0.105, 0.08);
    EXPECT_EQ(r.max_in_flight, 2);
    EXPECT_LE(r.connections_opened, 6);  // keep-alive connections are reused
    EXPECT_EQ(server.max_streams_seen(), 2);
  }
}

// TTFTs scripted to 10, 12, ..., 108 ms: the percentiles are known exactly.
TEST(BenchFakeServer, PercentilesOfAKnownDistribution) {
  FakeOpenAiServer server([](int64_t i, const nlohmann::json&) {
    FakeScript s;
    s.ttft_ms = 10 + 2 * static_cast<double>(i % 50);
    s.gap_ms = 2;
    s.tokens = 4;
    return s;
  });
  BenchOptions o = options_for(server);
  o.num_requests = 50;
  o.concurrency = {5};
  NoiseProbe probe;
  const LevelResult r = run(o).results.at(0);
  const double tol = tolerance(1.0, probe);
  ASSERT_EQ(r.completed, 50);
  // NumPy linear percentiles of {10, 12, ..., 108}: rank p/100 * 49. The
  // client must agree with what the server really did within `tol`; the
  // server itself may run late on a busy machine, hence the looser script check.
  const double script_tol = tol + 4;
  EXPECT_NEAR(r.ttft_ms.p50, 59.0, script_tol);
  EXPECT_NEAR(r.ttft_ms.p90, 98.2, script_tol);
  EXPECT_NEAR(r.ttft_ms.p95, 103.1, script_tol);
  EXPECT_NEAR(r.ttft_ms.p99, 107.02, script_tol);
  EXPECT_NEAR(r.ttft_ms.mean, 59.0, script_tol);
  EXPECT_GE(r.ttft_ms.p50, 59.0);
  EXPECT_NEAR(r.tpot_ms.p50, 2.0, 0.3);
  expect_agrees(r.ttft_ms, server_ttft(server), tol, "TTFT");
}

// Scripted failures of every kind, and SLO misses: exact counts and goodput.
TEST(BenchFakeServer, ErrorsByKindAndGoodput) {
  FakeOpenAiServer server([](int64_t i, const nlohmann::json&) {
    FakeScript s;
    s.ttft_ms = i % 8 == 0 ? 70 : 10;  // misses the 40 ms TTFT SLO
    s.gap_ms = 2;
    s.tokens = 8;
    if (i % 10 == 3) s.http_status = 500;        // 6
    if (i % 20 == 7) s.http_status = 429;        // 3
    if (i % 15 == 11) s.drop_after_tokens = 3;   // 11 26 41 56: 4
    if (i == 5) s.stall_ms = 3000;               // 1 timeout
    if (i % 25 == 19) s.error_after_tokens = 2;  // 19 44: 2
    return s;
  });
  BenchOptions o = options_for(server);
  o.num_requests = 60;
  o.concurrency = {4};
  o.timeout_s = 0.5;
  o.ttft_slo_ms = 40;
  const LevelResult r = run(o).results.at(0);
  EXPECT_EQ(r.requests, 60);
  EXPECT_EQ(errors_of(r, ErrorKind::kHttp5xx), 6);
  EXPECT_EQ(errors_of(r, ErrorKind::kHttp4xx), 3);
  EXPECT_EQ(errors_of(r, ErrorKind::kDroppedStream), 4);
  EXPECT_EQ(errors_of(r, ErrorKind::kTimeout), 1);
  EXPECT_EQ(errors_of(r, ErrorKind::kStreamError), 2);
  EXPECT_EQ(errors_of(r, ErrorKind::kConnection), 0);
  EXPECT_EQ(errors_of(r, ErrorKind::kBadResponse), 0);
  EXPECT_EQ(r.completed, 60 - 16);
  EXPECT_EQ(r.error_sample[static_cast<size_t>(ErrorKind::kHttp5xx)], "HTTP 500: scripted failure");
  EXPECT_EQ(r.error_sample[static_cast<size_t>(ErrorKind::kStreamError)], "scripted stream error");
  // Slow first tokens at 0 8 16 24 32 40 48 succeed but miss the SLO (56 dropped).
  EXPECT_NEAR(r.goodput, (60.0 - 16 - 7) / 60, 1e-12);
  EXPECT_EQ(server.requests_seen(), 60);  // nothing retried behind the user's back
}

TEST(BenchFakeServer, UsageIsPreferredOverCountingAndCountingIsTheFallback) {
  bool send_usage = true;
  FakeOpenAiServer server([&send_usage](int64_t, const nlohmann::json&) {
    FakeScript s;
    s.ttft_ms = 2;
    s.gap_ms = 1;
    s.tokens_per_chunk = 3;  // e.g. speculative decoding: several tokens per chunk
    s.send_usage = send_usage;
    return s;
  });
  BenchOptions o = options_for(server);
  o.num_requests = 4;
  o.input_len = {5, 9};
  o.output_len = {10, 10};
  o.model = "given";
  LevelResult r = run(o).results.at(0);
  EXPECT_EQ(r.output_tokens_counted, 40);
  EXPECT_EQ(r.output_tokens, 120);
  EXPECT_EQ(r.usage_reported, 4);
  int64_t words = 0;
  for (const auto& body : server.bodies()) {
    EXPECT_EQ(body["model"], "given");
    words += FakeOpenAiServer::count_prompt_words(body);
  }
  EXPECT_EQ(r.input_tokens, words + 4 * 7);
  send_usage = false;
  r = run(o).results.at(0);
  EXPECT_EQ(r.output_tokens, 40);
  EXPECT_EQ(r.usage_reported, 0);
  EXPECT_EQ(r.input_tokens, words);  // our estimate: the same seeded prompts
}

TEST(BenchFakeServer, PoissonArrivalsHaveTheAskedRate) {
  FakeOpenAiServer server([](int64_t, const nlohmann::json&) {
    FakeScript s;
    s.ttft_ms = 2;
    s.gap_ms = 1;
    s.tokens = 3;
    return s;
  });
  BenchOptions o = options_for(server);
  o.rates = {100};
  o.num_requests = 200;
  o.seed = 3;
  validate_options(o);
  const ServerAddress addr = resolve_address(o.url);
  const Workload w(o, "m");
  LevelSpec spec;
  spec.rate = 100;
  spec.num_requests = 200;
  spec.seed = 3;
  const LevelRun lr = run_level(addr, w, spec);
  ASSERT_EQ(lr.records.size(), 200u);
  std::vector<double> starts;
  for (const auto& rec : lr.records) starts.push_back(rec.start_s);
  std::sort(starts.begin(), starts.end());
  double sum = 0, sum2 = 0;
  for (size_t i = 1; i < starts.size(); ++i) {
    const double gap = starts[i] - starts[i - 1];
    sum += gap;
    sum2 += gap * gap;
  }
  const double n = static_cast<double>(starts.size() - 1);
  const double mean = sum / n;
  const double cv = std::sqrt(sum2 / n - mean * mean) / mean;
  EXPECT_NEAR(mean, 0.01, 0.0022);  // 3 sigma of the mean of 199 exponentials
  EXPECT_NEAR(cv, 1.0, 0.25);       // exponential gaps, not a fixed clock
  const LevelResult r = aggregate(lr, Slo{}, 0, 100);
  EXPECT_EQ(r.completed, 200);
  EXPECT_GT(server.max_streams_seen(), 1);  // open loop: arrivals do not wait
}

TEST(BenchFakeServer, DurationBoundStopsTheRun) {
  FakeOpenAiServer server([](int64_t, const nlohmann::json&) {
    FakeScript s;
    s.ttft_ms = 20;
    s.gap_ms = 5;
    s.tokens = 17;  // 100 ms per request
    return s;
  });
  BenchOptions o = options_for(server);
  o.duration_s = 0.5;
  o.concurrency = {2};
  const auto t0 = std::chrono::steady_clock::now();
  const LevelResult r = run(o).results.at(0);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(wall, 0.5 + 0.1 + 0.3);  // last requests finish ~100 ms after the bound
  EXPECT_GE(r.requests, 8);
  EXPECT_LE(r.requests, 12);
  EXPECT_EQ(r.completed, r.requests);
}

TEST(BenchFakeServer, ServerDyingMidRunIsCountedNotFatal) {
  FakeOpenAiServer server([](int64_t, const nlohmann::json&) {
    FakeScript s;
    s.ttft_ms = 5;
    s.gap_ms = 5;
    s.tokens = 20;
    return s;
  });
  BenchOptions o = options_for(server);
  o.num_requests = 40;
  o.concurrency = {4};
  std::thread killer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    server.kill();
  });
  const BenchReport rep = run(o);
  killer.join();
  const LevelResult& r = rep.results.at(0);
  EXPECT_EQ(r.requests, 40);
  EXPECT_GE(r.completed, 4);
  EXPECT_LE(r.completed, 12);
  EXPECT_EQ(errors_of(r, ErrorKind::kDroppedStream), 4);  // the streams in flight when it died
  EXPECT_EQ(errors_of(r, ErrorKind::kConnection), 40 - r.completed - 4);
  EXPECT_EQ(r.failed(), 40 - r.completed);
  EXPECT_FALSE(json_report(rep).empty());
}

// The known answer: gap = 2 ms + 1 ms per other stream in flight, so TPOT at
// concurrency c is 1 + c ms; with a TPOT SLO of 12.5 ms the capacity is 11.
TEST(BenchFakeServer, FindCapacityFindsTheKnownKnee) {
  FakeOpenAiServer server([](int64_t, const nlohmann::json&) {
    FakeScript s;
    s.ttft_ms = 10;
    s.gap_ms = 2;
    s.gap_per_stream_ms = 1;
    s.tokens = 12;
    return s;
  });
  BenchOptions o = options_for(server);
  o.find_capacity = true;
  o.tpot_slo_ms = 12.5;
  o.num_requests = 1;  // raised to two waves per level
  o.peak_concurrency = 100;
  NoiseProbe probe;
  const BenchReport rep = run(o);
  // A stall spreads over the 11 gaps of a request's TPOT.
  const double tol = 0.5 + probe.stop() / 11;
  ASSERT_TRUE(rep.capacity.has_value());
  const CapacityResult& c = *rep.capacity;
  EXPECT_NEAR(c.capacity, 11, 1.0);  // the acceptance: within one step
  EXPECT_EQ(c.servers_for_peak_concurrency, static_cast<int64_t>(std::ceil(130.0 / c.capacity)));
  for (size_t i = 0; i < c.levels.size(); ++i) {
    const LevelResult& l = c.levels[i];
    const double expected_tpot = 1 + static_cast<double>(l.concurrency);
    EXPECT_NEAR(l.tpot_ms.p50, expected_tpot, tol) << "concurrency " << l.concurrency;
    if (std::abs(expected_tpot - 12.5) > tol) {  // clear-cut levels must be judged right
      EXPECT_EQ(static_cast<bool>(c.passed[i]), expected_tpot <= 12.5) << "concurrency " << l.concurrency;
    }
  }
  EXPECT_EQ(rep.results.size(), c.levels.size());
}

}  // namespace
}  // namespace parallm::loadtest

namespace parallm::loadtest {
namespace {

TEST(BenchFakeServer, WaitsForAServerStillLoadingThenRuns) {
  FakeOpenAiServer server([](int64_t, const nlohmann::json&) {
    FakeScript s;
    s.ttft_ms = 1;
    s.gap_ms = 1;
    return s;
  });
  server.set_loading_polls(3);
  BenchOptions o = options_for(server);
  o.num_requests = 4;
  o.output_len = {3, 3};
  const BenchReport rep = run(o);
  EXPECT_EQ(rep.model, "fake-model");
  EXPECT_GE(server.models_requests(), 4);  // three 503s, then the answer
  EXPECT_EQ(rep.results.at(0).requests, 4);
  EXPECT_EQ(rep.results.at(0).failed(), 0);

  // Never ready within --ready-timeout: one clear error, no requests sent.
  server.set_loading_polls(1000000);
  o.ready_timeout_s = 0.5;
  const int64_t before = server.requests_seen();
  EXPECT_THROW(run(o), parallm::InputError);
  EXPECT_EQ(server.requests_seen(), before);
}

}  // namespace
}  // namespace parallm::loadtest
