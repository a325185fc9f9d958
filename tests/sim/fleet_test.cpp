// The simulator against closed forms: one request alone (TTFT = overhead +
// prefill time, every ITL = a decode step at its context, TPOT their mean), a
// closed loop of constant-time steps (tokens/s = streams / step time exactly),
// determinism with a seed, routing, and preemption under a small KV pool.
#include "sim/fleet.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "loadtest/http_url.h"
#include "loadtest/workload.h"
#include "sim/replica_model.h"
#include "sim/sim_load.h"
#include "sim_fixture.h"
#include "util/check.h"

namespace parallm::sim {
namespace {

TEST(Fleet, OneRequestAloneMatchesPrefillAndDecodeSteps) {
  SimulationSpec s = testing::spec_for("llama-3.1-8b", "H100-SXM");
  s.load.kind = LoadKind::kPoisson;
  s.load.rate = 1e-6;  // one arrival, nothing else in the run
  s.load.num_requests = 1;
  s.load.input_len = {700, 700};
  s.load.output_len = {40, 40};
  const SimulationResult r = run_simulation(s);
  const ReplicaModel m = replica_model(s.request, s.layout, r.max_model_len, 16);
  const loadtest::LevelResult& lv = r.report.results.at(0);
  ASSERT_EQ(lv.completed, 1);
  const double ttft_ms = (m.perf.k.request_overhead_ms * 1e-3 + planner::prefill_s(m.perf, 1, 700)) * 1e3;
  EXPECT_NEAR(lv.ttft_ms.p50, ttft_ms, 1e-6 * ttft_ms);
  double decode_s = 0;
  for (int i = 1; i < 40; ++i) decode_s += planner::decode_step_s(m.perf, 1, 700 + i);
  EXPECT_NEAR(lv.tpot_ms.p50, decode_s * 1e3 / 39, 1e-6);
  ASSERT_EQ(lv.itl_ms.count, 39);
  EXPECT_NEAR(lv.itl_ms.p50, planner::decode_step_s(m.perf, 1, 720) * 1e3, 1e-3);  // float samples
  EXPECT_NEAR(lv.e2e_ms.p50, ttft_ms + decode_s * 1e3, 1e-6 * lv.e2e_ms.p50);
  EXPECT_EQ(lv.output_tokens, 40);
  EXPECT_EQ(lv.input_tokens, 700);
  EXPECT_EQ(r.fleet.steps, 40u);
}

// Attention priced at zero and one-token prompts: every step reads the
// weights once (memory bound), so each costs the same T.
SimulationSpec constant_step_spec() {
  SimulationSpec s = testing::spec_for("llama-3.1-8b", "H100-SXM");
  s.request.constants.attn_bw_eff = 1e300;
  s.request.constants.attn_flops_eff = 1e300;
  s.request.constants.request_overhead_ms = 0;
  s.load.input_len = {1, 1};
  s.load.output_len = {50, 50};
  s.client_send_s = 0;  // the closed loop's clients send together: exact closed forms
  return s;
}

TEST(Fleet, ClosedLoopOfConstantStepsHasExactTokensPerSecond) {
  SimulationSpec s = constant_step_spec();
  const int64_t c = 8;
  s.load.kind = LoadKind::kClosedLoop;
  s.load.concurrency = c;
  s.load.num_requests = 5 * c;
  const ReplicaModel m = replica_model(s.request, s.layout, 51, 16);
  const double t = planner::decode_step_s(m.perf, c, 0);
  StepShape first;  // the prefill step: c one-token prompts
  first.n_tokens = first.n_sampled = c;
  first.prefill_pairs = 0.5 * c;
  ASSERT_NEAR(StepCost(m.perf, ServeOverheads{}).step_s(first), t,
              1e-12);  // precondition: constant steps
  const SimulationResult r = run_simulation(s);
  const loadtest::LevelResult& lv = r.report.results.at(0);
  EXPECT_EQ(lv.completed, 5 * c);
  EXPECT_NEAR(lv.output_tokens_per_s, static_cast<double>(c) / t, 1e-9 * c / t);
  EXPECT_NEAR(lv.duration_s, 5 * 50 * t, 1e-9);
  EXPECT_NEAR(lv.ttft_ms.p99, t * 1e3, 1e-9);
  EXPECT_NEAR(lv.tpot_ms.p50, t * 1e3, 1e-9);
  EXPECT_EQ(lv.max_in_flight, c);
}

// Four front-end threads per replica: five requests arriving together, the
// first four enter after one overhead and share the first step, the fifth
// enters after two overheads and waits for the second step.
TEST(Fleet, FrontEndThreadsLetFourSimultaneousRequestsShareAStep) {
  SimulationSpec s = constant_step_spec();
  s.request.constants.request_overhead_ms = 1;
  s.load.kind = LoadKind::kClosedLoop;
  s.load.concurrency = 5;
  s.load.num_requests = 5;
  const ReplicaModel m = replica_model(s.request, s.layout, 51, 16);
  const double t = planner::decode_step_s(m.perf, 4, 0);  // the steps are constant (see above)
  const SimulationResult r = run_simulation(s);
  std::vector<double> ttft = r.report.results.at(0).ttft_samples;  // sorted
  ASSERT_EQ(ttft.size(), 5u);
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(ttft[static_cast<size_t>(i)], 1 + t * 1e3, 1e-9);
  EXPECT_NEAR(ttft[4], 1 + 2 * t * 1e3, 1e-9);
}

// bench's client sends due requests one after another, client_send_s apart:
// the first to reach the idle replica starts a step alone (the step loop
// takes what its inbox holds when it wakes), the others share the next.
// Request k is sent at (k + 1) g and enters 1 ms later; the fifth waits for
// the first's front-end thread: 1 + g + 1 ms. All but the first enter during
// step 1 (t > 1 + 4g ms) and end with step 2 at 1 + g + 2t.
TEST(Fleet, ClientSendsInTurnSoTheFirstRequestStepsAlone) {
  SimulationSpec s = constant_step_spec();
  s.request.constants.request_overhead_ms = 1;
  s.client_send_s = 50e-6;
  s.load.kind = LoadKind::kClosedLoop;
  s.load.concurrency = 5;
  s.load.num_requests = 5;
  const ReplicaModel m = replica_model(s.request, s.layout, 51, 16);
  const double t = planner::decode_step_s(m.perf, 4, 0) * 1e3, g = 0.05;
  ASSERT_GT(t, 2 + g);
  const SimulationResult r = run_simulation(s);
  const std::vector<double> ttft = r.report.results.at(0).ttft_samples;  // sorted
  ASSERT_EQ(ttft.size(), 5u);
  EXPECT_NEAR(ttft[0], 1 + t, 1e-9);
  for (int k = 4; k >= 1; --k) EXPECT_NEAR(ttft[static_cast<size_t>(5 - k)], 1 + g + 2 * t - (k + 1) * g, 1e-9) << k;
  EXPECT_EQ(r.fleet.steps, 51u);  // the two groups stay one step apart: 50 + 1 steps
}

// One request of 1 prompt token and 4001 output tokens, alone, on a profile
// whose step is a constant 5 ms: its 4000 ITL gaps are the profile's step
// times as the simulator draws them.
SimulationSpec one_long_request(const planner::ModelProfile& profile) {
  SimulationSpec s = testing::spec_for("llama-3.1-8b", "H100-SXM");
  s.profile = profile;
  s.profile->forward_ms_by_tokens = {{1, 5}};
  s.load.kind = LoadKind::kPoisson;
  s.load.rate = 1e-6;
  s.load.num_requests = 1;
  s.load.input_len = {1, 1};
  s.load.output_len = {4001, 4001};
  s.load.seed = 3;
  return s;
}

// `trace`'s requests on `profile` with a constant 5 ms forward (1 to 16 tokens).
SimulationSpec five_ms_steps(planner::ModelProfile profile, std::vector<SimRequest> trace) {
  profile.forward_ms_by_tokens = {{1, 5}, {16, 5}};
  SimulationSpec s = testing::spec_for("llama-3.1-8b", "H100-SXM");
  s.load.kind = LoadKind::kTrace;
  s.load.trace = std::move(trace);
  s.profile = std::move(profile);
  return s;
}

// Sample standard deviation of log(x).
double log_stdev(const std::vector<double>& v) {
  const double n = static_cast<double>(v.size());
  double mean = 0, var = 0;
  for (double g : v) mean += std::log(g) / n;
  for (double g : v) var += (std::log(g) - mean) * (std::log(g) - mean) / (n - 1);
  return std::sqrt(var);
}

// A profile's jitter: each step's time times exp(sigma z), median 1. One
// request of 4001 tokens at a constant profiled step: its 4000 gaps have the
// profile's median and log spread (standard error of the spread ~sigma / 90).
TEST(Fleet, ProfileJitterHasItsMedianAndSpreadAndFollowsTheSeed) {
  planner::ModelProfile p;
  p.noise_sigma = 0.1;
  SimulationSpec s = one_long_request(p);
  const SimulationResult a = run_simulation(s);
  std::vector<double> gaps = a.report.results.at(0).itl_samples;
  ASSERT_EQ(gaps.size(), 4000u);
  std::sort(gaps.begin(), gaps.end());
  EXPECT_NEAR(gaps[2000], 5.0, 5.0 * 0.01);
  EXPECT_NEAR(log_stdev(gaps), 0.1, 0.006);
  EXPECT_EQ(run_simulation(s).report.results.at(0).itl_samples, a.report.results.at(0).itl_samples);
  s.load.seed = 4;
  EXPECT_NE(run_simulation(s).report.results.at(0).itl_samples, a.report.results.at(0).itl_samples);
  s.profile->noise_sigma = 0;  // no jitter: every gap the profiled step
  const std::vector<double> exact = run_simulation(s).report.results.at(0).itl_samples;
  for (double g : exact) ASSERT_NEAR(g, 5.0, 1e-4);
}

// A profile's drift: steps beginning in one drift period share one factor
// exp(drift_sigma z). One request at a constant 5 ms step: its gaps come in
// runs, one a period (20 steps of 0.1 s), whose values have median 5 ms and
// log spread drift_sigma (about 200 windows: standard error ~0.01).
TEST(Fleet, ProfileDriftIsOneFactorAPeriodWithItsSpread) {
  planner::ModelProfile p;
  p.drift_sigma = 0.2;
  p.drift_period_s = 0.1;
  SimulationSpec s = one_long_request(p);
  const SimulationResult a = run_simulation(s);
  const std::vector<double>& gaps = a.report.results.at(0).itl_samples;
  ASSERT_EQ(gaps.size(), 4000u);
  std::vector<double> runs = {gaps[0]};
  double total_ms = 0;
  for (size_t i = 0; i < gaps.size(); ++i) {
    total_ms += gaps[i];
    if (i > 0 && gaps[i] != gaps[i - 1]) runs.push_back(gaps[i]);
  }
  EXPECT_NEAR(static_cast<double>(runs.size()), total_ms / 100, 3);
  std::vector<double> sorted = runs;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_NEAR(std::log(sorted[sorted.size() / 2] / 5.0), 0, 0.06);
  EXPECT_NEAR(log_stdev(runs), 0.2, 0.04);
  EXPECT_EQ(run_simulation(s).report.results.at(0).itl_samples, gaps);
  s.load.seed = 4;
  EXPECT_NE(run_simulation(s).report.results.at(0).itl_samples, gaps);
}

// A profile's idle factor: every step of a busy period that begins
// idle_after_s (20 ms here) or more after the replica's last step ended, or
// that holds its first step, takes idle_factor x its time; a period that
// begins sooner does not. Constant 5 ms steps, three requests of 3 tokens: A
// at 0 (the first period), B at 1 s (idle for a second), D about 5 ms after B
// ends (under the 20 ms). At x1.5 A's and B's first tokens come 2.5 ms later
// and each of their next tokens 7.5 ms after the one before; D's keep the 5
// ms steps.
TEST(Fleet, ProfileIdleFactorPricesTheBusyPeriodAfterAnIdlePause) {
  planner::ModelProfile p;
  p.idle_after_s = 0.02;
  SimulationSpec s = five_ms_steps(p, {{0.0, 1, 3}, {1.0, 1, 3}, {1.028, 1, 3}});
  auto run = [&](double factor) {
    s.profile->idle_factor = factor;
    return run_simulation(s).report.results.at(0);
  };
  const auto flat = run(1.0), idle = run(1.5);
  ASSERT_EQ(flat.ttft_samples.size(), 3u);
  ASSERT_EQ(idle.ttft_samples.size(), 3u);
  const double x = flat.ttft_samples[0];  // the front end and one 5 ms step
  for (double t : flat.ttft_samples) EXPECT_NEAR(t, x, 1e-9);
  EXPECT_NEAR(idle.ttft_samples[0], x, 1e-9);  // D
  EXPECT_NEAR(idle.ttft_samples[1], x + 2.5, 1e-9);
  EXPECT_NEAR(idle.ttft_samples[2], x + 2.5, 1e-9);
  for (double g : flat.itl_samples) EXPECT_NEAR(g, 5.0, 1e-9);  // the profile's steps hold their sampling
  // The report keeps the gaps sorted: D's two, then A's and B's four.
  const std::vector<double> want = {5, 5, 7.5, 7.5, 7.5, 7.5};
  ASSERT_EQ(idle.itl_samples.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(idle.itl_samples[i], want[i], 1e-9) << i;
}

// A profile's cold decode steps: the decode steps right after a step that
// prefilled a prompt pay the curve's extra, k-th step k-th value, scaled by
// the prompt's share of the measured one. One request of 8 prompt tokens (half
// of 16) and 6 output tokens at a constant 5 ms step, curve {2, 1} ms: its
// gaps are 5 + 1, 5 + 0.5, then 5. A second request's prefill, in the middle
// of the first's decode, starts the curve again for both.
TEST(Fleet, ProfileColdDecodeStepsFollowAPrefill) {
  planner::ModelProfile p;
  p.cold_decode.prompt_tokens = 16;
  p.cold_decode.extra_ms = {{1, {2, 1}}};
  SimulationSpec s = five_ms_steps(p, {{0.0, 8, 6}});
  // The report keeps the gaps sorted: compare them so.
  auto gaps = [&] {
    std::vector<double> g = run_simulation(s).report.results.at(0).itl_samples;
    std::sort(g.begin(), g.end());
    return g;
  };
  const std::vector<double> one = gaps(), want = {5, 5, 5, 5.5, 6};
  ASSERT_EQ(one.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(one[i], want[i], 1e-5) << i;
  // Without curves every gap is the 5 ms step.
  s.profile->cold_decode = {};
  for (double g : gaps()) EXPECT_NEAR(g, 5, 1e-5);
  // B (16 prompt tokens) reaches the replica 1 ms into A's third decode step
  // (A's decode steps end 11, 16.5 and 21.5 ms after its prefill began), and
  // prefills in the next step beside A's decode (a prefill step: no extra).
  // The two decode steps after it pay the whole curve: 2 and 1 ms.
  s = five_ms_steps(p, {{0.0, 8, 12}, {0.0175, 16, 3}});
  const std::vector<double> got = gaps();
  std::vector<double> all = {6, 5.5, 5, 5, 7, 6, 5, 5, 5, 5, 5, /* B: */ 7, 6};
  std::sort(all.begin(), all.end());
  ASSERT_EQ(got.size(), all.size());
  for (size_t i = 0; i < all.size(); ++i) EXPECT_NEAR(got[i], all[i], 1e-5) << i;
}

// A profile's serving terms replace the perf model's overheads: each step
// pays step_overhead_us (here below 0: serve's back-to-back steps beat the
// table's forward) and each sampled row stream_token_us, which includes the
// sampling, so no separate sampling cost. 5 ms - 0.4 + 0.3 a token.
TEST(Fleet, ProfileServingTermsPriceEveryStep) {
  planner::ModelProfile p;
  p.step_overhead_us = -400;
  p.stream_token_us = 300;
  const SimulationSpec s = five_ms_steps(p, {{0.0, 1, 4}});
  const SimulationResult r = run_simulation(s);
  EXPECT_DOUBLE_EQ(r.overheads.per_step_s, -400e-6);
  EXPECT_EQ(r.overheads.per_sampled_row_s, 0.0);
  const auto& res = r.report.results.at(0);
  ASSERT_EQ(res.itl_samples.size(), 3u);
  for (double g : res.itl_samples) EXPECT_NEAR(g, 4.9, 1e-5);  // samples are floats
}

// A profile's front-end time is each request's overhead (TTFT = it + the
// prefill step); --request-overhead-ms overrides it, and -1 means "not given".
TEST(Fleet, ProfileFrontEndTimeIsTheRequestOverheadUnlessGiven) {
  planner::ModelProfile p;
  p.request_overhead_us = 2500;
  SimulationSpec s = five_ms_steps(p, {{0.0, 1, 2}});
  const SimulationResult measured = run_simulation(s);
  EXPECT_DOUBLE_EQ(measured.overheads.per_request_s, 2.5e-3);
  EXPECT_NEAR(measured.report.results.at(0).ttft_ms.p50, 2.5 + 5.0, 1e-6);
  s.request_overhead_ms = 1;
  EXPECT_DOUBLE_EQ(run_simulation(s).overheads.per_request_s, 1e-3);
  s.request_overhead_ms = -1;
  s.profile->request_overhead_us = -1;  // an older profile: the planner's constant
  EXPECT_DOUBLE_EQ(run_simulation(s).overheads.per_request_s, s.request.constants.request_overhead_ms * 1e-3);
  s.request_overhead_ms = -3;
  EXPECT_THROW(run_simulation(s), InputError);
}

// simulate --seed S sends bench --seed S's lengths, request by request.
TEST(Fleet, RequestLengthsAreBenchsForTheSameSeed) {
  loadtest::BenchOptions o;
  o.url = loadtest::parse_http_url("http://127.0.0.1:1");
  o.input_len = {20, 400};
  o.output_len = {5, 90};
  o.seed = 11;
  const loadtest::Workload w(o, "m");
  SimLoad l;
  l.input_len = o.input_len;
  l.output_len = o.output_len;
  l.seed = o.seed;
  std::set<int64_t> seen;
  for (int64_t i = 0; i < 100; ++i) {
    int64_t words = 0, max_tokens = 0;
    w.body(0, i, &words, &max_tokens);
    const SimRequest r = draw_lengths(l, i);
    EXPECT_EQ(r.input_tokens, words);
    EXPECT_EQ(r.output_tokens, max_tokens);
    seen.insert(max_tokens);
  }
  EXPECT_GT(seen.size(), 40u);  // the ranges are drawn from, not one value
}

TEST(Fleet, SameSeedSameRunOtherSeedOtherRun) {
  SimulationSpec s = testing::spec_for("llama-3.1-8b", "H100-SXM");
  s.layout.dp = 3;
  s.load.kind = LoadKind::kPoisson;
  s.load.rate = 40;
  s.load.num_requests = 300;
  s.load.input_len = {50, 900};
  s.load.output_len = {10, 200};
  s.load.seed = 7;
  const SimulationResult a = run_simulation(s), b = run_simulation(s);
  const auto& la = a.report.results[0];
  const auto& lb = b.report.results[0];
  EXPECT_EQ(la.ttft_samples, lb.ttft_samples);
  EXPECT_EQ(la.itl_samples, lb.itl_samples);
  EXPECT_EQ(la.output_tokens, lb.output_tokens);
  s.load.seed = 8;
  const SimulationResult c = run_simulation(s);
  EXPECT_NE(la.ttft_samples, c.report.results[0].ttft_samples);
}

TEST(Fleet, PoissonArrivalsHaveTheRequestedRate) {
  SimLoad l;
  l.kind = LoadKind::kPoisson;
  l.rate = 25;
  l.num_requests = 20000;
  validate_load(l);
  const auto reqs = open_loop_requests(l);
  ASSERT_EQ(reqs.size(), 20000u);
  const double rate = (reqs.size() - 1) / reqs.back().arrival_s;
  EXPECT_NEAR(rate, 25, 25 * 4 / std::sqrt(20000.0));  // 4 sigma of a Gamma(n) mean
  l.num_requests = 0;
  l.duration_s = 10;
  for (const SimRequest& r : open_loop_requests(l)) EXPECT_LT(r.arrival_s, 10);
}

TEST(Fleet, RoundRobinSplitsAndLeastOutstandingBalances) {
  SimulationSpec s = constant_step_spec();
  s.layout.dp = 4;
  s.load.kind = LoadKind::kClosedLoop;
  s.load.concurrency = 8;
  s.load.num_requests = 8;
  for (RoutePolicy p : {RoutePolicy::kRoundRobin, RoutePolicy::kLeastOutstandingTokens}) {
    s.policy = p;
    const SimulationResult r = run_simulation(s);
    // Two streams per replica: each replica runs 1 prefill + 49 decode steps at batch 2.
    EXPECT_EQ(r.fleet.steps, 4u * 50u) << route_policy_name(p);
    const ReplicaModel m = replica_model(s.request, planner::Layout{1, 1, 1, 1}, 51, 16);
    EXPECT_NEAR(r.report.results[0].tpot_ms.p50, planner::decode_step_s(m.perf, 2, 0) * 1e3, 1e-9);
  }
}

TEST(Fleet, SmallKvPoolPreemptsAndStillFinishesEverything) {
  SimulationSpec s = testing::spec_for("llama-3.1-8b", "H100-SXM");
  s.load.kind = LoadKind::kClosedLoop;
  s.load.concurrency = 64;
  s.load.num_requests = 200;
  s.load.input_len = {1500, 1500};
  s.load.output_len = {600, 600};
  // 80 GB x 0.9 leaves room for ~ 64 x 2100 tokens; 0.3 leaves a fraction.
  s.request.memory.gpu_memory_utilization = 0.3;
  const SimulationResult r = run_simulation(s);
  EXPECT_GT(r.fleet.preemptions, 0u);
  EXPECT_EQ(r.report.results[0].completed, 200);
  EXPECT_EQ(r.report.results[0].output_tokens, 200 * 600);
}

TEST(Fleet, RequestsLongerThanTheContextAreRefusedLikeHttp400) {
  SimulationSpec s = testing::spec_for("llama-3.1-8b", "H100-SXM");
  s.load.kind = LoadKind::kClosedLoop;
  s.load.num_requests = 10;
  s.load.input_len = {100, 100};
  s.load.output_len = {100, 100};
  s.max_model_len = 150;
  const SimulationResult r = run_simulation(s);
  EXPECT_EQ(r.fleet.rejected, 10);
  EXPECT_EQ(r.report.results[0].errors[static_cast<int>(loadtest::ErrorKind::kHttp4xx)], 10);
}

TEST(Fleet, ItlSamplesAreThinnedPastTheLimit) {
  SimulationSpec s = constant_step_spec();
  s.load.kind = LoadKind::kClosedLoop;
  s.load.concurrency = 4;
  s.load.num_requests = 40;
  FleetOptions fo;
  fo.replica.n_kv_blocks = 1000;
  fo.replica.scheduler.max_model_len = 51;
  fo.max_itl_samples = 500;  // 40 x 49 gaps in all
  const ReplicaModel m = replica_model(s.request, s.layout, 51, 16);
  const StepCost cost(m.perf, ServeOverheads{});
  SimLoad load = s.load;
  validate_load(load);
  const FleetResult r = simulate_fleet(fo, cost, load);
  EXPECT_EQ(r.itl_stride, 4);
  int64_t kept = 0;
  for (const auto& rec : r.run.records) {
    if (rec.index % 4 != 0) {
      EXPECT_TRUE(rec.itl_ms.empty());
    }
    kept += static_cast<int64_t>(rec.itl_ms.size());
  }
  EXPECT_EQ(kept, 10 * 49);
}

TEST(Fleet, ImpossibleLayoutsAreInputErrors) {
  SimulationSpec s = testing::spec_for("llama-3.1-8b", "H100-SXM");
  EXPECT_THROW(replica_model(s.request, planner::Layout{1, 3, 1, 1}, 2048, 16),
               InputError);  // 32 heads
  EXPECT_THROW(replica_model(s.request, planner::Layout{1, 16, 1, 1}, 2048, 16),
               InputError);  // > a node
  EXPECT_THROW(replica_model(s.request, planner::Layout{1, 1, 33, 1}, 2048, 16),
               InputError);  // > layers
  SimulationSpec big = testing::spec_for("llama-3.1-70b", "RTX-4090");
  EXPECT_THROW(replica_model(big.request, planner::Layout{1, 1, 1, 1}, 2048, 16),
               InputError);  // does not fit
  EXPECT_THROW(parse_layout("tp=0"), InputError);
  EXPECT_THROW(parse_layout("tp=2,xx=1"), InputError);
  EXPECT_THROW(parse_layout("dp=-4"), InputError);
  EXPECT_THROW(parse_layout(""), InputError);
  const planner::Layout l = parse_layout("tp=2,pp=1,dp=500");
  EXPECT_EQ(l.tp * 1000000 + l.pp * 1000 + l.dp, 2001500);
  EXPECT_EQ(layout_text(l), "tp=2,pp=1,dp=500");
}

}  // namespace
}  // namespace parallm::sim
