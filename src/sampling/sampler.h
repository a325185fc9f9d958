// Turning logits into the next token. Order (as vLLM applies them):
//   1. penalties: repetition (CTRL-style, over prompt + output), presence and
//      frequency (over output only, OpenAI semantics), then logit_bias, then
//      min_tokens (stop tokens at -inf until enough tokens were generated),
//      then JSON mode (tokens that would break the JSON object at -inf),
//      then a structured-output constraint (src/constrain: tokens the
//      grammar rejects at -inf)
//   2. temperature 0 -> greedy argmax (lowest id wins ties)
//   3. logits / temperature, softmax
//   4. top-k, top-p (nucleus), min-p (relative to the top probability)
//   5. draw from the renormalized distribution with a seeded generator:
//      the same seed and inputs give the same tokens.
#pragma once
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "constrain/token_mask.h"
#include "sampling/json_constraint.h"

namespace parallm {

struct SamplingParams {
  float temperature = 1.0f;
  int32_t top_k = 0;                // 0 = off
  float top_p = 1.0f;               // 1 = off
  float min_p = 0.0f;               // 0 = off
  float repetition_penalty = 1.0f;  // 1 = off
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  uint64_t seed = 0;
  // OpenAI's logit_bias: added to a token's logit (-100 bans it in practice,
  // +100 all but forces it). Ids are checked against the vocabulary by whoever
  // knows it (the server); the sampler skips ids outside it.
  std::vector<std::pair<int32_t, float>> logit_bias;
  // vLLM's min_tokens: the ids given to Sampler::ban_until_min_tokens (the
  // stop tokens) cannot be drawn before this many tokens were generated.
  int32_t min_tokens = 0;
  // JSON mode (response_format json_object): only tokens that keep the output
  // a valid prefix of a JSON object (json_constraint.h); needs constrain_json().
  bool json_object = false;
  // Structured outputs (json_schema, guided_*, tool_choice): the compiled
  // constraint the output must match; needs Sampler::constrain().
  std::shared_ptr<const constrain::CompiledConstraint> constraint;

  // Throws InputError naming the field when a value is out of range.
  void validate() const;
  bool greedy() const { return temperature <= 0.0f; }
};

class Sampler {
 public:
  explicit Sampler(const SamplingParams& params);

  // Tokens already in the context: prompt tokens (repetition penalty only) and
  // generated ones (all penalties).
  void add_prompt_token(int32_t id);
  void add_output_token(int32_t id);
  // The ids that min_tokens keeps out (stop tokens); ignored when min_tokens is 0.
  void ban_until_min_tokens(std::vector<int32_t> ids) { min_tokens_ban_ = std::move(ids); }
  // JSON mode: each token's bytes (empty: never allowed, e.g. control tokens)
  // and the tokens that end generation (allowed once the object is closed).
  // `pieces` must outlive the sampler.
  void constrain_json(const std::vector<std::string>* pieces, std::vector<int32_t> end_ids);

  // Structured outputs: the vocabulary as bytes (must outlive the sampler),
  // the tokens that end generation, and max_tokens (so that the structure
  // closes within it). No-op without SamplingParams::constraint.
  void constrain(const constrain::VocabIndex* vocab, std::vector<int32_t> end_ids, int64_t max_tokens);

  // With a constraint: the output so far is a complete match.
  bool constraint_matched() const { return constraint_ && constraint_->matched(); }

  // logits [n_vocab] is modified in place.
  int32_t sample(float* logits, int32_t n_vocab);

 private:
  SamplingParams p_;
  std::mt19937_64 rng_;
  std::unordered_map<int32_t, int32_t> prompt_counts_, output_counts_;
  int64_t n_output_ = 0;
  std::vector<int32_t> min_tokens_ban_;
  const std::vector<std::string>* json_pieces_ = nullptr;
  std::vector<int32_t> json_end_ids_;
  JsonPrefix json_;
  std::unique_ptr<constrain::TokenConstraint> constraint_;
  std::vector<std::pair<float, int32_t>> candidates_;  // scratch
  std::vector<double> chunk_sums_;                     // scratch
};

// Index of the largest value (lowest index on ties).
int32_t argmax(const float* x, int32_t n);

}  // namespace parallm
