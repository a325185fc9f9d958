// A completion request made ready for the backend: the body parsed and
// checked (openai_request.h), the model name, token ids against the
// vocabulary, each prompt rendered (chat template) and tokenized, and its
// lengths checked against the server's limits. Throws ApiError (4xx).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "server/completion_flow.h"
#include "server/openai_request.h"

namespace parallm {

// One prompt, tokenized and checked against the limits.
struct PreparedPrompt {
  std::vector<int32_t> tokens;
  std::string echo_text;
  int64_t max_tokens = 0;
};

struct Prepared {
  CompletionParams params;
  std::vector<PreparedPrompt> prompts;  // chat: one
};

Prepared prepare(const CompletionContext& ctx, const std::string& body, bool chat);

}  // namespace parallm
