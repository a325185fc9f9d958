// Fixed-point solution of load_model.h's equations.
#include "planner/load_model.h"

#include <algorithm>
#include <cmath>

namespace parallm::planner {

namespace {

// Quantile q of a wait that is 0 with probability 1 - rho, else exponential
// with mean w_mean / rho.
double wait_quantile(double w_mean, double rho, double q) {
  if (rho <= 1.0 - q || w_mean <= 0) return 0;
  return w_mean / rho * std::log(rho / (1.0 - q));
}

// The steady state at arrival rate `lambda`: the decoding count D is a fixed
// point (it sets the step times, which set how long sequences decode).
struct State {
  double ttft_s = 0, tpot_s = 0, wait_s = 0, rho = 0, f = 0, t_d = 0, t_c = 0, decoding = 0;
};

State at_rate(const PerfInputs& in, const ServingLoad& load, double lambda) {
  const double I = static_cast<double>(std::max<int64_t>(1, load.input_len));
  const double O = static_cast<double>(std::max<int64_t>(1, load.output_len));
  const double B = static_cast<double>(std::max<int64_t>(1, load.max_num_batched_tokens));
  const double seqs_cap = static_cast<double>(std::max<int64_t>(1, load.max_num_seqs));
  const double C = std::max(1.0, load.concurrency);
  const double decode_ctx = I + O / 2.0;
  const double overhead_s = in.k.request_overhead_ms * 1e-3;
  State s;
  double D = 0, prompts = 1;
  for (int it = 0; it < 100; ++it) {
    // A chunk step carries the budget left after decode, or every waiting prompt when they fit.
    const double chunk = std::max(1.0, std::min(B - std::min(D, B - 1), I * std::max(1.0, prompts)));
    s.t_d = mixed_step_s(in, 0, 0, 0, std::max(D, 1.0), decode_ctx);
    s.t_c = mixed_step_s(in, chunk, std::max(1.0, chunk / I), I / 2.0, D, decode_ctx);
    const double service_s = std::max(1.0, std::ceil(I / chunk)) * s.t_c;  // one prompt's own chunks
    const double work_s = I * s.t_c / chunk;                               // its share of chunk-step time
    s.rho = lambda * work_s;
    const double busy = std::min(s.rho, 1.0);
    const double steps_per_s = busy / s.t_c + (1.0 - busy) / s.t_d;
    s.tpot_s = 1.0 / steps_per_s;
    s.f = (busy / s.t_c) / steps_per_s;
    // Kingman's G/D/1 wait, rho/(1-rho) x (ca^2 + cs^2)/2 x service with
    // deterministic service (cs^2 = 0): Poisson arrivals ca^2 = 1; a closed
    // loop's arrivals are the completions of earlier requests, far more
    // regular (ca^2 = 0.5, fitted to the simulation of load_model_test.cpp)
    // and at a step boundary, with no step in progress to wait for.
    const double rho_q = std::min(s.rho, 0.99);
    const double ca2 = load.closed_loop ? 0.5 : 1.0;
    s.wait_s = rho_q / (1.0 - rho_q) * ca2 / 2.0 * work_s;
    if (load.closed_loop) s.wait_s = std::min(s.wait_s, (C - 1) * work_s);  // at most everyone ahead
    if (!load.closed_loop) s.wait_s += 0.5 * s.tpot_s;  // the step in progress when the request arrives
    s.ttft_s = s.wait_s + service_s + overhead_s;
    prompts = lambda * (s.wait_s + service_s);
    double d_next = std::min(lambda * (O - 1) * s.tpot_s, seqs_cap);
    if (load.closed_loop) {
      d_next = std::min(d_next, C);
      prompts = std::min(prompts, std::max(1.0, C - d_next));
    }
    const bool done = it > 2 && std::fabs(d_next - D) < 1e-4 * std::max(1.0, D);
    D = it == 0 ? d_next : 0.5 * (D + d_next);
    if (done) break;
  }
  s.decoding = D;
  return s;
}

}  // namespace

LoadPoint predict_serving(const PerfInputs& in, const ServingLoad& load) {
  const double O = static_cast<double>(std::max<int64_t>(1, load.output_len));
  const double C = std::max(1.0, load.concurrency);
  double lambda = load.qps;
  State s;
  if (load.closed_loop) {
    // lambda x cycle(lambda) = C (Little's law over the whole loop); the left
    // side grows with lambda, so bisect. Upper bound: every sequence decoding
    // at batch one with no prefill at all.
    const State alone = at_rate(in, load, 1e-9);
    double lo = 0, hi = C / std::max(1e-9, (O - 1) * alone.t_d + alone.t_c);
    for (int i = 0; i < 60; ++i) {
      const double mid = 0.5 * (lo + hi);
      const State m = at_rate(in, load, mid);
      if (mid * (m.ttft_s + (O - 1) * m.tpot_s) > C)
        hi = mid;
      else
        lo = mid;
      if (hi - lo < 1e-6 * hi) break;
    }
    lambda = lo;
  }
  s = at_rate(in, load, lambda);
  const double seqs_cap = static_cast<double>(std::max<int64_t>(1, load.max_num_seqs));
  const bool stable = load.closed_loop || (s.rho < 1.0 && lambda * (O - 1) * s.tpot_s <= seqs_cap);

  LoadPoint r;
  r.stable = stable;
  r.requests_per_s = lambda;
  r.output_tokens_per_s = lambda * O;
  r.concurrency = load.closed_loop ? C : lambda * (s.ttft_s + (O - 1) * s.tpot_s);
  r.queue_ms = s.wait_s * 1e3;
  r.ttft_ms = s.ttft_s * 1e3;
  r.tpot_ms = s.tpot_s * 1e3;
  // The queueing part of the wait has the exponential tail; the rest is fixed.
  const double queue_only = std::max(0.0, s.wait_s - (load.closed_loop ? 0.0 : 0.5 * s.tpot_s));
  const double fixed_s = s.ttft_s - queue_only;
  const double rho_q = std::min(s.rho, 0.99);
  r.ttft_p50_ms = (fixed_s + wait_quantile(queue_only, rho_q, 0.50)) * 1e3;
  r.ttft_p95_ms = (fixed_s + wait_quantile(queue_only, rho_q, 0.95)) * 1e3;
  // Mean TPOT is what requests see on average; the P50 of per-request means
  // sits at it, the P95 above it by the binomial spread of chunk steps.
  r.tpot_p50_ms = r.tpot_ms;
  const double steps = std::max(1.0, O - 1);
  const double spread = std::min(1.0, s.f + 1.645 * std::sqrt(std::max(0.0, s.f * (1 - s.f)) / steps));
  r.tpot_p95_ms = std::max(r.tpot_ms, (s.t_d + (s.t_c - s.t_d) * spread) * 1e3);
  if (!stable) r.ttft_ms = r.ttft_p50_ms = r.ttft_p95_ms = r.queue_ms = HUGE_VAL;
  return r;
}

bool meets_slo(const LoadPoint& p, double ttft_slo_ms, double tpot_slo_ms) {
  if (!p.stable) return false;
  return (ttft_slo_ms <= 0 || p.ttft_p95_ms <= ttft_slo_ms) && (tpot_slo_ms <= 0 || p.tpot_p95_ms <= tpot_slo_ms);
}

int64_t max_concurrency_at_slo(const PerfInputs& in, ServingLoad load, int64_t limit, double ttft_slo_ms,
                               double tpot_slo_ms) {
  load.closed_loop = true;
  auto ok = [&](int64_t c) {
    load.concurrency = static_cast<double>(c);
    return meets_slo(predict_serving(in, load), ttft_slo_ms, tpot_slo_ms);
  };
  if (limit < 1 || !ok(1)) return 0;
  int64_t lo = 1, hi = limit;  // latency grows with concurrency: binary search
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo + 1) / 2;
    if (ok(mid))
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

double max_qps_at_slo(const PerfInputs& in, ServingLoad load, int64_t max_in_flight, double ttft_slo_ms,
                      double tpot_slo_ms) {
  if (max_in_flight < 1) return 0;
  // The closed loop at the most sequences memory holds bounds the rate.
  ServingLoad closed = load;
  closed.closed_loop = true;
  closed.concurrency = static_cast<double>(max_in_flight);
  const double hi_rate = predict_serving(in, closed).requests_per_s;
  load.closed_loop = false;
  auto ok = [&](double q) {
    load.qps = q;
    const LoadPoint p = predict_serving(in, load);
    return p.concurrency <= static_cast<double>(max_in_flight) && meets_slo(p, ttft_slo_ms, tpot_slo_ms);
  };
  double lo = 0, hi = hi_rate;
  if (!(hi > 0)) return 0;
  if (ok(hi)) return hi;
  for (int i = 0; i < 40; ++i) {
    const double mid = 0.5 * (lo + hi);
    if (ok(mid))
      lo = mid;
    else
      hi = mid;
  }
  return lo;
}

}  // namespace parallm::planner
