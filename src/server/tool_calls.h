// Tool calls in a chat answer, in the two formats chat templates ask for:
//
//   Hermes (Qwen2.5, Qwen3, NousResearch Hermes; vLLM's `hermes` parser):
//     optional text<tool_call>
//     {"name": "get_weather", "arguments": {"city": "Paris"}}
//     </tool_call><tool_call>...</tool_call>
//   Llama 3.1+ JSON (vLLM's `llama3_json` parser): the whole answer is
//     [<|python_tag|>]{"name": "get_weather", "parameters": {"city": "Paris"}}
//     with further calls after a ';'.
//   Mistral (templates that write [TOOL_CALLS]; vLLM's `mistral` parser):
//     [TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris"}}, ...]
//     or, from v11 tokenizers, [TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}
//     per call. [TOOL_CALLS] is a control token, so the text may lack it:
//     then an answer that opens with '[' is taken as the call list. Call
//     ids are 9 alphanumerics, the only ids Mistral templates accept back.
//
// ToolCallSplitter lets content stream until a call begins (Hermes: the
// first <tool_call>; Llama: an answer whose first non-space character is '{';
// Mistral: the first [TOOL_CALLS], or an answer that opens with '[')
// and keeps the rest; parse_tool_calls turns the kept part into OpenAI
// `tool_calls` when every call is a JSON object with a string "name" and
// object (or string) arguments. Anything else stays content, as vLLM's
// parsers leave text they cannot parse.
#pragma once
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace parallm {

enum class ToolCallFormat { kNone, kHermes, kLlamaJson, kMistral };

class ToolCallSplitter {
 public:
  explicit ToolCallSplitter(ToolCallFormat format = ToolCallFormat::kHermes) : format_(format) {}
  // Returns the content that may be sent now; text from "<tool_call>" on is
  // kept (and a tail that could begin it is held back until it cannot).
  std::string push(const std::string& text);
  // At the end: the held-back tail that never became "<tool_call>".
  std::string flush();
  bool started() const { return started_; }
  const std::string& kept() const { return kept_; }

 private:
  std::string push_llama(const std::string& text);
  std::string push_tagged(const std::string& text, const std::string& tag);

  ToolCallFormat format_;
  std::string pending_, kept_;
  bool started_ = false;
  bool plain_ = false;  // Llama / Mistral: the answer began as text (Mistral: a tag may still come)
};

// kept: what the splitter kept. The OpenAI tool_calls array
// ([{"id", "type": "function", "function": {"name", "arguments": "<json>"}}]),
// or nullopt when it is not a well-formed sequence of calls.
std::optional<nlohmann::json> parse_tool_calls(ToolCallFormat format, const std::string& kept);
// tool_choice naming a function or "required" (structured_output.h): the
// constrained text as OpenAI tool_calls. Named: the text is the function's
// arguments; required (function empty): a JSON array of {"name",
// "parameters"}. nullopt when the text is not that (max_tokens cut it).
std::optional<nlohmann::json> forced_tool_calls(const std::string& text, const std::string& function);

inline std::optional<nlohmann::json> parse_hermes_tool_calls(const std::string& kept) {
  return parse_tool_calls(ToolCallFormat::kHermes, kept);
}

}  // namespace parallm
