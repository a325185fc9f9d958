// Tool calls in a chat answer, for templates that ask the model to write them
// Hermes style (Qwen2.5, Qwen3, NousResearch Hermes):
//
//   optional text<tool_call>
//   {"name": "get_weather", "arguments": {"city": "Paris"}}
//   </tool_call><tool_call>...</tool_call>
//
// ToolCallSplitter lets the text before the first <tool_call> stream as
// content and keeps the rest; parse_hermes_tool_calls turns the kept part
// into OpenAI `tool_calls` when every block is a JSON object with a string
// "name" and object (or string) "arguments". Anything else stays content, as
// vLLM's hermes parser leaves text it cannot parse.
#pragma once
#include <nlohmann/json.hpp>

#include <optional>
#include <string>

namespace parallm {

class ToolCallSplitter {
 public:
  // Returns the content that may be sent now; text from "<tool_call>" on is
  // kept (and a tail that could begin it is held back until it cannot).
  std::string push(const std::string& text);
  // At the end: the held-back tail that never became "<tool_call>".
  std::string flush();
  bool started() const { return started_; }
  const std::string& kept() const { return kept_; }

 private:
  std::string pending_, kept_;
  bool started_ = false;
};

// kept: text starting at "<tool_call>". The OpenAI tool_calls array
// ([{"id", "type": "function", "function": {"name", "arguments": "<json>"}}]),
// or nullopt when it is not a well-formed sequence of calls.
std::optional<nlohmann::json> parse_hermes_tool_calls(const std::string& kept);

}  // namespace parallm
