// Request preparation (see completion_prepare.h).
#include "server/completion_prepare.h"

#include <algorithm>

#include "server/api_error.h"
#include "server/model_names.h"
#include "tokenizer/tokenizer.h"

namespace parallm {
namespace {

PreparedPrompt prepare_prompt(const CompletionContext& ctx, const CompletionParams& cp, const PromptInput* in) {
  const bool chat = cp.chat;
  const Tokenizer& tok = ctx.backend.tokenizer();
  PreparedPrompt p;
  if (chat) {
    const std::string text =
        ctx.chat.render(cp.messages, /*add_generation_prompt=*/true, cp.tools, cp.chat_template_kwargs);
    p.tokens = tok.encode(text, /*add_special=*/false, /*parse_special=*/true);
  } else if (in->is_tokens) {
    for (int32_t t : in->tokens) {
      if (t >= tok.n_vocab())
        throw bad_request("token id " + std::to_string(t) + " is outside the vocabulary", "prompt");
    }
    p.tokens = in->tokens;
    if (cp.echo) p.echo_text = tok.decode(p.tokens);
  } else {
    p.tokens = tok.encode(in->text, /*add_special=*/true, /*parse_special=*/true);
    if (cp.echo) p.echo_text = in->text;
  }
  if (p.tokens.empty()) throw bad_request("the prompt is empty", chat ? "messages" : "prompt");
  const int64_t max_len = ctx.backend.max_model_len();
  const int64_t n_prompt = static_cast<int64_t>(p.tokens.size());
  const int64_t max_in = ctx.options.max_input_tokens > 0 ? std::min(ctx.options.max_input_tokens, max_len) : max_len;
  if (n_prompt > max_in || n_prompt >= max_len) {
    throw ApiError(400,
                   "the prompt has " + std::to_string(n_prompt) + " tokens; this server accepts at most " +
                       std::to_string(std::min(max_in, max_len - 1)) + " input tokens",
                   "invalid_request_error", chat ? "messages" : "prompt", "context_length_exceeded");
  }
  const int64_t room = max_len - n_prompt;
  const int64_t max_out = ctx.options.max_output_tokens > 0 ? ctx.options.max_output_tokens : max_len;
  if (cp.max_tokens) {
    if (*cp.max_tokens > max_out) {
      throw bad_request("'max_tokens' is " + std::to_string(*cp.max_tokens) + "; this server allows at most " +
                            std::to_string(max_out),
                        "max_tokens");
    }
    if (*cp.max_tokens > room) {
      throw ApiError(400,
                     "the prompt (" + std::to_string(n_prompt) + " tokens) plus 'max_tokens' (" +
                         std::to_string(*cp.max_tokens) + ") exceeds the maximum model length of " +
                         std::to_string(max_len) + " tokens",
                     "invalid_request_error", "max_tokens", "context_length_exceeded");
    }
    p.max_tokens = *cp.max_tokens;
  } else {
    p.max_tokens = std::min({chat ? room : int64_t{16}, room, max_out});
  }
  return p;
}

}  // namespace

Prepared prepare(const CompletionContext& ctx, const std::string& body, bool chat) {
  Prepared p;
  p.params = parse_completion_request(body, chat, request_json_limits(ctx.options));
  const CompletionParams& cp = p.params;
  if (!cp.model.empty() && !serves_model(ctx.options, cp.model)) {
    throw ApiError(
        404, "model '" + cp.model + "' does not exist; this server serves '" + ctx.options.served_model_name + "'",
        "invalid_request_error", "model", "model_not_found");
  }
  const int32_t n_vocab = ctx.backend.tokenizer().n_vocab();
  for (int32_t id : cp.stop_token_ids) {
    if (id >= n_vocab) {
      throw bad_request("'stop_token_ids' holds " + std::to_string(id) + ", outside the vocabulary (" +
                            std::to_string(n_vocab) + " tokens)",
                        "stop_token_ids");
    }
  }
  for (const auto& [id, bias] : cp.sampling.logit_bias) {
    if (id >= n_vocab) {
      throw bad_request("'logit_bias' token id " + std::to_string(id) + " is outside the vocabulary (" +
                            std::to_string(n_vocab) + " tokens)",
                        "logit_bias");
    }
  }
  if (chat) {
    p.prompts.push_back(prepare_prompt(ctx, cp, nullptr));
  } else {
    for (const PromptInput& in : cp.prompts) p.prompts.push_back(prepare_prompt(ctx, cp, &in));
  }
  return p;
}

}  // namespace parallm
