// Replica: see replica.h.
#include "sim/replica.h"

#include <cmath>

#include "util/check.h"

namespace parallm::sim {

namespace {
constexpr int32_t kPromptToken = 1;   // any id: the simulated pool stores no tokens
constexpr int32_t kSampledToken = 2;  // never a stop token (the predicate says no)
}  // namespace

Replica::Replica(const ReplicaOptions& options, const StepCost& cost, uint64_t noise_seed)
    : kv_(options.n_kv_blocks, options.block_size, options.prefix_caching),
      scheduler_(options.scheduler, kv_, [](int32_t) { return false; }),
      cost_(cost),
      noise_sigma_(options.noise_sigma),
      drift_sigma_(options.drift_sigma),
      drift_period_s_(options.drift_period_s),
      idle_factor_(options.idle_factor),
      idle_after_s_(options.idle_after_s),
      cold_decode_(options.cold_decode),
      noise_seed_(noise_seed),
      rng_(noise_seed) {
  PARALLM_CHECK(drift_sigma_ == 0 || drift_period_s_ > 0);
  PARALLM_CHECK(idle_factor_ > 0 && idle_after_s_ >= 0);
}

AdmissionResult Replica::add(uint64_t id, int64_t input_tokens, int64_t output_tokens) {
  SeqRequest r;
  r.id = id;
  r.prompt.assign(static_cast<size_t>(input_tokens), kPromptToken);
  r.max_tokens = output_tokens;
  r.ignore_eos = true;
  AdmissionResult a = scheduler_.add(std::move(r));
  if (a.status == Admission::kOk) {
    outstanding_tokens_ += input_tokens + output_tokens;
    ++in_flight_;
  }
  return a;
}

// A window's draw depends only on (seed, window), not on how many steps came
// before, so two simulations of one load drift alike whatever they schedule.
double Replica::drift_at(double now_s) {
  if (drift_sigma_ <= 0) return 1;
  const auto window = static_cast<int64_t>(std::floor(now_s / drift_period_s_));
  if (window != drift_window_) {
    std::mt19937_64 g(noise_seed_ ^ (0xD1B54A32D192ED03ull * static_cast<uint64_t>(window + 1)));
    drift_window_ = window;
    drift_factor_ = std::exp(drift_sigma_ * std::normal_distribution<double>()(g));
  }
  return drift_factor_;
}

double Replica::begin_step(double now_s) {
  PARALLM_CHECK(!in_step_);
  const StepPlan& plan = scheduler_.schedule();
  shape_ = StepShape{};
  prefill_tokens_in_step_ = 0;
  for (const ScheduledSeq& e : plan.seqs) {
    shape_.n_tokens += e.n_new;
    if (e.wants_logits) ++shape_.n_sampled;
    // A decode computes the one token sampled last step; everything else is a
    // prompt chunk (or the recompute of a preempted sequence).
    const bool decode = e.n_new == 1 && e.wants_logits && e.pos0 > 0;
    if (decode) {
      ++shape_.n_decode;
      shape_.decode_ctx_tokens += static_cast<double>(e.pos0 + 1);
    } else {
      const double n = static_cast<double>(e.n_new);
      shape_.prefill_pairs += n * static_cast<double>(e.pos0) + n * n / 2;
      prefill_tokens_in_step_ += e.n_new;
    }
  }
  if (plan.seqs.empty()) return 0;
  plan_ = &plan;
  in_step_ = true;
  ++n_steps_;
  double d = cost_.step_s(shape_);
  if (prefill_tokens_in_step_ > 0) {
    decodes_since_prompt_ = 0;
    last_prompt_tokens_ = static_cast<double>(prefill_tokens_in_step_);
  } else if (decodes_since_prompt_ >= 0) {
    d += cold_decode_.extra_s(decodes_since_prompt_++, last_prompt_tokens_, shape_.decode_ctx_tokens);
  }
  d *= drift_at(now_s);
  // A step that does not follow the last one at once begins a busy period.
  // NOTE: serve ran whole busy periods slower after a pause, not only their
  // first step: prefills after 300 ms or more idle 62 ms against 54 back to
  // back, with no decay over 600 ms; decode steps 20-40 of single requests
  // 2-7% slower after 10 ms to 2 s idle (docs/PERFORMANCE.md, 2026-12-06).
  if (now_s > idle_since_s_) after_idle_ = now_s - idle_since_s_ >= idle_after_s_;
  if (after_idle_) d *= idle_factor_;
  if (noise_sigma_ > 0) d *= std::exp(noise_sigma_ * normal_(rng_));
  idle_since_s_ = now_s + d;
  return d;
}

const std::vector<SeqEvent>& Replica::end_step() {
  PARALLM_CHECK(in_step_ && plan_ != nullptr);
  in_step_ = false;
  sampled_.resize(plan_->seqs.size());
  for (size_t i = 0; i < plan_->seqs.size(); ++i) sampled_[i] = plan_->seqs[i].wants_logits ? kSampledToken : -1;
  scheduler_.update(*plan_, sampled_, &events_);
  plan_ = nullptr;
  // NOTE: a preempted sequence's recompute is not added back: the router's
  // count, like the HTTP router's, tracks what clients asked for.
  outstanding_tokens_ -= prefill_tokens_in_step_;
  for (const SeqEvent& ev : events_) {
    outstanding_tokens_ -= 1;
    if (ev.finish != FinishReason::kNone) --in_flight_;
  }
  if (in_flight_ == 0) outstanding_tokens_ = 0;
  return events_;
}

}  // namespace parallm::sim
