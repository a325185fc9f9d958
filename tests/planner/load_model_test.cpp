// load_model.h's queueing approximation against an independent reference: a
// small discrete-event simulation of the scheduling rule it approximates
// (FCFS, one token budget per step: every decoding sequence one token, the
// rest to waiting prompts in chunks), with step times from the same
// mixed_step_s, Poisson arrivals or a closed loop, and the percentiles taken
// over the simulated requests. The tolerances are the ones docs/plan.md states
// for the approximation.
#include "planner/load_model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <deque>
#include <random>
#include <vector>

#include "planner/model_catalog.h"

namespace parallm::planner {
namespace {

struct Rig {
  ModelSpec model;
  PerfInputs in;
};

void rig(Rig* s) {
  s->model = catalog_model("llama-3.1-8b");
  PerfInputs& in = s->in;
  in.model = &s->model;
  in.params = count_params(s->model);
  in.weights = parse_weight_format("bf16");
  in.gpu = catalog_gpu("H100-SXM");
  in.layout = Layout{1, 1, 1, 1};
  MemoryOptions opt;
  in.memory = device_memory(s->model, in.params, in.weights, 2, in.gpu, in.layout, opt, 4096);
}

struct Req {
  double arrival = 0, first = 0, done = 0;
  int64_t prefilled = 0, produced = 0;
};

double pct(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(q * static_cast<double>(v.size() - 1))];
}

struct Sim {
  double ttft_p50, ttft_p95, tpot_p50, tpot_p95, tokens_per_s;
};

Sim simulate(const PerfInputs& in, const ServingLoad& load, int n_requests) {
  const int64_t I = load.input_len, O = load.output_len, B = load.max_num_batched_tokens;
  std::mt19937_64 rng(7);
  std::exponential_distribution<double> gap(load.closed_loop ? 1.0 : load.qps);
  std::vector<Req> reqs;
  std::deque<int> waiting;
  std::vector<int> running;
  double t = 0, next_arrival = 0;
  int issued = 0;
  auto issue = [&](double at) {
    reqs.push_back(Req{at});
    waiting.push_back(issued++);
  };
  if (load.closed_loop)
    for (int i = 0; i < static_cast<int>(load.concurrency); ++i) issue(0);
  while (true) {
    if (!load.closed_loop)
      while (issued < n_requests && next_arrival <= t) {
        issue(next_arrival);
        next_arrival += gap(rng);
      }
    if (running.empty() && waiting.empty()) {
      if (issued >= n_requests) break;
      t = next_arrival;
      continue;
    }
    // Decode first (one token each), then prompt chunks FCFS under the budget.
    const double d = static_cast<double>(running.size());
    double ctx_sum = 0;
    for (int id : running) ctx_sum += static_cast<double>(I + reqs[id].produced);
    int64_t budget = B - static_cast<int64_t>(running.size());
    double p_tokens = 0, p_ctx = 0, p_seqs = 0;
    std::vector<std::pair<int, int64_t>> chunks;
    for (int id : waiting) {
      if (budget <= 0 || static_cast<int64_t>(running.size() + chunks.size()) >= load.max_num_seqs) break;
      const int64_t take = std::min(budget, I - reqs[id].prefilled);
      chunks.emplace_back(id, take);
      p_ctx += static_cast<double>(take) * (static_cast<double>(reqs[id].prefilled) + take / 2.0);
      p_tokens += static_cast<double>(take);
      p_seqs += 1;
      budget -= take;
    }
    const double step =
        mixed_step_s(in, p_tokens, p_seqs, p_tokens > 0 ? p_ctx / p_tokens : 0, d, d > 0 ? ctx_sum / d : 0);
    t += step;
    std::vector<int> still;
    for (int id : running) {
      if (++reqs[id].produced >= O) {
        reqs[id].done = t;
        if (load.closed_loop && issued < n_requests) issue(t);
      } else {
        still.push_back(id);
      }
    }
    for (auto [id, take] : chunks) {
      reqs[id].prefilled += take;
      if (reqs[id].prefilled >= I) {
        reqs[id].first = t + in.k.request_overhead_ms * 1e-3;
        reqs[id].produced = 1;
        waiting.erase(std::find(waiting.begin(), waiting.end(), id));
        still.push_back(id);
      }
    }
    running = still;
  }
  std::vector<double> ttft, tpot;
  const size_t warm = reqs.size() / 10;
  double first_done = 1e30, last_done = 0;
  for (size_t i = warm; i < reqs.size(); ++i) {
    ttft.push_back(reqs[i].first - reqs[i].arrival);
    tpot.push_back((reqs[i].done - reqs[i].first) / static_cast<double>(O - 1));
    first_done = std::min(first_done, reqs[i].done);
    last_done = std::max(last_done, reqs[i].done);
  }
  return Sim{pct(ttft, 0.5) * 1e3, pct(ttft, 0.95) * 1e3, pct(tpot, 0.5) * 1e3, pct(tpot, 0.95) * 1e3,
             static_cast<double>(ttft.size() - 1) * O / (last_done - first_done)};
}

void compare(const char* what, double model, double sim, double tol) {
  const double e = (model - sim) / sim;
  std::printf("  %-10s model %9.2f  simulated %9.2f  (%+.0f%%)\n", what, model, sim, e * 100);
  EXPECT_LT(std::fabs(e), tol) << what;
}

TEST(LoadModel, MixedStepWithoutPrefillIsADecodeStep) {
  Rig s;
  rig(&s);
  for (double b : {1.0, 8.0, 64.0})
    EXPECT_DOUBLE_EQ(mixed_step_s(s.in, 0, 0, 0, b, 1500), decode_step_s(s.in, b, 1500));
  // A lone whole prompt is a prefill: same causal FLOPs (len/2 context per token).
  EXPECT_NEAR(mixed_step_s(s.in, 1024, 1, 512, 0, 0), prefill_s(s.in, 1, 1024), 1e-12);
}

TEST(LoadModel, AgreesWithADiscreteEventSimulation) {
  Rig s;
  rig(&s);
  ServingLoad base;
  base.input_len = 1024;
  base.output_len = 128;
  base.max_num_batched_tokens = 2048;
  base.max_num_seqs = 256;
  ServingLoad closed = base;
  closed.concurrency = 256;
  const double full_rate = predict_serving(s.in, closed).requests_per_s;
  struct Point {
    bool closed;
    double value;
  };
  for (const Point pt : {Point{true, 4}, Point{true, 32}, Point{true, 128}, Point{false, 0.3 * full_rate},
                         Point{false, 0.6 * full_rate}, Point{false, 0.85 * full_rate}}) {
    ServingLoad l = base;
    l.closed_loop = pt.closed;
    if (pt.closed)
      l.concurrency = pt.value;
    else
      l.qps = pt.value;
    const LoadPoint m = predict_serving(s.in, l);
    const Sim sim = simulate(s.in, l, 4000);
    std::printf("%s %.4g:\n", pt.closed ? "closed loop, concurrency" : "Poisson, requests/s", pt.value);
    compare("tokens/s", m.output_tokens_per_s, sim.tokens_per_s, 0.10);
    compare("TPOT p50", m.tpot_p50_ms, sim.tpot_p50, 0.25);
    compare("TPOT p95", m.tpot_p95_ms, sim.tpot_p95, 0.30);
    compare("TTFT p50", m.ttft_p50_ms, sim.ttft_p50, 0.40);
    compare("TTFT p95", m.ttft_p95_ms, sim.ttft_p95, 0.60);
  }
}

}  // namespace
}  // namespace parallm::planner
