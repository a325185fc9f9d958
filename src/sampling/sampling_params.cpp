// SamplingParams::validate: the ranges every request's sampling fields must
// lie in. Its own file, free of the kernels the sampler runs on, so the
// request parser (and its fuzz target) can link it alone.
#include <string>

#include "sampling/sampler.h"
#include "util/check.h"

namespace parallm {

void SamplingParams::validate() const {
  auto bad = [](const char* field, const char* range) { throw InputError(std::string(field) + " must be " + range); };
  if (!(temperature >= 0.0f) || temperature > 100.0f) bad("temperature", "in [0, 100]");
  if (top_k < 0) bad("top_k", ">= 0 (0 disables it)");
  if (!(top_p > 0.0f && top_p <= 1.0f)) bad("top_p", "in (0, 1]");
  if (!(min_p >= 0.0f && min_p <= 1.0f)) bad("min_p", "in [0, 1]");
  if (!(repetition_penalty > 0.0f) || repetition_penalty > 10.0f) bad("repetition_penalty", "in (0, 10]");
  if (!(presence_penalty >= -2.0f && presence_penalty <= 2.0f)) bad("presence_penalty", "in [-2, 2]");
  if (!(frequency_penalty >= -2.0f && frequency_penalty <= 2.0f)) bad("frequency_penalty", "in [-2, 2]");
  if (min_tokens < 0) bad("min_tokens", ">= 0");
  for (const auto& [id, bias] : logit_bias) {
    if (id < 0) bad("logit_bias token ids", ">= 0");
    if (!(bias >= -100.0f && bias <= 100.0f)) bad("logit_bias values", "in [-100, 100]");
  }
}

}  // namespace parallm
