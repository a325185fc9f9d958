// The reasoning splitter (server/reasoning) on answers cut into pieces of
// every size: what goes to reasoning_content and what to content.
#include "server/reasoning.h"

#include <gtest/gtest.h>

#include "util/check.h"

namespace parallm {
namespace {

ReasoningSplitter::Parts split(ReasoningFormat f, const std::string& text, size_t step) {
  ReasoningSplitter s(f);
  ReasoningSplitter::Parts all;
  for (size_t i = 0; i < text.size(); i += step) {
    auto p = s.push(text.substr(i, step));
    all.reasoning += p.reasoning;
    all.content += p.content;
  }
  auto p = s.flush();
  all.reasoning += p.reasoning;
  all.content += p.content;
  return all;
}

struct Case {
  ReasoningFormat format;
  std::string text, reasoning, content;
};

TEST(ReasoningSplitter, SplitsAtEveryPieceSize) {
  using F = ReasoningFormat;
  const std::vector<Case> cases = {
      {F::kDeepSeekR1, "Hmm, 2+2.\n</think>\n\nIt is 4.", "Hmm, 2+2.\n", "\n\nIt is 4."},
      {F::kDeepSeekR1, "<think>a</think>b", "a", "b"},
      {F::kDeepSeekR1, "still thinking <", "still thinking <", ""},  // no </think>: all reasoning
      {F::kQwen3, "<think>\nWeigh it.\n</think>\n\nYes.", "\nWeigh it.\n", "\n\nYes."},
      {F::kQwen3, " <think>x</think>y", "x", "y"},
      {F::kQwen3, "No thinking here </think> at all.", "", "No thinking here </think> at all."},
      {F::kQwen3, "<thi", "", "<thi"},  // too short to be the tag
      {F::kQwen3, "<think>cut short", "cut short", ""},
      {F::kNone, "<think>a</think>b", "", "<think>a</think>b"},
  };
  for (const Case& c : cases) {
    for (size_t step = 1; step <= c.text.size(); ++step) {
      const auto p = split(c.format, c.text, step);
      EXPECT_EQ(p.reasoning, c.reasoning) << c.text << " step " << step;
      EXPECT_EQ(p.content, c.content) << c.text << " step " << step;
    }
  }
}

TEST(ReasoningSplitter, ParserNames) {
  EXPECT_EQ(parse_reasoning_format(""), ReasoningFormat::kNone);
  EXPECT_EQ(parse_reasoning_format("deepseek_r1"), ReasoningFormat::kDeepSeekR1);
  EXPECT_EQ(parse_reasoning_format("qwen3"), ReasoningFormat::kQwen3);
  EXPECT_THROW(parse_reasoning_format("granite"), InputError);
}

}  // namespace
}  // namespace parallm
