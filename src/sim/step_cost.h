// StepCost: seconds of one mixed scheduler step (chunked prefill + decode in
// one forward) on one replica, built on the planner's public perf_model
// functions so the simulator and `plan` share one cost model. A step is
//   weight GEMMs over all its tokens (logits only for the sampling rows)
//   + decode attention: KV bytes of every decoding sequence's context
//   + prefill attention: causal FLOPs of each chunk (n_new x pos0 + n_new^2/2
//     query-key pairs: the chunk attends the cached prefix and itself)
//   + the serve loop's own cost per step and per sampled row (ServeOverheads).
// Both attention terms are linear in their sizes in perf_model (roofline on
// KV bytes, resp. causal FLOPs), so their per-unit coefficients are read off
// once by differencing perf_model with and without attention. A pure decode
// step is decode_step_s() itself, a lone prompt prefill_s() itself.
// With a ModelProfile (simulate --local on the profiled file) the forward is
// the profile's table and coefficients instead, the same decomposition, plus
// the host's streaming of each sampled token (ModelProfile::stream_token_us).
// NOTE: when perf_model.h gains its own mixed-step function, step_s() becomes
// a call to it; nothing else in src/sim/ depends on how the time is found.
#pragma once
#include <cstdint>

#include "planner/model_profile.h"
#include "planner/perf_model.h"

namespace parallm::sim {

// What the step's plan asks of the forward (see Replica::begin_step).
struct StepShape {
  int64_t n_tokens = 0;          // tokens computed: prefill chunks + one per decode
  int64_t n_sampled = 0;         // rows that get logits and a sampled token
  int64_t n_decode = 0;          // sequences computing exactly their last token
  double decode_ctx_tokens = 0;  // sum over decode sequences of their context (KV tokens read)
  double prefill_pairs = 0;      // sum over prefill chunks of n_new x pos0 + n_new^2 / 2
};

// Costs of the serving loop around the forward, in seconds.
struct ServeOverheads {
  double per_step_s = 0;         // planning, batch assembly, event hand-off
  double per_sampled_row_s = 0;  // copy and sample one vocabulary row (CPU engine)
  double per_request_s = 0;      // request parse, template, tokenize: added to TTFT
};

class StepCost {
 public:
  StepCost(const planner::PerfInputs& in, const ServeOverheads& overheads);
  // Prices the forward with a measured profile of the model (model_profile.h)
  // instead of the perf model; `profile` must outlive this.
  StepCost(const planner::PerfInputs& in, const ServeOverheads& overheads, const planner::ModelProfile* profile);
  double step_s(const StepShape& s) const;
  const ServeOverheads& overheads() const { return overheads_; }
  double prefill_pair_s() const { return prefill_pair_s_; }
  double decode_ctx_token_s() const { return decode_ctx_token_s_; }

 private:
  planner::PerfInputs in_;       // as given
  planner::PerfInputs no_attn_;  // attention at (practically) infinite speed
  ServeOverheads overheads_;
  const planner::ModelProfile* profile_ = nullptr;
  double prefill_pair_s_ = 0;      // seconds per causal query-key pair
  double decode_ctx_token_s_ = 0;  // seconds per context token read in decode
};

// The CPU engine's sampling of one row: copy the vocabulary's fp32 logits and
// pass over them (max, exp-sum, draw), at the device's streaming bandwidth.
double cpu_sample_row_s(const planner::PerfInputs& in);

}  // namespace parallm::sim
