// JSON mode's recognizer against nlohmann's parser: every prefix of a valid
// object is accepted and only the whole of it is complete; invalid documents
// are refused; and on random strings the two agree on what is a complete JSON
// object. Plus the sampler's mask on a small vocabulary.
#include "sampling/json_constraint.h"

#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "sampling/sampler.h"

namespace parallm {
namespace {

// Feeds s byte by byte; returns the number of bytes accepted.
size_t accepted(const std::string& s, JsonPrefix* p) {
  size_t n = 0;
  for (unsigned char c : s) {
    if (!p->feed(c)) break;
    ++n;
  }
  return n;
}

TEST(JsonPrefix, ValidObjectsAreAcceptedPrefixByPrefix) {
  const std::vector<std::string> docs = {"{}",
                                         " {\n} ",
                                         R"({"a":1})",
                                         R"({"a": -0.5e+10, "b": [true, false, null, "x\"\\\/\u00e9\n"], "c": {}})",
                                         R"({"k": [[], [[1, 2.25], {"z": "é 中"}], -12, 0, 3E-2]})",
                                         R"({"": ""})",
                                         R"({"n": 123456789012345678901234567890})",
                                         "{\"a\":1 }",
                                         "{\"a\":1.5e3 ,\"b\":0\n}",
                                         "{\"a\": [ 0 , -1 ] }"};
  for (std::string d : docs) {
    while (!d.empty() && d.back() == ' ') d.pop_back();  // nothing may follow the object
    JsonPrefix p;
    for (size_t i = 0; i < d.size(); ++i) {
      ASSERT_FALSE(p.complete()) << d << " at " << i;
      ASSERT_TRUE(p.feed(static_cast<unsigned char>(d[i]))) << d << " refused at " << i << ": " << d.substr(0, i + 1);
    }
    EXPECT_TRUE(p.complete()) << d;
    EXPECT_FALSE(p.feed(' ')) << "after the object";
    EXPECT_TRUE(nlohmann::json::parse(d).is_object());
  }
}

TEST(JsonPrefix, InvalidDocumentsAreRefused) {
  for (const std::string d : {"[]",
                              "1",
                              "\"s\"",
                              "{a:1}",
                              "{\"a\" 1}",
                              "{\"a\":}",
                              "{\"a\":1,}",
                              "{\"a\":01}",
                              "{\"a\":1.}",
                              "{\"a\":-}",
                              "{\"a\":tru}",
                              "{\"a\":[1,]}",
                              "{\"a\":\"\x01\"}",
                              "{\"a\":\"\\q\"}",
                              "{\"a\":\"\\u12g4\"}",
                              "{\"a\":1]",
                              "{\"a\":[1}",
                              "{}}",
                              "{,}",
                              "{\"a\":1e}",
                              "{\"a\":.5}",
                              "{\"a\":+1}",
                              "{\"a\":- 1}",
                              "{\"a\":1. 5}",
                              "{\"a\":1e }",
                              "{\"a\":t rue}",
                              "{\"a\":1 2}"}) {
    JsonPrefix p;
    const size_t n = accepted(d, &p);
    EXPECT_FALSE(n == d.size() && p.complete()) << d;
    EXPECT_TRUE(nlohmann::json::parse(d, nullptr, false).is_discarded() || !nlohmann::json::parse(d).is_object()) << d;
  }
}

TEST(JsonPrefix, AgreesWithNlohmannOnRandomStrings) {
  std::mt19937_64 rng(7);
  const std::string alphabet = "{}[]:,\"\\ 0123456789.-+eEtrufalsn\nab";
  int complete = 0;
  for (int i = 0; i < 200000; ++i) {
    std::string s = "{";
    const size_t len = 1 + rng() % 14;
    for (size_t k = 0; k < len; ++k) s += alphabet[rng() % alphabet.size()];
    JsonPrefix p;
    const bool ours = accepted(s, &p) == s.size() && p.complete();
    const auto j = nlohmann::json::parse(s, nullptr, false);
    const bool theirs = !j.is_discarded() && j.is_object() && !std::isspace(static_cast<unsigned char>(s.back()));
    ASSERT_EQ(ours, theirs) << s;
    complete += ours;
  }
  EXPECT_GT(complete, 100);  // the strings did reach complete objects
}

