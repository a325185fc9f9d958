// Online serving of one replica under continuous batching, analytically: the
// scheduler of vLLM v1 / parallm (one token budget per step, chunked prefill
// sharing steps with decode, a waiting queue) at a steady load, either a
// closed loop of C users (each sends its next request when the last one
// ends, as `parallm bench --concurrency` does) or Poisson arrivals at a rate.
// The exact discrete-event answer is src/sim/'s; this is its queueing
// approximation, cheap enough to run for every candidate layout.
//
// Model (per replica; I = input, O = output tokens, B = token budget):
//   D decoding sequences, mean context I + O/2: a pure decode step takes
//     T_d = mixed_step_s(0, D); a step that also carries prefill takes
//     T_c = mixed_step_s(P, D) with P = min(I x waiting, B - D) prompt tokens.
//   prefill is a server of P tokens per T_c: its utilisation is
//     rho = lambda x I x T_c / P; the time fraction in chunk steps is rho,
//     so the mean step (= mean TPOT) is 1 / (rho/T_c + (1 - rho)/T_d).
//   a prompt's own prefill takes ceil(I / P) chunk steps; it waits the M/D/1
//     queueing delay rho / (2 (1 - rho)) x I T_c / P plus half a step.
//   closed loop: lambda = C / (TTFT + (O - 1) TPOT), D = lambda (O - 1) TPOT
//     (Little's law), solved by fixed-point iteration.
//   percentiles: the wait is 0 with probability 1 - rho, else exponential
//     (the heavy-traffic tail of M/G/1), so W_q = (W/rho) ln(rho / (1 - q));
//     a request's TPOT averages O - 1 steps, a binomial share f of them chunk
//     steps: P95 = T_d + (T_c - T_d) (f + 1.645 sqrt(f (1 - f) / (O - 1))).
// SLOs are checked on the P95s.
#pragma once
#include <cstdint>

#include "planner/perf_model.h"

namespace parallm::planner {

struct ServingLoad {
  bool closed_loop = true;
  double concurrency = 1;  // closed loop: sequences in flight on this replica
  double qps = 0;          // open loop: Poisson arrivals per second at this replica
  int64_t input_len = 1024;
  int64_t output_len = 256;
  int64_t max_num_batched_tokens = 8192;  // token budget per step
  int64_t max_num_seqs = 256;             // most sequences one step holds
};

LoadPoint predict_serving(const PerfInputs& in, const ServingLoad& load);

bool meets_slo(const LoadPoint& p, double ttft_slo_ms, double tpot_slo_ms);  // <= 0: no SLO

// Largest closed-loop concurrency <= limit meeting both SLOs at P95; 0 if even
// one sequence misses them.
int64_t max_concurrency_at_slo(const PerfInputs& in, ServingLoad load, int64_t limit, double ttft_slo_ms,
                               double tpot_slo_ms);
// Largest Poisson rate (requests/s) that stays stable, within `max_in_flight`
// sequences, and meets both SLOs at P95; 0 if none.
double max_qps_at_slo(const PerfInputs& in, ServingLoad load, int64_t max_in_flight, double ttft_slo_ms,
                      double tpot_slo_ms);

}  // namespace parallm::planner
