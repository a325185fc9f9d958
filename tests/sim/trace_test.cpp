// Trace parsing: the schema of trace.h, and one message naming the line and
// the reason for each kind of bad line.
#include "sim/trace.h"

#include <gtest/gtest.h>

#include "util/check.h"

namespace parallm::sim {
namespace {

std::string error_of(const std::string& text) {
  try {
    parse_trace(text, "t.jsonl");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(Trace, ParsesSortsAndSkipsBlankLines) {
  const auto r = parse_trace(
      "{\"arrival_s\": 1.5, \"input_tokens\": 10, \"output_tokens\": 3, \"id\": \"b\"}\n"
      "\n"
      "{\"arrival_s\": 0, \"input_tokens\": 7, \"output_tokens\": 1}\r\n"
      "  \n"
      "{\"arrival_s\": 1.5, \"input_tokens\": 11, \"output_tokens\": 2}",
      "t.jsonl");
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0].input_tokens, 7);
  EXPECT_DOUBLE_EQ(r[1].arrival_s, 1.5);
  EXPECT_EQ(r[1].input_tokens, 10);  // ties keep line order
  EXPECT_EQ(r[2].input_tokens, 11);
  EXPECT_EQ(r[2].output_tokens, 2);
}

TEST(Trace, BadLinesNameTheLineAndTheReason) {
  const std::string ok = "{\"arrival_s\": 0, \"input_tokens\": 1, \"output_tokens\": 1}\n";
  struct Case {
    std::string line, expect;
  } cases[] = {
      {"{\"arrival_s\": 0, \"input_tokens\": 1}", "t.jsonl:2: missing \"output_tokens\""},
      {"{\"input_tokens\": 1, \"output_tokens\": 1}", "t.jsonl:2: missing \"arrival_s\""},
      {"{\"arrival_s\": -1, \"input_tokens\": 1, \"output_tokens\": 1}", "t.jsonl:2: \"arrival_s\" must be between 0"},
      {"{\"arrival_s\": \"0\", \"input_tokens\": 1, \"output_tokens\": 1}",
       "t.jsonl:2: \"arrival_s\" must be a number"},
      {"{\"arrival_s\": 0, \"input_tokens\": 0, \"output_tokens\": 1}",
       "t.jsonl:2: \"input_tokens\" must be between 1"},
      {"{\"arrival_s\": 0, \"input_tokens\": 2.5, \"output_tokens\": 1}",
       "t.jsonl:2: \"input_tokens\" must be an integer"},
      {"{\"arrival_s\": 0, \"input_tokens\": 1, \"output_tokens\": 1e12}",
       "t.jsonl:2: \"output_tokens\" must be an integer"},
      {"{\"arrival_s\": 0, \"input_tokens\": 1, \"output_tokens\": 99999999999}",
       "t.jsonl:2: \"output_tokens\" must be between 1"},
      {"[1, 2]", "t.jsonl:2: expected an object"},
      {"{\"arrival_s\": 0,", "t.jsonl:2: invalid JSON"},
  };
  for (const Case& c : cases) {
    const std::string e = error_of(ok + c.line + "\n" + ok);
    EXPECT_EQ(e.rfind(c.expect, 0), 0u) << c.line << " -> " << e;
  }
  EXPECT_EQ(error_of("\n\n"), "t.jsonl: the trace holds no requests");
  EXPECT_THROW(load_trace("/nonexistent/trace.jsonl"), InputError);
}

}  // namespace
}  // namespace parallm::sim
