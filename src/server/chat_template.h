// Chat prompts: OpenAI `messages` rendered by the model's own Jinja chat
// template (GGUF `tokenizer.chat_template`, tokenizer_config.json), or, for a
// model without one, by kDefaultChatTemplate (documented in docs/server.md):
//
//   <bos>System: ...\nUser: ...\nAssistant: ...\nAssistant:
//
// Message content may be a string, null, or an array of {"type": "text"} parts
// (joined); anything else is a 400.
#pragma once
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "server/jinja/jinja.h"
#include "server/tool_calls.h"

namespace parallm {

class Tokenizer;

extern const char* const kDefaultChatTemplate;

class ChatFormatter {
 public:
  // template_source: nullopt or empty = the default template. Throws InputError
  // when the template does not parse.
  ChatFormatter(const std::optional<std::string>& template_source, std::string bos_token, std::string eos_token);
  // The model's template, or `override_source` when not empty (--chat-template,
  // which must parse: InputError). A model template the interpreter cannot
  // parse gives the default one, with a warning.
  static ChatFormatter for_tokenizer(const Tokenizer& tokenizer, const std::string& override_source = "");

  // Throws ApiError(400) for bad messages or a template that raises.
  // tools: null or the request's function tools (the template's `tools`);
  // kwargs: null or an object of extra template variables
  // (`chat_template_kwargs`, e.g. Qwen3's enable_thinking).
  std::string render(const nlohmann::ordered_json& messages, bool add_generation_prompt,
                     const nlohmann::ordered_json& tools = nullptr,
                     const nlohmann::ordered_json& kwargs = nullptr) const;
  bool uses_default() const { return uses_default_; }
  // How the template asks the model to write tool calls (tool_calls.h):
  // Hermes when it mentions <tool_call> (Qwen2.5, Qwen3, Hermes), Llama JSON
  // when it mentions <|python_tag|> (Llama 3.1 and later), Mistral when it
  // writes [TOOL_CALLS] (Mistral Nemo, Small, Large), else none.
  ToolCallFormat tool_call_format() const { return tool_call_format_; }

 private:
  jinja::CompiledTemplate tpl_;
  std::string bos_, eos_;
  bool uses_default_;
  ToolCallFormat tool_call_format_;
};

}  // namespace parallm
