// Chat templates: the real templates in shared/models/vocab/templates rendered
// by our Jinja interpreter must equal what Python's jinja2 (with Hugging Face's
// trim_blocks/lstrip_blocks environment) produced for the same conversations;
// the expected strings below were generated that way. Plus unit cases for the
// interpreter's semantics and its errors.
#include "server/chat_template.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "server/api_error.h"
#include "server/jinja/jinja.h"
#include "server/tool_calls.h"
#include "util/check.h"

namespace parallm {
namespace {

using nlohmann::json;

std::string read_template(const std::string& name) {
  std::ifstream f(std::string(PARALLM_SHARED_DIR) + "/models/vocab/templates/" + name);
  EXPECT_TRUE(f.good()) << name;
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

const json kWithSystem =
    json::parse(R"([{"role":"system","content":"You are terse."},{"role":"user","content":"Hi there!"},
  {"role":"assistant","content":" Hello. "},{"role":"user","content":"Name a color."}])");
const json kNoSystem = json::parse(R"([{"role":"user","content":"Hi there!"},{"role":"assistant","content":" Hello. "},
  {"role":"user","content":"Name a color."}])");

std::string render(const std::string& file, const json& messages, bool add_gen) {
  ChatFormatter f(read_template(file), "<s>", "</s>");
  return f.render(messages, add_gen);
}

TEST(ChatTemplate, Qwen25) {
  const char* f = "Qwen-Qwen2.5-7B-Instruct.jinja";
  EXPECT_EQ(
      render(f, kWithSystem, true),
      "<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\nHi there!<|im_end|>\n<|im_start|>assistant\n"
      " Hello. <|im_end|>\n<|im_start|>user\nName a color.<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(render(f, kNoSystem, false),
            "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n"
            "<|im_start|>user\nHi there!<|im_end|>\n<|im_start|>assistant\n Hello. <|im_end|>\n<|im_start|>user\n"
            "Name a color.<|im_end|>\n");
}

TEST(ChatTemplate, Gemma2) {
  const char* f = "google-gemma-2-2b-it.jinja";
  EXPECT_EQ(render(f, kNoSystem, false),
            "<s><start_of_turn>user\nHi there!<end_of_turn>\n<start_of_turn>model\nHello.<end_of_turn>\n"
            "<start_of_turn>user\nName a color.<end_of_turn>\n");
  EXPECT_EQ(render(f, kNoSystem, true),
            "<s><start_of_turn>user\nHi there!<end_of_turn>\n<start_of_turn>model\nHello.<end_of_turn>\n"
            "<start_of_turn>user\nName a color.<end_of_turn>\n<start_of_turn>model\n");
  try {
    render(f, kWithSystem, true);
    FAIL() << "expected raise_exception";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400);
    EXPECT_STREQ(e.what(), "System role not supported");
  }
}

TEST(ChatTemplate, Llama31) {
  const char* f = "meta-llama-Llama-3.1-8B-Instruct.jinja";
  EXPECT_EQ(
      render(f, kWithSystem, true),
      "<s><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\nToday Date: 26 Jul "
      "2024\n\nYou are terse.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHi there!<|eot_id|>"
      "<|start_header_id|>assistant<|end_header_id|>\n\nHello.<|eot_id|><|start_header_id|>user<|end_header_id|>"
      "\n\nName a color.<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
  EXPECT_EQ(
      render(f, kNoSystem, false),
      "<s><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\nToday Date: 26 Jul "
      "2024\n\n<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHi there!<|eot_id|><|start_header_id|>"
      "assistant<|end_header_id|>\n\nHello.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nName a color."
      "<|eot_id|>");
}

const json kToolContext = json::parse(R"({"messages":[{"role":"user","content":"Weather in Paris?"}],
  "tools":[{"function":{"description":"Get weather","name":"get_weather","parameters":{"properties":{"city":{"type":"string"}},"type":"object"}},"type":"function"}],
  "add_generation_prompt":true,"bos_token":"<s>"})");

