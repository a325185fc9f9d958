// The JSON shapes of completion answers, shared by the whole JSON response
// and the SSE chunks: chunk headers, stream choices (completions `text` or
// chat `delta`), a choice's pending logprobs.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "server/choice_generation.h"

namespace parallm {

// {"id", "object", "created", "model"} of a chunk.
nlohmann::json chunk_base(const std::string& id, int64_t created, const std::string& model, bool chat);
// The logprobs of the tokens a choice has not reported yet (null without logprobs).
nlohmann::json take_logprobs(const Tokenizer& tok, Generation& g, bool chat);
// One choice of a chunk: chat {"delta": {role on the first, content}}, completions {"text"}.
nlohmann::json stream_choice(bool chat, size_t index, const std::string& text, nlohmann::json logprobs,
                             const nlohmann::json& finish, bool first);

}  // namespace parallm
