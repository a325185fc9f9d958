// The scheduler's output for one step and the executor's answer (STYLE.md
// principle 2): plain data, no tensors. The executor turns a StepPlan into one
// ForwardBatch (each sequence's tokens contiguous), samples one token for each
// entry with wants_logits, and hands those back to Scheduler::update().
#pragma once
#include <cstdint>
#include <vector>

namespace parallm {

enum class FinishReason { kNone, kStop, kLength, kAbort };

const char* finish_reason_name(FinishReason r);  // "", "stop", "length", "abort"

struct ScheduledSeq {
  uint64_t id = 0;
  int64_t pos0 = 0;                      // the sequence's n_computed before this step
  int64_t n_new = 0;                     // tokens computed this step: positions pos0..pos0+n_new-1
  const int32_t* tokens = nullptr;       // [n_new] their ids (valid until update())
  const int32_t* block_table = nullptr;  // [n_blocks] valid until the next schedule()
  int64_t n_blocks = 0;
  bool wants_logits = false;      // computed catches up with all tokens: sample the next one
  bool prompt_logits = false;     // the request wants logits at its prompt positions too
  bool prefill_only = false;      // the request wants its prompt's hidden states only (embeddings): no logits
  bool completes_prompt = false;  // prefill_only: this chunk ends the prompt; update() finishes the sequence
};

struct StepPlan {
  std::vector<ScheduledSeq> seqs;   // in batch order
  std::vector<uint64_t> preempted;  // lost their blocks this step; they recompute later
  std::vector<uint64_t> aborted;    // removed at this step boundary (abort())
  int64_t n_tokens = 0;             // sum of n_new
  void clear() {
    seqs.clear();
    preempted.clear();
    aborted.clear();
    n_tokens = 0;
  }
};

// What update() reports for each sequence that sampled a token this step, and
// for each prefill-only sequence whose prompt is now computed (token -1,
// finish kStop).
struct SeqEvent {
  uint64_t id = 0;
  int32_t token = -1;  // appended token (-1: none, e.g. a stop token)
  FinishReason finish = FinishReason::kNone;
  int64_t n_prompt = 0;
  int64_t n_generated = 0;  // including this token
};

}  // namespace parallm
