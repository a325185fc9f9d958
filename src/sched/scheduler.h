// Scheduler: continuous batching in the vLLM-v1 style, pure logic over a
// BlockManager (STYLE.md principles 2-3). Each sequence has n_tokens (prompt +
// generated) and n_computed; each step spends max_num_batched_tokens so that
// computed catches up, for at most max_num_seqs running sequences:
//   1. decode tokens of running sequences (1 token each), oldest first;
//   2. the next prefill chunk of running, partially prefilled short sequences;
//   3. new sequences from the waiting queue, best (priority, arrival) first,
//      each with as big a first chunk as the budget allows (chunked prefill);
//      a prefix-cache hit advances n_computed at admission. FCFS: when the
//      head cannot get blocks, nothing behind it is admitted.
// Long prompts (n_tokens > long_prompt_threshold) wait in their own queue and
// prefill one at a time. Policy: the long work (the in-flight long prefill's
// next chunk, else admitting the long queue's head) takes the budget BEFORE
// step 3 on alternate steps and AFTER it (leftover budget only) on the others.
// Short requests thus wait at most one step behind a long chunk, and long ones
// progress at least every other step, or every step when shorts leave budget.
// Blocks run out: the newest running sequence (largest (priority, arrival)) is
// preempted: its blocks are freed and n_computed goes back to 0, its generated
// tokens stay part of its tokens, and it returns to its waiting queue; its
// prefix-cache blocks usually make the recompute cheap. No new sequence is
// admitted in a step that preempted. Nothing is ever dropped.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "kv/block_manager.h"
#include "sched/step_plan.h"

namespace parallm {

struct SchedulerOptions {
  int64_t max_num_seqs = 256;
  int64_t max_num_batched_tokens = 2048;
  int64_t max_model_len = 2048;       // prompt + generated tokens at most
  int64_t long_prompt_threshold = 0;  // 0 = max_num_batched_tokens
  int64_t max_queue = 1024;           // waiting sequences before add() answers later
};

struct SeqRequest {
  uint64_t id = 0;              // unique, chosen by the caller
  std::vector<int32_t> prompt;  // [n_prompt]
  int64_t max_tokens = 16;      // generated tokens at most (>= 1)
  int priority = 0;             // lower first; FCFS within a priority
  bool ignore_eos = false;
  // The executor wants logits at every prompt position (prompt logprobs):
  // the prompt is computed in full (no prefix-cache hits), in chunks of at
  // most kMaxPromptLogitRows tokens so the logits of a step stay bounded.
  bool prompt_logits = false;
  std::vector<int32_t> stop_ids{};  // request-specific stop tokens, checked even with ignore_eos
  // Prefill only (embeddings): the prompt is computed in full (no prefix-cache
  // hits: every position's hidden state is wanted), nothing is sampled, and
  // the sequence finishes (kStop, no token) once its prompt is computed, its
  // blocks freed at once. max_tokens is ignored (0).
  bool prefill_only = false;
};

constexpr int64_t kMaxPromptLogitRows = 128;

class Scheduler {
 public:
  using StopPredicate = std::function<bool(int32_t token)>;
  Scheduler(const SchedulerOptions& options, BlockManager& kv, StopPredicate is_stop);

  // Would a request be admitted? never: it can never run (too long for
  // max_model_len or the whole KV pool); ok otherwise. Uses only immutable
  // state, so it may run on any thread. prefill_only: the prompt alone must
  // fit (max_tokens is ignored).
  AdmissionResult check(int64_t n_prompt, int64_t max_tokens, bool prefill_only = false) const;
  // Queues a request: check(), plus later when max_queue requests wait.
  AdmissionResult add(SeqRequest request);
  // Removes a sequence at the next step boundary (listed in plan.aborted).
  // Returns false when the id is unknown (finished or never added).
  bool abort(uint64_t id);

  // Plans one step. The plan stays valid until the next schedule().
  const StepPlan& schedule();
  // sampled[i]: the token sampled for plan.seqs[i] (-1 where !wants_logits).
  // Appends tokens, detects finishes, frees finished sequences' blocks.
  void update(const StepPlan& plan, const std::vector<int32_t>& sampled, std::vector<SeqEvent>* events);

  bool has_work() const { return !seqs_.empty(); }
  int64_t n_running() const { return static_cast<int64_t>(running_.size()); }
  int64_t n_waiting() const { return static_cast<int64_t>(short_queue_.size() + long_queue_.size()); }
  uint64_t n_preemptions() const { return n_preemptions_; }
  int64_t long_prompt_threshold() const { return long_threshold_; }
  const BlockManager& kv() const { return kv_; }

 private:
  struct Sequence {
    uint64_t id = 0;
    std::vector<int32_t> tokens;  // [n_tokens] prompt then generated
    int64_t n_prompt = 0, max_tokens = 0, n_computed = 0;
    int priority = 0;
    bool ignore_eos = false, prompt_logits = false, prefill_only = false;
    std::vector<int32_t> stop_ids;
    uint64_t arrival = 0;
    bool running = false, is_long = false, aborted = false;
    int64_t plan_index = -1;  // entry in the current plan, -1 if none
    int64_t remaining() const { return static_cast<int64_t>(tokens.size()) - n_computed; }
  };
  using QueueKey = std::tuple<int, uint64_t, uint64_t>;  // (priority, arrival, id)
  static QueueKey key(const Sequence& s) { return {s.priority, s.arrival, s.id}; }

  void enqueue(Sequence& s);
  std::set<QueueKey>& queue_of(const Sequence& s) { return s.is_long ? long_queue_ : short_queue_; }
  // Grows s's blocks for n_new more tokens, preempting newest sequences as
  // needed; false when s itself was preempted.
  bool reserve(Sequence& s, int64_t n_new);
  void preempt(Sequence& s);
  void add_to_plan(Sequence& s, int64_t n_new);
  // The tokens s may compute this step out of `want` (prompt-logits chunks are capped).
  int64_t chunk(const Sequence& s, int64_t want) const;
  // Admits the head of `queue`: false when it cannot run now.
  bool admit_head(std::set<QueueKey>& queue);
  void schedule_long();
  void remove(Sequence& s);  // frees blocks and forgets s

  SchedulerOptions options_;
  BlockManager& kv_;
  StopPredicate is_stop_;
  int64_t long_threshold_;
  std::unordered_map<uint64_t, std::unique_ptr<Sequence>> seqs_;
  std::vector<Sequence*> running_;   // admission order
  std::vector<Sequence*> snapshot_;  // scratch: running_ at the start of a step
  std::set<QueueKey> short_queue_, long_queue_;
  std::vector<uint64_t> pending_aborts_;
  Sequence* long_prefill_ = nullptr;  // the long sequence now prefilling, if any
  bool long_turn_ = false;            // alternation for the long queue
  int64_t budget_ = 0;
  bool preempted_this_step_ = false;
  uint64_t next_arrival_ = 0, n_preemptions_ = 0;
  StepPlan plan_;
  PrefixHit hit_;  // scratch
};

}  // namespace parallm
