// Chat prompts: OpenAI `messages` rendered by the model's own Jinja chat
// template (GGUF `tokenizer.chat_template`, tokenizer_config.json), or, for a
// model without one, by kDefaultChatTemplate (documented in docs/server.md):
//
//   <bos>System: ...\nUser: ...\nAssistant: ...\nAssistant:
//
// Message content may be a string, null, or an array of {"type": "text"} parts
// (joined); anything else is a 400.
#pragma once
#include <nlohmann/json.hpp>

#include <memory>
#include <optional>
#include <string>

#include "server/jinja/jinja.h"

namespace parallm {

class Tokenizer;

extern const char* const kDefaultChatTemplate;

class ChatFormatter {
 public:
  // template_source: nullopt or empty = the default template. Throws InputError
  // when the template does not parse.
  ChatFormatter(const std::optional<std::string>& template_source, std::string bos_token, std::string eos_token);
  static ChatFormatter for_tokenizer(const Tokenizer& tokenizer);

  // Throws ApiError(400) for bad messages or a template that raises.
  std::string render(const nlohmann::json& messages, bool add_generation_prompt) const;
  bool uses_default() const { return uses_default_; }

 private:
  jinja::CompiledTemplate tpl_;
  std::string bos_, eos_;
  bool uses_default_;
};

}  // namespace parallm
