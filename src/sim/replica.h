// Replica: one data-parallel replica of the simulated fleet. It runs the
// project's own Scheduler over its own BlockManager (no KvPool behind it: the
// "simulated pool" of block_manager.h), unchanged, and prices each step's
// plan with StepCost instead of running a forward:
//   begin_step(): plan = scheduler.schedule(); duration = cost(plan's shape)
//                 x the host's drift and jitter (a measured profile's)
//                 x its idle factor, in a busy period that began after the
//                 replica idled
//                 (+ the cold extra of a decode step soon after a prefill)
//   end_step():   scheduler.update(plan, sampled) -> one event per new token
// Sampled tokens are a constant non-stop id, so every request generates its
// output_tokens exactly (bench's --ignore-eos). Prompts are constant ids and
// prefix caching is off by default: simulated prompts share nothing.
#pragma once
#include <cstdint>
#include <limits>
#include <memory>
#include <random>
#include <vector>

#include "kv/block_manager.h"
#include "planner/model_profile.h"
#include "sched/scheduler.h"
#include "sim/step_cost.h"

namespace parallm::sim {

struct ReplicaOptions {
  SchedulerOptions scheduler;
  int64_t n_kv_blocks = 0;
  int64_t block_size = 16;
  bool prefix_caching = false;
  // The host's step-to-step jitter (ModelProfile::noise_sigma): each step's
  // time is multiplied by exp(sigma x N(0, 1)), median 1; 0 = exact times.
  double noise_sigma = 0;
  // The host's slow drift (ModelProfile::drift_sigma, drift_period_s): every
  // step beginning in simulated window [k, k + 1) x period is also multiplied
  // by exp(drift_sigma x z_k), one N(0, 1) draw z_k per window, so the steps of
  // one request share the host's mood as the real ones do; 0 = none.
  double drift_sigma = 0;
  double drift_period_s = 0;
  // Every step of a busy period (steps back to back) whose first step began
  // idle_after_s or more after the replica's previous step ended (or that
  // holds its first step) takes idle_factor x its time
  // (ModelProfile::idle_factor); 1 = none.
  double idle_factor = 1;
  double idle_after_s = 0;
  // Decode-only steps after a step that prefilled a prompt pay its cold
  // extra (ModelProfile::cold_decode), the k-th such step the curve's k-th
  // value; empty = none.
  planner::ColdDecode cold_decode;
};

class Replica {
 public:
  // `noise_seed`: this replica's jitter draws (with noise_sigma > 0).
  Replica(const ReplicaOptions& options, const StepCost& cost, uint64_t noise_seed = 0);

  // Queues request `id` (unique in the fleet); kNever when it can never run.
  AdmissionResult add(uint64_t id, int64_t input_tokens, int64_t output_tokens);
  bool has_work() const { return scheduler_.has_work(); }
  bool in_step() const { return in_step_; }
  // Plans a step beginning at `now_s` and returns its duration in seconds (0:
  // nothing scheduled).
  double begin_step(double now_s);
  // Applies the step begun last: events for each sequence that sampled a token.
  const std::vector<SeqEvent>& end_step();

  // Prompt tokens not computed yet + tokens not generated yet (the router's load).
  int64_t outstanding_tokens() const { return outstanding_tokens_; }
  int64_t in_flight() const { return in_flight_; }
  uint64_t n_preemptions() const { return scheduler_.n_preemptions(); }
  uint64_t n_steps() const { return n_steps_; }
  const StepShape& last_shape() const { return shape_; }
  const Scheduler& scheduler() const { return scheduler_; }

 private:
  BlockManager kv_;
  Scheduler scheduler_;
  const StepCost& cost_;
  const StepPlan* plan_ = nullptr;
  std::vector<int32_t> sampled_;
  std::vector<SeqEvent> events_;
  StepShape shape_;
  double noise_sigma_ = 0;
  double drift_sigma_ = 0, drift_period_s_ = 0;
  double idle_factor_ = 1, idle_after_s_ = 0;
  planner::ColdDecode cold_decode_;
  int64_t decodes_since_prompt_ = -1;  // decode-only steps since the last prefill (-1: none yet)
  double last_prompt_tokens_ = 0;      // prompt tokens of that prefill step
  uint64_t noise_seed_ = 0;
  int64_t drift_window_ = -1;  // the window drift_factor_ belongs to
  double drift_factor_ = 1;
  double idle_since_s_ = -std::numeric_limits<double>::infinity();  // when the last step ended (none: idle)
  bool after_idle_ = false;                                         // this busy period began after idle_after_s or more
  std::mt19937_64 rng_;
  std::normal_distribution<double> normal_;
  double drift_at(double now_s);
  bool in_step_ = false;
  int64_t outstanding_tokens_ = 0, in_flight_ = 0, prefill_tokens_in_step_ = 0;
  uint64_t n_steps_ = 0;
};

}  // namespace parallm::sim
