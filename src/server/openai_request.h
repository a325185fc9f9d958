// Parsing and validating the JSON bodies of /v1/completions and
// /v1/chat/completions into one plain struct. Every problem (malformed JSON,
// invalid UTF-8, wrong types, out-of-range values, unsupported options) is an
// ApiError(400) naming the field.
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sampling/sampler.h"

namespace parallm {

struct CompletionParams {
  bool chat = false;
  std::string model;
  std::string prompt_text;           // completions: a string prompt
  std::vector<int32_t> prompt_tokens;  // completions: an array of token ids
  bool prompt_is_tokens = false;
  nlohmann::json messages;           // chat
  std::optional<int64_t> max_tokens;  // max_tokens / max_completion_tokens
  SamplingParams sampling;           // seed is random when the request has none
  std::vector<std::string> stop;
  bool stream = false, include_usage = false, ignore_eos = false, echo = false;
  int priority = 0;
  std::string user;
};

// body: the raw request body. Throws ApiError(400).
CompletionParams parse_completion_request(const std::string& body, bool chat);

}  // namespace parallm
