// Answer shapes (see completion_render.h).
#include "server/completion_render.h"

#include "server/logprobs_json.h"

namespace parallm {

using nlohmann::json;

json chunk_base(const std::string& id, int64_t created, const std::string& model, bool chat) {
  return {{"id", id},
          {"object", chat ? "chat.completion.chunk" : "text_completion"},
          {"created", created},
          {"model", model}};
}

json take_logprobs(const Tokenizer& tok, Generation& g, bool chat) {
  if (!g.want_logprobs) return nullptr;
  json out = chat ? chat_logprobs_json(tok, g.logprobs) : completion_logprobs_json(tok, g.logprobs, &g.text_offset);
  g.logprobs.clear();
  return out;
}

json stream_choice(bool chat, size_t index, const std::string& text, json logprobs, const json& finish, bool first) {
  if (chat) {
    json delta = json::object();
    if (first) delta["role"] = "assistant";
    if (!text.empty() || first) delta["content"] = text;
    return {{"index", index}, {"delta", delta}, {"logprobs", std::move(logprobs)}, {"finish_reason", finish}};
  }
  return {{"index", index}, {"text", text}, {"logprobs", std::move(logprobs)}, {"finish_reason", finish}};
}

}  // namespace parallm
