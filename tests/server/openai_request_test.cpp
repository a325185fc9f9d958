// parse_completion_request and the JSON limits: bodies nested past the depth
// limit are a 400 naming it wherever the nesting hides, real tool schemas pass
// with room to spare, wide bodies parse, and the single ordered parse keeps
// key order and nlohmann's duplicate-key result.
#include "server/openai_request.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "server/api_error.h"

namespace parallm {
namespace {

using nlohmann::ordered_json;

std::string nested(int depth) { return std::string(depth, '[') + std::string(depth, ']'); }

// The ApiError's message (status 400 checked), or "" when the body parses.
std::string error_of(const std::string& body, bool chat, const JsonLimits& limits = JsonLimits{}) {
  try {
    parse_completion_request(body, chat, limits);
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400) << e.what();
    return e.what();
  }
  return "";
}

// vLLM's constraint fields compile into the request's constraint; what cannot
// be honoured is a 400 naming the field; a null is the field's absence.
TEST(OpenAiRequest, ConstraintFieldsCompileOr400NamingThem) {
  const std::vector<std::pair<std::string, std::string>> ok = {
      {"guided_json", R"({"type":"object"})"},
      {"guided_json", R"("{\"type\":\"integer\"}")"},
      {"guided_regex", R"("[0-9]+")"},
      {"guided_choice", R"(["a","b"])"},
      {"guided_grammar", R"("root ::= [a-z]+")"},
      {"structured_outputs", R"({"choice":["a"]})"},
      {"structured_outputs", R"({"json":{"type":"string"}})"},
      {"response_format", R"({"type":"json_schema","json_schema":{"name":"n","schema":{"type":"boolean"}}})"},
      {"response_format", R"({"type":"json_object"})"}};
  for (const auto& [key, value] : ok) {
    for (bool chat : {false, true}) {
      const std::string body =
          std::string(chat ? R"({"messages":[{"role":"user","content":"hi"}],)" : R"({"prompt":"hi",)") + "\"" + key +
          "\":" + value + "}";
      const CompletionParams p = parse_completion_request(body, chat);
      EXPECT_NE(p.sampling.constraint, nullptr) << body;
    }
  }
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"guided_json", R"({"type":"object","not":{}})"},
      {"guided_regex", R"("(?<=a)b")"},
      {"guided_choice", "[]"},
      {"guided_grammar", R"("root ::= nope")"},
      {"structured_outputs", R"({"regex":"a","whitespace_pattern":" "})"},
      {"response_format", R"({"type":"json_schema","json_schema":{"name":"n"}})"}};
  for (const auto& [key, value] : bad) {
    const std::string body = R"({"prompt":"hi",")" + key + "\":" + value + "}";
    try {
      parse_completion_request(body, false);
      ADD_FAILURE() << body << " was accepted";
    } catch (const ApiError& e) {
      EXPECT_EQ(e.status(), 400);
      EXPECT_NE(std::string(e.what()).find(key), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(parse_completion_request(R"({"prompt":"hi","guided_json":null})", false).sampling.constraint, nullptr);
}

// vLLM's prompt_logprobs: an int 0..20 on both routes; -1 (vLLM's whole
// vocabulary), negatives, too large, wrong types and streams are a 400 naming it.
TEST(OpenAiRequest, PromptLogprobs) {
  for (bool chat : {false, true}) {
    const std::string head = chat ? R"({"messages":[{"role":"user","content":"hi"}],)" : R"({"prompt":"hi",)";
    EXPECT_EQ(parse_completion_request(head + R"("prompt_logprobs":3})", chat).prompt_logprobs, 3);
    EXPECT_EQ(parse_completion_request(head + R"("prompt_logprobs":0})", chat).prompt_logprobs, 0);
    EXPECT_EQ(parse_completion_request(head + R"("prompt_logprobs":null})", chat).prompt_logprobs, -1);
    EXPECT_EQ(parse_completion_request(head + R"("max_tokens":2})", chat).prompt_logprobs, -1);
    for (const char* bad : {"-1", "-2", "21", "1.5", "\"3\"", "true", "[1]", "18446744073709551615"}) {
      const std::string msg = error_of(head + "\"prompt_logprobs\":" + bad + "}", chat);
      EXPECT_NE(msg.find("prompt_logprobs"), std::string::npos) << bad << ": " << msg;
    }
    EXPECT_NE(error_of(head + R"("prompt_logprobs":1,"stream":true})", chat).find("stream"), std::string::npos);
  }
}

TEST(OpenAiRequest, DeepBodiesAre400NamingTheLimit) {
  const std::string limit = "JSON nested deeper than the limit of 128 levels";
  for (int depth : {129, 50'000, 200'000}) {
    const std::string d = nested(depth);
    const std::vector<std::pair<std::string, bool>> bodies = {
        {R"({"messages":[{"role":"user","content":"hi","extra":)" + d + "}]}", true},
        {R"({"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"p":)" +
             d + "}}}]}",
         true},
        {R"({"messages":[{"role":"user","content":"hi"}],"chat_template_kwargs":{"k":)" + d + "}}", true},
        {R"({"prompt":"hi","x":)" + d + "}", false},
        {d, false},
    };
    for (const auto& [body, chat] : bodies) {
      const std::string err = error_of(body, chat);
      EXPECT_NE(err.find(limit), std::string::npos) << depth << ": " << err;
    }
  }
}

TEST(OpenAiRequest, DepthAtTheLimitIsAccepted) {
  // The body object is level 1, so 127 nested arrays inside it make 128.
  EXPECT_EQ(error_of(R"({"prompt":"hi","x":)" + nested(127) + "}", false), "");
  EXPECT_NE(error_of(R"({"prompt":"hi","x":)" + nested(128) + "}", false).find("limit of 128"), std::string::npos);
  // A server option can lower (or raise) it.
  EXPECT_EQ(error_of(R"({"prompt":"hi","x":)" + nested(15) + "}", false, JsonLimits{16}), "");
  EXPECT_NE(error_of(R"({"prompt":"hi","x":)" + nested(16) + "}", false, JsonLimits{16}).find("limit of 16 levels"),
            std::string::npos);
  EXPECT_EQ(error_of(R"({"prompt":"hi","x":)" + nested(300) + "}", false, JsonLimits{400}), "");
}

// The deepest real schemas a client may send as tool parameters (Kubernetes
// objects, up to 27 levels) pass well inside the limit, unchanged.
TEST(OpenAiRequest, RealToolSchemasPass) {
  const std::filesystem::path dir = std::filesystem::path(PARALLM_SHARED_DIR) / "schemas" / "kubernetes";
  if (!std::filesystem::is_directory(dir)) GTEST_SKIP() << dir << " not found";
  int n = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".json") continue;
    std::ifstream f(entry.path());
    std::stringstream ss;
    ss << f.rdbuf();
    const std::string body = R"({"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":)"
                             R"({"name":"apply","parameters":)" +
                             ss.str() + "}}]}";
    const CompletionParams p = parse_completion_request(body, true);
    EXPECT_EQ(p.tools[0]["function"]["parameters"].dump(), ordered_json::parse(ss.str()).dump()) << entry.path();
    ++n;
  }
  EXPECT_GT(n, 0);
}