TEST(ChatTemplate, Llama31WithTools) {
  jinja::CompiledTemplate t(read_template("meta-llama-Llama-3.1-8B-Instruct.jinja"));
  EXPECT_EQ(
      t.render(kToolContext),
      "<s><|start_header_id|>system<|end_header_id|>\n\nEnvironment: ipython\nCutting Knowledge Date: December "
      "2023\nToday Date: 26 Jul 2024\n\n<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nGiven the following "
      "functions, please respond with a JSON for a function call with its proper arguments that best answers the "
      "given prompt.\n\nRespond in the format {\"name\": function name, \"parameters\": dictionary of argument "
      "name and its value}.Do not use variables.\n\n{\n    \"function\": {\n        \"description\": \"Get "
      "weather\",\n        \"name\": \"get_weather\",\n        \"parameters\": {\n            \"properties\": {\n"
      "                \"city\": {\n                    \"type\": \"string\"\n                }\n            },\n"
      "            \"type\": \"object\"\n        }\n    },\n    \"type\": \"function\"\n}\n\nWeather in Paris?"
      "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
}

TEST(ChatTemplate, QwenWithTools) {
  jinja::CompiledTemplate t(read_template("Qwen-Qwen2.5-7B-Instruct.jinja"));
  EXPECT_EQ(
      t.render(kToolContext),
      "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.\n\n# Tools\n\nYou "
      "may call one or more functions to assist with the user query.\n\nYou are provided with function signatures "
      "within <tools></tools> XML tags:\n<tools>\n{\"function\": {\"description\": \"Get weather\", \"name\": "
      "\"get_weather\", \"parameters\": {\"properties\": {\"city\": {\"type\": \"string\"}}, \"type\": "
      "\"object\"}}, \"type\": \"function\"}\n</tools>\n\nFor each function call, return a json object with "
      "function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": "
      "<function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n<|im_start|>user\nWeather in "
      "Paris?<|im_end|>\n<|im_start|>assistant\n");
}

TEST(ChatTemplate, Phi35) {
  const char* f = "microsoft-Phi-3.5-mini-instruct.jinja";
  EXPECT_EQ(render(f, kWithSystem, true),
            "<|system|>\nYou are terse.<|end|>\n<|user|>\nHi there!<|end|>\n<|assistant|>\n Hello. <|end|>\n<|user|>\n"
            "Name a color.<|end|>\n<|assistant|>\n");
  EXPECT_EQ(render(f, kNoSystem, false),
            "<|user|>\nHi there!<|end|>\n<|assistant|>\n Hello. <|end|>\n<|user|>\nName a color.<|end|>\n</s>");
}

TEST(ChatTemplate, MistralNemo) {
  const char* f = "mistralai-Mistral-Nemo-Instruct-2407.jinja";
  EXPECT_EQ(render(f, kWithSystem, true),
            "<s>[INST]Hi there![/INST] Hello. </s>[INST]You are terse.\n\nName a color.[/INST]");
  EXPECT_EQ(render(f, kNoSystem, false), "<s>[INST]Hi there![/INST] Hello. </s>[INST]Name a color.[/INST]");
  try {
    render(f, json::parse(R"([{"role":"user","content":"a"},{"role":"user","content":"b"}])"), true);
    FAIL() << "expected raise_exception";
  } catch (const ApiError& e) {
    EXPECT_EQ(std::string(e.what()),
              "After the optional system message, conversation roles must alternate user/assistant/user/assistant/...");
  }
}

TEST(ChatTemplate, DefaultTemplate) {
  ChatFormatter f(std::nullopt, "<s>", "</s>");
  EXPECT_TRUE(f.uses_default());
  EXPECT_EQ(f.render(kWithSystem, true),
            "<s>System: You are terse.\nUser: Hi there!\nAssistant:  Hello. \nUser: Name a color.\nAssistant:");
}

TEST(ChatTemplate, ToolCallFormatFollowsTheTemplate) {
  EXPECT_EQ(ChatFormatter(read_template("Qwen-Qwen2.5-7B-Instruct.jinja"), "", "").tool_call_format(),
            ToolCallFormat::kHermes);
  EXPECT_EQ(ChatFormatter(read_template("meta-llama-Llama-3.1-8B-Instruct.jinja"), "", "").tool_call_format(),
            ToolCallFormat::kLlamaJson);
  EXPECT_EQ(ChatFormatter(read_template("mistralai-Mistral-Nemo-Instruct-2407.jinja"), "", "").tool_call_format(),
            ToolCallFormat::kMistral);
  EXPECT_EQ(ChatFormatter(read_template("google-gemma-2-2b-it.jinja"), "", "").tool_call_format(),
            ToolCallFormat::kNone);
  EXPECT_EQ(ChatFormatter(std::nullopt, "", "").tool_call_format(), ToolCallFormat::kNone);
}

// A Mistral answer's calls, as the API returns them, go back through the
// Nemo template with the tool's result: the template accepts the ids (it
// raises for any id but 9 alphanumerics) and writes the calls as the model
// wrote them.
TEST(ChatTemplate, MistralToolCallsRoundTrip) {
  ChatFormatter f(read_template("mistralai-Mistral-Nemo-Instruct-2407.jinja"), "<s>", "</s>");
  const auto calls = parse_tool_calls(ToolCallFormat::kMistral,
                                      R"([TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris"}}])");
  ASSERT_TRUE(calls.has_value());
  const std::string id = (*calls)[0]["id"];
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  messages.push_back({{"role", "user"}, {"content", "Weather in Paris?"}});
  // As a client sends the call back (the function's name first).
  const auto& fn = (*calls)[0]["function"];
  nlohmann::ordered_json call = {
      {"id", id}, {"type", "function"}, {"function", {{"name", fn["name"]}, {"arguments", fn["arguments"]}}}};
  messages.push_back(
      {{"role", "assistant"}, {"content", nullptr}, {"tool_calls", nlohmann::ordered_json::array({call})}});
  messages.push_back({{"role", "tool"}, {"tool_call_id", id}, {"content", "sunny"}});
  EXPECT_EQ(f.render(messages, true),
            "<s>[INST]Weather in Paris?[/INST][TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": "
            "\"Paris\"}, \"id\": \"" +
                id + "\"}]</s>[TOOL_RESULTS]{\"content\": sunny, \"call_id\": \"" + id + "\"}[/TOOL_RESULTS]");
}

