// Log-probabilities of tokens for the API's `logprobs` (OpenAI, vLLM): the
// model's own distribution, log softmax of the raw logits, before penalties,
// logit_bias or temperature change them (vLLM's default "raw" logprobs).
#pragma once
#include <cstdint>
#include <vector>

namespace parallm {

struct TokenLogprob {
  int32_t token = -1;
  float logprob = 0.0f;
};

// One position's answer: the token there, its logprob, and the most likely
// alternatives. has_logprob is false for a prompt's first token (nothing
// predicts it; the API writes null).
struct TokenLogprobs {
  int32_t token = -1;
  float logprob = 0.0f;
  std::vector<TokenLogprob> top;
  bool has_logprob = true;
  int32_t rank = 0;  // prompt logprobs: 1 + the tokens strictly more likely (0: not computed)
};

// log(sum_i exp(logits_i)), computed stably; scratch is resized to n and clobbered.
float log_sum_exp(const float* logits, int32_t n, std::vector<float>* scratch);

// The k most likely tokens (k <= n), most likely first, lowest id first on
// ties, with logprob = logit - lse. One pass over the vocabulary: k is small.
void top_logprobs(const float* logits, int32_t n, int32_t k, float lse, std::vector<TokenLogprob>* out);

}  // namespace parallm
