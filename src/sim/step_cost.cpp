// StepCost: see step_cost.h for the decomposition.
#include "sim/step_cost.h"

#include <algorithm>

#include "util/check.h"

namespace parallm::sim {

namespace {
constexpr double kProbeLen = 1024;  // any size works: the terms are linear
}  // namespace

StepCost::StepCost(const planner::PerfInputs& in, const ServeOverheads& overheads)
    : in_(in), no_attn_(in), overheads_(overheads) {
  PARALLM_CHECK(in.model != nullptr);
  no_attn_.k.attn_bw_eff = 1e300;
  no_attn_.k.attn_flops_eff = 1e300;
  const double pairs = kProbeLen * kProbeLen / 2;
  prefill_pair_s_ =
      std::max(0.0, planner::prefill_s(in_, 1, kProbeLen) - planner::prefill_s(no_attn_, 1, kProbeLen)) / pairs;
  decode_ctx_token_s_ =
      std::max(0.0, planner::decode_step_s(in_, 1, kProbeLen) - planner::decode_step_s(no_attn_, 1, kProbeLen)) /
      kProbeLen;
}

StepCost::StepCost(const planner::PerfInputs& in, const ServeOverheads& overheads, const planner::ModelProfile* profile)
    : StepCost(in, overheads) {
  profile_ = profile;
  if (profile_ != nullptr) {
    prefill_pair_s_ = profile_->prefill_pair_ns * 1e-9;
    decode_ctx_token_s_ = profile_->decode_kv_token_ns * 1e-9;
  }
}

double StepCost::step_s(const StepShape& s) const {
  if (s.n_tokens <= 0) return 0;
  double forward = 0;
  if (profile_ != nullptr) {
    forward = planner::profile_forward_s(*profile_, static_cast<double>(s.n_tokens)) +
              static_cast<double>(std::max<int64_t>(0, s.n_sampled - 1)) * profile_->logit_row_ms * 1e-3 +
              s.prefill_pairs * prefill_pair_s_ + planner::profile_decode_kv_s(*profile_, s.decode_ctx_tokens) +
              static_cast<double>(s.n_sampled) * profile_->stream_token_us * 1e-6;
  } else if (s.n_decode == s.n_tokens) {
    // Pure decode: the perf model's TPOT at the batch's mean context.
    const double b = static_cast<double>(s.n_decode);
    forward = planner::decode_step_s(in_, b, s.decode_ctx_tokens / b);
  } else {
    // GEMMs over every token, logits for the sampling rows only: prefill_s of
    // n_sampled "prompts" sharing the tokens, attention priced separately.
    const double rows = static_cast<double>(std::max<int64_t>(1, s.n_sampled));
    forward = planner::prefill_s(no_attn_, rows, static_cast<double>(s.n_tokens) / rows) +
              s.prefill_pairs * prefill_pair_s_ + s.decode_ctx_tokens * decode_ctx_token_s_;
  }
  return forward + overheads_.per_step_s + static_cast<double>(s.n_sampled) * overheads_.per_sampled_row_s;
}

double cpu_sample_row_s(const planner::PerfInputs& in) {
  // NOTE: 4 passes over 4-byte logits (copy = read + write, max, exp-sum) at
  // the calibrated streaming bandwidth; the draw itself stops early on average.
  const double bytes = 4.0 * 4.0 * static_cast<double>(in.model->config.n_vocab);
  return bytes / (in.gpu.mem_bw_gbps * 1e9 * std::max(0.05, in.k.bw_eff));
}

}  // namespace parallm::sim
