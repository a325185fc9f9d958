// vLLM's tokenizer routes, for clients that count tokens with the served
// model's own tokenizer (load testers, context-window budgeting):
//   POST /tokenize    {"prompt": str, "add_special_tokens"?: true}
//                  or {"messages": [...], "add_generation_prompt"?: true, "tools"?, "chat_template_kwargs"?}
//                  -> {"count", "max_model_len", "tokens", "token_strs"}   (token_strs with "return_token_strs": true)
//   POST /detokenize  {"tokens": [ids]} -> {"prompt": str}
// A chat body is rendered with the chat template exactly as
// /v1/chat/completions renders it, so the count is what a request would use.
#pragma once
#include <string>

#include "server/completion_flow.h"

namespace parallm {

// Each returns the response body (JSON). Throw ApiError for bad bodies (400)
// or an unknown model (404).
std::string handle_tokenize(const CompletionContext& ctx, const std::string& body);
std::string handle_detokenize(const CompletionContext& ctx, const std::string& body);

}  // namespace parallm