// What a request adds to the template: tools in the request's key order,
// chat_template_kwargs as variables, and assistant tool-call arguments (a JSON
// string in the API) as objects.
TEST(ChatTemplate, ToolsKwargsAndToolCallArguments) {
  ChatFormatter f(
      std::string("{{ tools | tojson }}|{{ enable_thinking }}|"
                  "{% for m in messages %}{% for c in m.tool_calls or [] %}{{ c.function.arguments | tojson }}"
                  "{% endfor %}{% endfor %}"),
      "<s>", "</s>");
  const auto messages = nlohmann::ordered_json::parse(R"([{"role":"user","content":"w?"},
    {"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function",
      "function":{"name":"get","arguments":"{\"z\": 1, \"a\": 2}"}}]}])");
  const auto tools = nlohmann::ordered_json::parse(R"([{"type":"function","function":{"name":"get"}}])");
  EXPECT_EQ(f.render(messages, true, tools, nlohmann::ordered_json::parse(R"({"enable_thinking":false})")),
            R"([{"type": "function", "function": {"name": "get"}}]|False|{"z": 1, "a": 2})");
}

TEST(ChatTemplate, ContentPartsAndBadMessages) {
  ChatFormatter f(std::nullopt, "", "");
  EXPECT_EQ(
      f.render(json::parse(R"([{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}])"),
               false),
      "User: ab\n");
  for (const char* bad : {R"({})", R"([])", R"([1])", R"([{"content":"x"}])", R"([{"role":"wizard","content":"x"}])",
                          R"([{"role":"user"}])", R"([{"role":"user","content":5}])",
                          R"([{"role":"user","content":[{"type":"image_url"}]}])"}) {
    EXPECT_THROW(f.render(json::parse(bad), true), ApiError) << bad;
  }
}

std::string jr(const std::string& src, const json& ctx = json::object()) {
  return jinja::CompiledTemplate(src).render(ctx);
}

