// The serving engine's API types: what a request is, the events it gets
// back, the engine's counters. Plain data with no compute headers, so that
// the HTTP server (src/server) sees the engine through this and
// CompletionBackend alone.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "sampling/logprobs.h"
#include "sampling/sampler.h"

namespace parallm {

struct ServingOptions {
  int64_t max_num_seqs = 256;             // --max-num-seqs
  int64_t max_num_batched_tokens = 2048;  // --max-num-batched-tokens (chunked prefill budget per step)
  int64_t max_model_len = 0;              // --max-model-len (0 = engine context)
  int64_t max_queue = 1024;               // --max-queue: waiting requests before submit() refuses
  int64_t long_prompt_threshold = 0;      // --long-prompt-threshold (0 = max_num_batched_tokens)
  bool enable_prefix_caching = true;
};

struct ServingRequest {
  std::vector<int32_t> prompt;  // token ids (BOS included as the tokenizer adds it)
  int64_t max_tokens = 16;      // new tokens at most
  SamplingParams sampling;
  bool ignore_eos = false;
  int priority = 0;       // lower runs first among waiting requests; FCFS within a priority
  int32_t logprobs = -1;  // -1: none; k >= 0: each token's logprob and the k most likely
  // -1: none; k >= 0: every prompt token's logprob and rank and the k most
  // likely tokens at its position (echo with logprobs; vLLM's prompt_logprobs).
  int32_t prompt_logprobs = -1;
  std::vector<int32_t> stop_token_ids;  // more tokens that end generation (finish "stop"), ignore_eos or not
  // An embedding instead of a generation: the prompt is prefilled (no
  // prefix-cache hits, no logits, nothing sampled; max_tokens, sampling and
  // logprobs are ignored) and its final event carries `embedding`.
  bool embed = false;
};

// One event per generated token, and a final one.
struct TokenEvent {
  int32_t token = -1;  // the new token (-1 on a final event that adds none)
  bool finished = false;
  std::string finish_reason;  // "stop" | "length" | "abort" | "error" when finished
  std::string error;          // message when finish_reason == "error"
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;  // so far, including this token
  int64_t step_tokens = 0;        // tokens the step that made this event gave all its sequences
  // On the event that carries a request's first token (0 on all others):
  // queue_s from submit() to the step that first scheduled it, prefill_s from
  // there to the end of the step that sampled its first token. A preempted
  // request that is recomputed keeps its first scheduling.
  double queue_s = 0;
  double prefill_s = 0;
  // With ServingRequest::logprobs >= 0, on events with a token: its logprob
  // under the model's raw distribution and the `logprobs` most likely tokens.
  float logprob = 0.0f;
  std::vector<TokenLogprob> top_logprobs;
  // With ServingRequest::prompt_logprobs, on the request's first event: one
  // entry per prompt token, the first without a logprob.
  std::vector<TokenLogprobs> prompt_logprobs;
  // With ServingRequest::embed, on the final event ("stop"): the mean over the
  // prompt's positions of the last hidden state after the final norm (the
  // rows the output matrix would read), L2-normalised. [n_embd]
  std::vector<float> embedding;
};

struct ServingMetrics {
  int64_t num_requests_running = 0;
  int64_t num_requests_waiting = 0;
  double kv_cache_usage = 0;                // fraction of blocks in use [0, 1]
  double prefix_cache_hit_rate = 0;         // hit tokens / queried tokens
  uint64_t prefix_cache_queries_total = 0;  // prompt tokens looked up in the prefix cache at admission
  uint64_t prefix_cache_hits_total = 0;     // of which found there
  uint64_t num_preemptions_total = 0;
  uint64_t prompt_tokens_total = 0;
  uint64_t generation_tokens_total = 0;
  int64_t kv_blocks_total = 0, kv_blocks_free = 0;
};

enum class SubmitStatus { kOk, kQueueFull, kTooLong };

}  // namespace parallm