TEST(JsonPrefix, WhitespaceRunsAreBounded) {
  JsonPrefix p;
  for (int i = 0; i < JsonPrefix::kMaxLeadingWhitespace; ++i) ASSERT_TRUE(p.feed(' '));
  EXPECT_FALSE(p.feed('\n'));
  ASSERT_TRUE(p.feed('{'));
  for (int i = 0; i < JsonPrefix::kMaxWhitespaceRun; ++i) ASSERT_TRUE(p.feed(i % 2 ? ' ' : '\n'));
  EXPECT_FALSE(p.feed(' '));
  ASSERT_TRUE(p.feed('}'));
  EXPECT_TRUE(p.complete());
}

TEST(JsonPrefix, TooDeepIsRefused) {
  JsonPrefix p;
  EXPECT_TRUE(p.feed('{'));
  EXPECT_TRUE(p.feed(std::string("\"a\":")));
  for (int i = 1; i < JsonPrefix::kMaxDepth; ++i) ASSERT_TRUE(p.feed('[')) << i;
  EXPECT_FALSE(p.feed('['));
}

// The sampler in JSON mode on a tiny vocabulary: whatever the logits prefer,
// the tokens drawn spell a JSON object, then the end token.
TEST(SamplerJsonMode, DrawsOnlyTokensThatKeepAJsonObject) {
  const std::vector<std::string> pieces = {"", "{", "}", "\"k\"", ":", "1", " ", "x", ",", "[", "]"};
  const int32_t n = static_cast<int32_t>(pieces.size()), eos = 0;
  for (uint64_t seed = 1; seed <= 200; ++seed) {
    SamplingParams sp;
    sp.temperature = 1.5f;
    sp.seed = seed;
    sp.json_object = true;
    Sampler s(sp);
    s.constrain_json(&pieces, {eos});
    std::mt19937 rng(static_cast<uint32_t>(seed));
    std::string text;
    bool ended = false;
    for (int step = 0; step < 60 && !ended; ++step) {
      std::vector<float> logits(static_cast<size_t>(n));
      for (float& l : logits) l = std::uniform_real_distribution<float>(-2, 2)(rng);
      logits[7] = 10;  // "x" is never valid
      const int32_t t = s.sample(logits.data(), n);
      ASSERT_NE(t, 7);
      if (t == eos) {
        ended = true;
        break;
      }
      text += pieces[static_cast<size_t>(t)];
      s.add_output_token(t);
    }
    JsonPrefix check;
    ASSERT_EQ(accepted(text, &check), text.size()) << text;
    if (ended) {
      EXPECT_TRUE(check.complete()) << text;
      EXPECT_TRUE(nlohmann::json::parse(text).is_object()) << text;
    }
  }
}

// A closed object ends the answer even when min_tokens would still keep the
// end token out: never a distribution with nothing left to draw.
TEST(SamplerJsonMode, ClosedObjectEndsDespiteMinTokens) {
  const std::vector<std::string> pieces = {"", "{", "}"};
  for (float temperature : {0.0f, 1.0f}) {  // greedy and drawn
    SamplingParams sp;
    sp.temperature = temperature;
    sp.json_object = true;
    sp.min_tokens = 100;
    Sampler s(sp);
    s.constrain_json(&pieces, {0});
    s.ban_until_min_tokens({0});
    s.add_output_token(1);
    s.add_output_token(2);
    std::vector<float> logits = {-1.0f, 3.0f, 2.0f};
    EXPECT_EQ(s.sample(logits.data(), 3), 0) << temperature;
  }
}

}  // namespace
}  // namespace parallm
