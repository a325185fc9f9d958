// Single-sequence generation on an Engine: prefill the prompt in chunks, then
// decode token by token with a Sampler until a stop token, -n tokens, or the
// end of the context. Used by `parallm generate` and `parallm bench-model`;
// the server drives the engine through the scheduler instead.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "sampling/sampler.h"

namespace parallm {

struct GenerateParams {
  int64_t max_new_tokens = 128;
  SamplingParams sampling;
  bool ignore_eos = false;
  int64_t prefill_chunk = 512;  // prompt tokens per forward
};

struct GenerateOutput {
  std::vector<int32_t> prompt_ids;
  std::vector<int32_t> token_ids;  // generated, without the stop token
  std::string finish_reason;       // "stop" or "length"
  double prompt_s = 0, decode_s = 0;
  int64_t decode_steps = 0;  // forwards after the prompt
};

// on_token(id) is called for each generated token (not the stop token).
GenerateOutput generate_one(Engine& engine, const std::vector<int32_t>& prompt, const GenerateParams& params,
                            const std::function<void(int32_t)>& on_token = {});

}  // namespace parallm
