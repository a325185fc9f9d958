// Tool calls (Hermes, Llama JSON, Mistral): the streaming splitter and the
// parsers, on answers split at every byte and on malformed ones.
#include "server/tool_calls.h"

#include <gtest/gtest.h>

#include <cctype>

namespace parallm {
namespace {

using nlohmann::json;

// Feeds `text` one piece of `step` bytes at a time; returns the streamed content.
std::string split(const std::string& text, size_t step, ToolCallSplitter* s) {
  std::string out;
  for (size_t i = 0; i < text.size(); i += step) out += s->push(text.substr(i, step));
  return out + s->flush();
}

TEST(ToolCallSplitter, ContentStreamsUntilTheTagAtAnySplit) {
  const std::string text = "I will check. <tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>";
  for (size_t step = 1; step <= text.size(); ++step) {
    ToolCallSplitter s;
    EXPECT_EQ(split(text, step, &s), "I will check. ") << step;
    EXPECT_TRUE(s.started());
    EXPECT_EQ(s.kept(), text.substr(text.find("<tool_call>")));
  }
}

TEST(ToolCallSplitter, APrefixThatGoesNowhereIsReleased) {
  for (size_t step : {1u, 2u, 5u}) {
    ToolCallSplitter s;
    EXPECT_EQ(split("a <tool or <tool_cal", step, &s), "a <tool or <tool_cal") << step;
    EXPECT_FALSE(s.started());
  }
}

TEST(ToolCallSplitter, LlamaAnswerIsACallWhenItOpensWithABrace) {
  const std::string call = "  \n{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}";
  const std::string tagged = "<|python_tag|>{\"name\": \"f\", \"parameters\": {}}";
  const std::string text = "Paris is sunny {mostly}.";
  for (size_t step = 1; step <= 8; ++step) {
    ToolCallSplitter a(ToolCallFormat::kLlamaJson);
    EXPECT_EQ(split(call, step, &a), "") << step;
    EXPECT_TRUE(a.started());
    EXPECT_EQ(a.kept(), call);
    ToolCallSplitter b(ToolCallFormat::kLlamaJson);
    EXPECT_EQ(split(tagged, step, &b), "") << step;
    EXPECT_EQ(b.kept(), tagged);
    ToolCallSplitter c(ToolCallFormat::kLlamaJson);
    EXPECT_EQ(split(text, step, &c), text) << step;
    EXPECT_FALSE(c.started());
    ToolCallSplitter d(ToolCallFormat::kLlamaJson);
    EXPECT_EQ(split("<|pyt", step, &d), "<|pyt") << step;  // a tag that never completes is text
  }
}

TEST(LlamaToolCalls, ParsesParametersAndSeveralCalls) {
  auto calls = parse_tool_calls(ToolCallFormat::kLlamaJson,
                                " {\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}\n");
  ASSERT_TRUE(calls.has_value());
  ASSERT_EQ(calls->size(), 1u);
  EXPECT_EQ((*calls)[0]["function"]["name"], "get_weather");
  EXPECT_EQ((*calls)[0]["function"]["arguments"], "{\"city\":\"Paris\"}");
  calls = parse_tool_calls(
      ToolCallFormat::kLlamaJson,
      "<|python_tag|>{\"name\": \"a\", \"parameters\": {}}; {\"name\": \"b\", \"arguments\": {\"x\": 1}}");
  ASSERT_TRUE(calls.has_value());
  ASSERT_EQ(calls->size(), 2u);
  EXPECT_EQ((*calls)[1]["function"]["name"], "b");
  EXPECT_EQ((*calls)[1]["function"]["arguments"], "{\"x\":1}");
  for (const char* bad : {"{\"parameters\": {}}", "{not json}", "{\"name\": \"a\"}; oops", "[]", ""}) {
    EXPECT_FALSE(parse_tool_calls(ToolCallFormat::kLlamaJson, bad).has_value()) << bad;
  }
  EXPECT_FALSE(parse_tool_calls(ToolCallFormat::kNone, "{\"name\": \"a\"}").has_value());
}

TEST(HermesToolCalls, ParsesOneOrSeveralCalls) {
  auto calls = parse_hermes_tool_calls(
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": [1, 2]}}\n</tool_call>\n"
      "<tool_call>{\"name\": \"now\", \"arguments\": \"{\\\"tz\\\": \\\"UTC\\\"}\"}</tool_call>");
  ASSERT_TRUE(calls.has_value());
  ASSERT_EQ(calls->size(), 2u);
  EXPECT_EQ((*calls)[0]["type"], "function");
  EXPECT_EQ((*calls)[0]["function"]["name"], "get_weather");
  // Arguments are a JSON string, keys in the model's order.
  EXPECT_EQ((*calls)[0]["function"]["arguments"], "{\"city\":\"Paris\",\"days\":[1,2]}");
  EXPECT_EQ((*calls)[1]["function"]["name"], "now");
  EXPECT_EQ((*calls)[1]["function"]["arguments"], "{\"tz\": \"UTC\"}");
  EXPECT_NE((*calls)[0]["id"], (*calls)[1]["id"]);
  // No arguments: "{}"; a missing close tag at the end (stopped on it) is accepted.
  calls = parse_hermes_tool_calls("<tool_call>{\"name\": \"ping\"}");
  ASSERT_TRUE(calls.has_value());
  EXPECT_EQ((*calls)[0]["function"]["arguments"], "{}");
}

TEST(HermesToolCalls, MalformedAnswersAreNotCalls) {
  for (const char* bad :
       {"<tool_call>not json</tool_call>", "<tool_call>{\"arguments\": {}}</tool_call>",
        "<tool_call>{\"name\": 3}</tool_call>", "<tool_call>{\"name\": \"f\", \"arguments\": 5}</tool_call>",
        "<tool_call>{\"name\": \"f\"}</tool_call> and some text", "<tool_call>[1, 2]</tool_call>",
        "<tool_call></tool_call>", ""}) {
    EXPECT_FALSE(parse_hermes_tool_calls(bad).has_value()) << bad;
  }
}

TEST(ToolCallSplitter, MistralAnswerIsACallAtTheTagOrAnOpeningBracket) {
  const std::string tagged = "[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {}}]";
  const std::string bare = " \n[{\"name\": \"f\", \"arguments\": {}}]";  // the control token not written
  const std::string later = "Let me look. [TOOL_CALLS][{\"name\": \"f\", \"arguments\": {}}]";
  const std::string text = "Sunny (mostly) [sic] today.";
  for (size_t step = 1; step <= 8; ++step) {
    ToolCallSplitter a(ToolCallFormat::kMistral);
    EXPECT_EQ(split(tagged, step, &a), "") << step;
    EXPECT_EQ(a.kept(), tagged);
    ToolCallSplitter b(ToolCallFormat::kMistral);
    EXPECT_EQ(split(bare, step, &b), "") << step;
    EXPECT_TRUE(b.started());
    ToolCallSplitter c(ToolCallFormat::kMistral);
    EXPECT_EQ(split(later, step, &c), "Let me look. ") << step;
    EXPECT_EQ(c.kept(), later.substr(later.find("[TOOL_CALLS]")));
    ToolCallSplitter d(ToolCallFormat::kMistral);
    EXPECT_EQ(split(text, step, &d), text) << step;
    EXPECT_FALSE(d.started());
  }
}

bool mistral_id(const json& call) {
  const std::string id = call["id"];
  if (id.size() != 9) return false;
  for (char ch : id) {
    if (!std::isalnum(static_cast<unsigned char>(ch))) return false;
  }
  return true;
}

TEST(MistralToolCalls, ParsesListsV11CallsAndKeepsNineCharacterIds) {
  auto calls = parse_tool_calls(ToolCallFormat::kMistral,
                                "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}, "
                                "{\"name\": \"get_time\", \"arguments\": {}, \"id\": \"abc123XYZ\"}]");
  ASSERT_TRUE(calls.has_value());
  ASSERT_EQ(calls->size(), 2u);
  EXPECT_EQ((*calls)[0]["function"]["name"], "get_weather");
  EXPECT_EQ(json::parse((*calls)[0]["function"]["arguments"].get<std::string>()), json({{"city", "Paris"}}));
  EXPECT_TRUE(mistral_id((*calls)[0]));
  EXPECT_EQ((*calls)[1]["id"], "abc123XYZ");  // the model's own id, which the template will accept back

  auto bare = parse_tool_calls(ToolCallFormat::kMistral, "[{\"name\": \"f\", \"arguments\": {\"x\": 1}}]");
  ASSERT_TRUE(bare.has_value());
  EXPECT_TRUE(mistral_id((*bare)[0]));

  auto v11 = parse_tool_calls(ToolCallFormat::kMistral,
                              "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris\"}[TOOL_CALLS]get_time[ARGS]{}");
  ASSERT_TRUE(v11.has_value());
  ASSERT_EQ(v11->size(), 2u);
  EXPECT_EQ((*v11)[1]["function"]["name"], "get_time");
  EXPECT_EQ(json::parse((*v11)[0]["function"]["arguments"].get<std::string>()), json({{"city", "Paris"}}));

  for (const char* bad : {"[TOOL_CALLS]", "[TOOL_CALLS][]", "[1, 2]", "[{\"arguments\": {}}]", "[TOOL_CALLS]not json",
                          "[TOOL_CALLS]f[ARGS]not json", "[TOOL_CALLS][ARGS]{}", "[see the docs]"}) {
    EXPECT_FALSE(parse_tool_calls(ToolCallFormat::kMistral, bad).has_value()) << bad;
  }
}

}  // namespace
}  // namespace parallm
