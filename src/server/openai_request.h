// Parsing and validating the JSON bodies of /v1/completions and
// /v1/chat/completions into one plain struct. Every problem (malformed JSON,
// invalid UTF-8, nesting past the depth limit, wrong types, out-of-range
// values, unsupported options) is an ApiError(400) naming the field.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "sampling/sampler.h"
#include "util/json_parse.h"

namespace parallm {

// One prompt of /v1/completions: text, or token ids.
struct PromptInput {
  bool is_tokens = false;
  std::string text;
  std::vector<int32_t> tokens;
};

// Most choices one request may ask for (prompts x n): each is a sequence in
// the scheduler, and one request should not fill it alone.
constexpr int64_t kMaxChoicesPerRequest = 128;
// Most alternatives per token in `logprobs` / `top_logprobs` (vLLM's default cap).
constexpr int64_t kMaxLogprobs = 20;

struct CompletionParams {
  bool chat = false;
  std::string model;
  // completions: a string, an array of strings, an array of token ids, or an
  // array of such arrays (a batch: one choice per prompt and n).
  std::vector<PromptInput> prompts;
  // chat: as the request wrote them (key order kept: templates print them)
  nlohmann::ordered_json messages;
  nlohmann::ordered_json tools;                 // chat: null, or the function tools (not with tool_choice "none")
  nlohmann::ordered_json chat_template_kwargs;  // chat: null, or extra template variables (vLLM's)
  // tool_choice naming a function (its name) or "required": the output is
  // constrained (sampling.constraint) and rendered as tool calls.
  std::string forced_tool;
  bool tool_required = false;
  int64_t n = 1;  // choices per prompt
  // -1: no logprobs. Completions: `logprobs` (alternatives per token, 0-20).
  // Chat: `top_logprobs` (0-20) when `logprobs` is true.
  int32_t logprobs = -1;
  // vLLM's prompt_logprobs: -1 none; k (0-20): each prompt token's logprob,
  // rank and its position's k most likely tokens (not with stream).
  int32_t prompt_logprobs = -1;
  std::optional<int64_t> max_tokens;  // max_tokens / max_completion_tokens
  SamplingParams sampling;            // seed is random when the request has none
  std::vector<std::string> stop;
  std::vector<int32_t> stop_token_ids;  // vLLM's: more tokens that end generation
  bool include_stop_str_in_output = false, skip_special_tokens = true;
  bool stream = false, include_usage = false, ignore_eos = false, echo = false;
  int priority = 0;
  std::string user;
};

// body: the raw request body, parsed once within `limits` (a body nested
// deeper is a 400 naming the limit). Throws ApiError(400).
CompletionParams parse_completion_request(const std::string& body, bool chat,
                                          const JsonLimits& limits = JsonLimits{kRequestJsonDepth});

}  // namespace parallm
