#include "server/tokenize_api.h"

#include "server/api_error.h"
#include "server/model_names.h"
#include "server/openai_request.h"
#include "tokenizer/tokenizer.h"
#include "util/json_parse.h"

namespace parallm {
namespace {

using nlohmann::json;

json parse_body(const std::string& body, const JsonLimits& limits) {
  JsonError error;
  std::optional<json> j = try_parse_json<json>(body, limits, &error);
  if (!j) {
    if (error.too_deep || error.too_wide) throw bad_request("request body: " + error.message);
    throw bad_request("request body is not valid JSON at byte " + std::to_string(error.byte) + ": " + error.detail);
  }
  if (!j->is_object()) throw bad_request("request body must be a JSON object");
  return std::move(*j);
}

void check_model(const CompletionContext& ctx, const json& j) {
  if (!j.contains("model") || j["model"].is_null()) return;
  if (!j["model"].is_string()) throw bad_request("'model' must be a string", "model");
  if (!serves_model(ctx.options, j["model"].get<std::string>())) {
    throw ApiError(404,
                   "model '" + j["model"].get<std::string>() + "' does not exist; this server serves '" +
                       ctx.options.served_model_name + "'",
                   "invalid_request_error", "model", "model_not_found");
  }
}

bool flag(const json& j, const char* key, bool dflt) {
  if (!j.contains(key) || j[key].is_null()) return dflt;
  if (!j[key].is_boolean()) throw bad_request(std::string("'") + key + "' must be a boolean", key);
  return j[key].get<bool>();
}

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

}  // namespace

std::string handle_tokenize(const CompletionContext& ctx, const std::string& body) {
  const json j = parse_body(body, request_json_limits(ctx.options));
  check_model(ctx, j);
  const Tokenizer& tok = ctx.backend.tokenizer();
  std::vector<int32_t> ids;
  if (j.contains("messages")) {
    const CompletionParams p =
        parse_completion_request(body, /*chat=*/true, request_json_limits(ctx.options));  // messages, tools, kwargs
    const std::string text =
        ctx.chat.render(p.messages, flag(j, "add_generation_prompt", true), p.tools, p.chat_template_kwargs);
    ids = tok.encode(text, flag(j, "add_special_tokens", false), /*parse_special=*/true);
  } else {
    if (!j.contains("prompt") || !j["prompt"].is_string()) {
      throw bad_request("'prompt' (a string) or 'messages' is required", "prompt");
    }
    ids = tok.encode(j["prompt"].get<std::string>(), flag(j, "add_special_tokens", true), /*parse_special=*/true);
  }
  json strs = nullptr;
  if (flag(j, "return_token_strs", false)) {
    strs = json::array();
    for (int32_t id : ids) strs.push_back(tok.token_to_piece(id));
  }
  return dump(
      {{"count", ids.size()}, {"max_model_len", ctx.backend.max_model_len()}, {"tokens", ids}, {"token_strs", strs}});
}

std::string handle_detokenize(const CompletionContext& ctx, const std::string& body) {
  const json j = parse_body(body, request_json_limits(ctx.options));
  check_model(ctx, j);
  if (!j.contains("tokens") || !j["tokens"].is_array())
    throw bad_request("'tokens' (an array of token ids) is required", "tokens");
  const Tokenizer& tok = ctx.backend.tokenizer();
  std::vector<int32_t> ids;
  for (const json& t : j["tokens"]) {
    if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= tok.n_vocab()) {
      throw bad_request("'tokens' must hold token ids in [0, " + std::to_string(tok.n_vocab()) + ")", "tokens");
    }
    ids.push_back(static_cast<int32_t>(t.get<int64_t>()));
  }
  return dump({{"prompt", tok.decode(ids)}});
}

}  // namespace parallm