TEST(Jinja, ExpressionsAndFilters) {
  EXPECT_EQ(jr("{{ 1 + 2 * 3 }}|{{ 7 // 2 }}|{{ -7 % 3 }}|{{ 7 / 2 }}|{{ 'a' ~ 1 ~ none }}"), "7|3|2|3.5|a1None");
  EXPECT_EQ(jr("{{ x | length }} {{ x[-1] }} {{ x[1:] | join(',') }} {{ 'abc'[:-1] }}", {{"x", {1, 2, 3}}}),
            "3 3 2,3 ab");
  EXPECT_EQ(jr("{{ '  hi  ' | trim }}|{{ ' hi '.strip() }}|{{ 'Hi'.upper() }}|{{ 'hi' | capitalize }}"), "hi|hi|HI|Hi");
  EXPECT_EQ(jr("{{ 2 in [1,2] }} {{ 'b' in 'abc' }} {{ 'k' in d }} {{ 3 not in [1] }}", {{"d", {{"k", 1}}}}),
            "True True True True");
  EXPECT_EQ(jr("{{ y is defined }} {{ x is none }} {{ x is not none }} {{ 's' is string }} {{ d is mapping }}",
               {{"x", nullptr}, {"d", json::object()}}),
            "False True False True True");
  EXPECT_EQ(jr("{{ 'a' if c else 'b' }}{{ 'x' if not c }}", {{"c", false}}), "bx");
  EXPECT_EQ(jr("{{ m | selectattr('role', 'equalto', 'user') | list | length }}",
               {{"m", json::parse(R"([{"role":"user"},{"role":"bot"},{"role":"user"}])")}}),
            "2");
  EXPECT_EQ(jr("{{ [1,'a'] | reject('equalto', 'a') | join(', ') }}|{{ {'b': 1, 'a': [true]} | tojson }}"),
            "1|{\"b\": 1, \"a\": [true]}");  // insertion order, as transformers' tojson
  EXPECT_EQ(jr("{% for k, v in d | items %}{{ k }}={{ v }};{% endfor %}", {{"d", {{"a", 1}, {"b", 2}}}}), "a=1;b=2;");
}

// Python's slice semantics, steps included (Qwen3's template walks messages[::-1]).
TEST(Jinja, SlicesWithSteps) {
  const json x = {{"x", {0, 1, 2, 3, 4, 5}}};
  EXPECT_EQ(jr("{{ x[::-1] | join }}|{{ x[::2] | join }}|{{ x[1:5:2] | join }}|{{ x[-2::-2] | join }}", x),
            "543210|024|13|420");
  EXPECT_EQ(jr("{{ x[4:1:-1] | join }}|{{ x[10:-10:-3] | join }}|{{ x[:100] | length }}|{{ x[5:2] | length }}", x),
            "432|52|6|0");
  // Strings slice by character, not by byte.
  EXPECT_EQ(jr("{{ s[1:3] }}|{{ s[::-1] }}", {{"s", "h\xC3\xA9llo"}}), "\xC3\xA9l|oll\xC3\xA9h");
  EXPECT_THROW(jr("{{ x[::0] }}", x), InputError);
}

TEST(Jinja, StatementsScopesAndWhitespace) {
  EXPECT_EQ(
      jr("{% for x in xs if x > 1 %}{{ loop.index }}/{{ loop.length }}{% if loop.last %}!{% endif %} {% endfor %}",
         {{"xs", {1, 2, 3}}}),
      "1/2 2/2! ");
  EXPECT_EQ(jr("{% set n = 1 %}{% for x in [1,2] %}{% set n = n + x %}{% endfor %}{{ n }}"), "1");
  EXPECT_EQ(jr("{% set ns = namespace(n=1) %}{% for x in [1,2] %}{% set ns.n = ns.n + x %}{% endfor %}{{ ns.n }}"),
            "4");
  EXPECT_EQ(jr("{% if a %}A{% elif b %}B{% else %}C{% endif %}", {{"a", 0}, {"b", "x"}}), "B");
  EXPECT_EQ(jr("{% for x in [] %}x{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(jr("a  {{- 'b' -}}  c"), "abc");
  EXPECT_EQ(jr("  {% if true %}\n  x\n  {% endif %}\ny"), "  x\ny");  // lstrip_blocks + trim_blocks
  EXPECT_EQ(jr("{# comment #}\n{% set t %}in{{ 1 }}{% endset %}{{ t }}"), "in1");
}

TEST(Jinja, ErrorsAreInputErrors) {
  for (const char* bad :
       {"{{ ", "{% if x %}", "{% for %}", "{{ 1 + }}", "{% endfor %}", "{{ 'a' + 1 }}", "{{ x | nope }}",
        "{% call m() %}{% endcall %}", "{{ raise_exception('boom') }}", "{{ 1 // 0 }}",
        "{% macro m() %}{% endmacro %}{{ m(1) }}", "{% macro m(a) %}{% endmacro %}{{ m(b=1) }}",
        "{% macro m(a=1, b) %}{% endmacro %}", "{% macro m() %}{{ m() }}{% endmacro %}{{ m() }}", "{% break %}",
        "{{ x[::0] }}", "{{ '\\u12' }}"}) {
    EXPECT_THROW(jr(bad), InputError) << bad;
  }
  EXPECT_THROW(jr("{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}"), InputError);
  EXPECT_THROW(jr("{% for i in range(100) %}{{ 'x' * 10000000 }}{% endfor %}"), InputError);
}

}  // namespace
}  // namespace parallm