TEST(OpenAiRequest, WideBodiesParseWithKeyOrderKept) {
  constexpr int n = 200'000;
  std::string extra;
  for (int i = 0; i < n; ++i) extra += ",\"k" + std::to_string(n - i) + "\":" + std::to_string(i);
  const CompletionParams p =
      parse_completion_request(R"({"messages":[{"role":"user","content":"hi")" + extra + "}]}", true);
  const ordered_json& m = p.messages[0];
  ASSERT_EQ(m.size(), static_cast<size_t>(n + 2));
  auto it = m.begin();
  EXPECT_EQ(it.key(), "role");
  EXPECT_EQ((++it).key(), "content");
  for (int i = 0; i < n; ++i) {
    ++it;
    ASSERT_EQ(it.key(), "k" + std::to_string(n - i));
    ASSERT_EQ(it.value(), i);
  }
  // A wide array of messages too.
  std::string many = R"({"messages":[)";
  for (int i = 0; i < n; ++i) many += std::string(i ? "," : "") + R"({"role":"user","content":"m"})";
  EXPECT_EQ(parse_completion_request(many + "]}", true).messages.size(), static_cast<size_t>(n));
}

TEST(OpenAiRequest, KeyOrderAndDuplicateKeysAsBefore) {
  const CompletionParams p = parse_completion_request(
      R"({"model":"m","messages":[{"role":"user","z":1,"content":"x","a":2,"content":"y"}],"max_tokens":5,)"
      R"("chat_template_kwargs":{"b":1,"a":2},"max_tokens":7,"model":"last"})",
      true);
  // The last value wins, in the first key's place (nlohmann's parse did the same).
  EXPECT_EQ(p.messages.dump(), R"([{"role":"user","z":1,"content":"y","a":2}])");
  EXPECT_EQ(p.chat_template_kwargs.dump(), R"({"b":1,"a":2})");
  EXPECT_EQ(p.max_tokens, 7);
  EXPECT_EQ(p.model, "last");
}

TEST(OpenAiRequest, SyntaxErrorsNameTheByte) {
  EXPECT_NE(error_of(R"({"prompt": "a",)", false).find("request body is not valid JSON at byte 16: syntax error"),
            std::string::npos)
      << error_of(R"({"prompt": "a",)", false);
  std::string bad_utf8 = R"({"prompt":"ab)";
  bad_utf8 += "\xff\xfe";
  bad_utf8 += R"("})";
  EXPECT_NE(error_of(bad_utf8, false).find("request body is not valid JSON at byte"), std::string::npos);
  EXPECT_NE(error_of(R"({"prompt":"\ud800"})", false).find("surrogate"), std::string::npos);
  EXPECT_EQ(error_of("[1,2]", false), "request body must be a JSON object");
}

TEST(OpenAiRequest, HugeFloatsAreNotIntegers) {
  for (const char* v : {"1e300", "-1e300", "9.3e18", "1e19"}) {
    EXPECT_EQ(error_of(std::string(R"({"prompt":"a","max_tokens":)") + v + "}", false),
              "'max_tokens' must be an integer")
        << v;
  }
  EXPECT_EQ(parse_completion_request(R"({"prompt":"a","max_tokens":5.0})", false).max_tokens, 5);
}

}  // namespace
}  // namespace parallm
