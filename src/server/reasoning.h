// Reasoning models (DeepSeek-R1, Qwen3) think inside <think> ... </think>
// before they answer. With --reasoning-parser (vLLM's option and names) the
// chat answer is split: the thinking goes to `reasoning_content`, the rest to
// `content` (and from there to tool-call parsing).
//   deepseek_r1  the template opens <think> itself, so the answer starts
//                inside it: everything before </think> is reasoning (all of
//                it when </think> never comes); a leading <think> is dropped.
//   qwen3        reasoning only when the answer opens with <think> (leading
//                whitespace aside); without </think> the thinking was cut
//                short: it stays reasoning. Other answers are all content.
#pragma once
#include <string>

namespace parallm {

enum class ReasoningFormat { kNone, kDeepSeekR1, kQwen3 };

// "" -> kNone; "deepseek_r1" | "qwen3"; anything else throws InputError.
ReasoningFormat parse_reasoning_format(const std::string& name);

class ReasoningSplitter {
 public:
  struct Parts {
    std::string reasoning, content;
  };
  explicit ReasoningSplitter(ReasoningFormat format);
  // Text that may be sent now; a tail that could begin a tag is held back.
  Parts push(const std::string& text);
  Parts flush();  // at the end of generation

 private:
  enum class State { kStart, kReasoning, kContent };
  ReasoningFormat format_;
  State state_ = State::kStart;
  std::string pending_;
};

}  // namespace parallm
