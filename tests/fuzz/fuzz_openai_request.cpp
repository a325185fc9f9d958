// libFuzzer target: request bodies of /v1/chat/completions (first byte odd)
// and /v1/completions (even) through parse_completion_request
// (server/openai_request). Any bytes must give validated parameters or an
// ApiError(400): no crash, no other exception, no stack overflow however deep
// the body nests (hence the long inputs), and what the server does next with
// the kept JSON (templates copy and print it) must work on any accepted body.
// clang-format off
// FUZZ_SOURCES: src/server/openai_request.cpp src/server/structured_output.cpp src/constrain/expr.cpp src/constrain/grammar.cpp src/constrain/matcher.cpp src/constrain/token_mask.cpp src/constrain/regex_parser.cpp src/constrain/ebnf_parser.cpp src/constrain/json_schema.cpp src/constrain/compile_cache.cpp src/sampling/sampling_params.cpp src/util/json_parse.cpp src/util/check.cpp src/util/log.cpp
// FUZZ_MAX_LEN: 300000
// clang-format on
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "server/api_error.h"
#include "server/openai_request.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const bool chat = (data[0] & 1) != 0;
  const std::string body(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    const parallm::CompletionParams p = parallm::parse_completion_request(body, chat);
    if (chat != p.chat) std::abort();
    if (chat && !p.messages.is_array()) std::abort();
    if (!chat && p.prompts.empty()) std::abort();
    if (p.n < 1 || p.n > parallm::kMaxChoicesPerRequest) std::abort();
    if (p.prompt_logprobs < -1 || p.prompt_logprobs > parallm::kMaxLogprobs) std::abort();
    if (p.prompt_logprobs >= 0 && p.stream) std::abort();  // vLLM's rule: never with a stream
    const auto replace = nlohmann::ordered_json::error_handler_t::replace;
    const nlohmann::ordered_json kept = {{"m", p.messages}, {"t", p.tools}, {"k", p.chat_template_kwargs}};
    (void)kept.dump(2, ' ', false, replace);
  } catch (const parallm::ApiError& e) {
    if (e.status() != 400) std::abort();
  }
  return 0;
}
