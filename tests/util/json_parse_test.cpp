// parse_json: the depth limit (at the limit accepted, one more refused, and
// input far deeper refused without a crash), wide objects and arrays, and the
// same result as nlohmann's own parse (the reference) on everything else:
// duplicate keys, scalars, escapes, surrogates, invalid UTF-8, big numbers.
#include "util/json_parse.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "util/check.h"

namespace parallm {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

std::string nested_arrays(int depth) { return std::string(depth, '[') + std::string(depth, ']'); }

std::string nested_objects(int depth) {
  std::string s;
  for (int i = 0; i < depth; ++i) s += "{\"a\":";
  s += "1";
  s += std::string(depth, '}');
  return s;
}

template <class Json>
class JsonParseTest : public ::testing::Test {};
using JsonTypes = ::testing::Types<json, ordered_json>;
TYPED_TEST_SUITE(JsonParseTest, JsonTypes);

TYPED_TEST(JsonParseTest, DepthAtTheLimitIsAcceptedOneMoreIsRefused) {
  using Json = TypeParam;
  for (int limit : {1, 2, 64, kRequestJsonDepth}) {
    const JsonLimits limits{limit};
    for (auto make : {nested_arrays, nested_objects}) {
      const Json ok = parse_json<Json>(make(limit), limits);
      EXPECT_EQ(ok, Json::parse(make(limit)));
      JsonError e;
      EXPECT_FALSE(try_parse_json<Json>(make(limit + 1), limits, &e));
      EXPECT_TRUE(e.too_deep);
      EXPECT_EQ(e.message, "JSON nested deeper than the limit of " + std::to_string(limit) + " levels");
      try {
        parse_json<Json>(make(limit + 1), limits);
        ADD_FAILURE() << "depth " << limit + 1 << " accepted";
      } catch (const InputError& err) {
        EXPECT_EQ(std::string(err.what()), e.message);
      }
    }
  }
  // Depth counts nesting, not containers: many siblings at depth 4 are fine.
  std::string wide = "[";
  for (int i = 0; i < 1000; ++i) wide += std::string(i ? "," : "") + "[1,{\"a\":[]}]";
  wide += "]";
  EXPECT_EQ(parse_json<Json>(wide, JsonLimits{4}).size(), 1000u);
  EXPECT_FALSE(try_parse_json<Json>(wide, JsonLimits{3}));
  // A limit of 0 leaves scalars.
  EXPECT_EQ(parse_json<Json>("7", JsonLimits{0}), Json(7));
  EXPECT_FALSE(try_parse_json<Json>("[]", JsonLimits{0}));
}

TYPED_TEST(JsonParseTest, FarTooDeepIsRefusedWithoutACrash) {
  using Json = TypeParam;
  for (int depth : {50'000, 200'000}) {
    for (const std::string& text : {nested_arrays(depth), nested_objects(depth), std::string(depth, '[')}) {
      JsonError e;
      EXPECT_FALSE(try_parse_json<Json>(text, JsonLimits{}, &e)) << depth;
      EXPECT_TRUE(e.too_deep);
      EXPECT_THROW(parse_json<Json>(text, JsonLimits{kFileJsonDepth}), InputError);
    }
    // Deep inside a request's extra field, as an attack would put it.
    const std::string body = R"({"messages":[{"role":"user","content":"hi","x":)" + nested_arrays(depth) + "}]}";
    EXPECT_THROW(parse_json<Json>(body, JsonLimits{}), InputError);
  }
}

TYPED_TEST(JsonParseTest, WideObjectsAndArraysParse) {
  using Json = TypeParam;
  constexpr int n = 200'000;
  std::string obj = "{", arr = "[";
  for (int i = 0; i < n; ++i) {
    // Keys out of lexicographic order, so an ordered result shows it kept the input's.
    obj += (i ? ",\"k" : "\"k") + std::to_string((i * 7919) % n) + "\":" + std::to_string(i);
    arr += (i ? "," : "") + std::to_string(i);
  }
  obj += "}";
  arr += "]";
  const Json o = parse_json<Json>(obj, JsonLimits{});
  ASSERT_TRUE(o.is_object());
  ASSERT_EQ(o.size(), static_cast<size_t>(n));
  for (int i = 0; i < n; i += 997) EXPECT_EQ(o.at("k" + std::to_string((i * 7919) % n)), i);
  if constexpr (std::is_same_v<Json, ordered_json>) {
    int i = 0;
    for (auto it = o.begin(); it != o.end(); ++it, ++i) {
      ASSERT_EQ(it.key(), "k" + std::to_string((i * 7919) % n));
      ASSERT_EQ(it.value(), i);
    }
  }
  const Json a = parse_json<Json>(arr, JsonLimits{});
  ASSERT_EQ(a.size(), static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) ASSERT_EQ(a[static_cast<size_t>(i)], i);
  // A wide object full of duplicates: each key once, in first-seen place, last value.
  std::string dup = "{";
  for (int i = 0; i < n; ++i) dup += (i ? ",\"d" : "\"d") + std::to_string(i % 100) + "\":" + std::to_string(i);
  dup += "}";
  const Json d = parse_json<Json>(dup, JsonLimits{});
  ASSERT_EQ(d.size(), 100u);
  EXPECT_EQ(d.dump(), Json::parse(dup).dump());
}

// Same value and, for ordered_json, the same key order as nlohmann's parse;
// or refused by both.
template <class Json>
void expect_as_nlohmann(const std::string& text) {
  const Json want = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  JsonError e;
  const auto got = try_parse_json<Json>(text, JsonLimits{}, &e);
  if (want.is_discarded()) {
    EXPECT_FALSE(got) << text;
    EXPECT_FALSE(e.too_deep) << text;
    EXPECT_NE(e.message.find("invalid JSON at byte "), std::string::npos) << e.message;
    return;
  }
  ASSERT_TRUE(got) << text << ": " << e.message;
  EXPECT_EQ(*got, want) << text;
  EXPECT_EQ(got->dump(), want.dump()) << text;
}

TYPED_TEST(JsonParseTest, DuplicateKeysAsNlohmann) {
  std::vector<std::string> cases = {
      R"({"a":1,"a":2})",
      R"({"b":1,"a":2,"b":3})",
      R"({"a":{"x":1},"a":{"y":2}})",
      R"({"a":[1,2],"b":0,"a":"s"})",
      R"({"a":1,"a":{"a":1,"a":[{"a":1,"b":2,"a":3}]}})",
      R"([{"k":1,"k":2},{"k":3},{"j":0,"k":4,"j":5}])",
      R"({"":1,"":2})",
      R"({"a":null,"a":null})",
  };
  // Duplicates of early and late keys in objects past the index threshold.
  for (int width : {15, 16, 17, 40}) {
    std::string s = "{";
    for (int i = 0; i < width; ++i) s += "\"k" + std::to_string(i) + "\":" + std::to_string(i) + ",";
    s +=
        "\"k0\":\"first\",\"k" + std::to_string(width - 1) + "\":{\"k0\":1,\"k0\":[2]},\"k3\":null,\"new\":1,\"k0\":9}";
    cases.push_back(s);
  }
  for (const auto& c : cases) expect_as_nlohmann<TypeParam>(c);
}

// Random small documents over few keys, so duplicates are common at every level.
std::string random_json(std::mt19937& rng, int depth) {
  const int kind = static_cast<int>(rng() % (depth > 3 ? 3 : 5));
  if (kind == 0) return std::to_string(static_cast<int>(rng() % 100) - 50);
  if (kind == 1) return "\"s" + std::to_string(rng() % 5) + "\"";
  if (kind == 2) return rng() % 2 ? "null" : "true";
  const int n = static_cast<int>(rng() % 24);
  std::string s = kind == 3 ? "[" : "{";
  for (int i = 0; i < n; ++i) {
    if (i) s += ",";
    if (kind == 4) s += "\"" + std::string(1, static_cast<char>('a' + rng() % 20)) + "\":";
    s += random_json(rng, depth + 1);
  }
  return s + (kind == 3 ? "]" : "}");
}

TYPED_TEST(JsonParseTest, RandomDocumentsAsNlohmann) {
  std::mt19937 rng(12345);
  for (int i = 0; i < 2000; ++i) expect_as_nlohmann<TypeParam>(random_json(rng, 0));
}

TYPED_TEST(JsonParseTest, ScalarsStringsAndNumbersAsNlohmann) {
  const std::vector<std::string> cases = {
      "0",
      "-1",
      "1.5",
      "-0.0",
      "1e3",
      "true",
      "false",
      "null",
      R"("s")",
      " \n\t 5 \r\n",
      // Escapes, a surrogate pair, lone surrogates (refused), raw UTF-8.
      R"("\u00e9\n\t\"\\\/\b\f\r")",
      R"("\ud83d\ude00")",
      R"("\ud800")",
      R"("\udc00")",
      R"("\ud800\u0041")",
      R"("\ud83d")",
      "\"caf\xc3\xa9 \xf0\x9f\x98\x80\"",
      // Invalid UTF-8 inside a string: a stray byte, a truncated sequence, an overlong form, a
      // surrogate.
      "\"ab\xff\xfe\"",
      "\"\xc3\"",
      "\"\xc0\xaf\"",
      "\"\xed\xa0\x80\"",
      "{\"k\xff\":1}",
      // Big numbers: the integer types' ends, past them (a float), past a double (refused).
      "9223372036854775807",
      "-9223372036854775808",
      "18446744073709551615",
      "18446744073709551616",
      "-9223372036854775809",
      "123456789012345678901234567890",
      "1e308",
      "1e400",
      "-1e400",
      "1e-400",
      // Syntax errors.
      "",
      " ",
      "{",
      "[1,]",
      R"({"a":})",
      R"({"a" 1})",
      "{} x",
      "[1] [2]",
      "tru",
      "01",
      "1.",
      "\"\x01\"",
      "/* c */ 1",
      "NaN",
      "[1,2",
      R"({"a":1,})",
      "'s'",
  };
  for (const auto& c : cases) expect_as_nlohmann<TypeParam>(c);
}

TEST(JsonParse, SyntaxErrorsNameTheByte) {
  JsonError e;
  EXPECT_FALSE(try_parse_json<ordered_json>(R"({"a": tru})", JsonLimits{}, &e));
  EXPECT_FALSE(e.too_deep);
  size_t want_byte = 0;
  try {
    const ordered_json j = ordered_json::parse(R"({"a": tru})");
    ADD_FAILURE() << j.dump();
  } catch (const nlohmann::json::parse_error& p) {
    want_byte = p.byte;
  }
  EXPECT_EQ(e.byte, want_byte);
  EXPECT_EQ(e.message.rfind("invalid JSON at byte " + std::to_string(want_byte) + ": syntax error", 0), 0u)
      << e.message;
  try {
    parse_json<json>("[1e400]", JsonLimits{});
    ADD_FAILURE();
  } catch (const InputError& err) {
    EXPECT_NE(std::string(err.what()).find("number overflow"), std::string::npos) << err.what();
  }
}

}  // namespace
}  // namespace parallm

namespace parallm {
namespace {

// The member limit: an object of exactly max_members parses, one more is
// refused (too_wide, the message naming the limit), at any depth; duplicate
// keys count once; arrays are not limited.
TEST(JsonParseMembers, LimitIsExactAndNamed) {
  auto object_of = [](int n) {
    std::string s = "{";
    for (int i = 0; i < n; ++i) s += (i ? ",\"k" : "\"k") + std::to_string(i) + "\":" + std::to_string(i);
    return s + "}";
  };
  JsonLimits l;
  l.max_members = 100;
  EXPECT_TRUE(try_parse_json<nlohmann::ordered_json>(object_of(100), l).has_value());
  for (const std::string& doc : {object_of(101), "[1,{\"a\":" + object_of(101) + "}]"}) {
    JsonError e;
    EXPECT_FALSE(try_parse_json<nlohmann::ordered_json>(doc, l, &e).has_value());
    EXPECT_TRUE(e.too_wide);
    EXPECT_NE(e.message.find("100 members"), std::string::npos) << e.message;
    EXPECT_FALSE(try_parse_json<nlohmann::json>(doc, l).has_value());
  }
  std::string dup = "{";
  for (int i = 0; i < 500; ++i) dup += (i ? ",\"same\":" : "\"same\":") + std::to_string(i);
  dup += "}";
  const auto d = try_parse_json<nlohmann::ordered_json>(dup, l);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ((*d)["same"], 499);
  std::string arr = "[";
  for (int i = 0; i < 5000; ++i) arr += (i ? ",1" : "1");
  EXPECT_TRUE(try_parse_json<nlohmann::json>(arr + "]", l).has_value());
}

// nlohmann's lexer ends the input at a NUL byte; here a raw NUL is an error
// wherever it is (JSON text has none: inside strings it is escaped).
TEST(JsonParseMembers, RawNulIsAnErrorAnywhere) {
  for (const std::string& doc :
       {std::string("{}\0junk", 7), std::string("{\"a\":\"x\0y\"}", 11), std::string("\0", 1)}) {
    JsonError e;
    EXPECT_FALSE(try_parse_json<nlohmann::json>(doc, JsonLimits{}, &e).has_value());
    EXPECT_NE(e.message.find("NUL"), std::string::npos) << e.message;
  }
  EXPECT_TRUE(try_parse_json<nlohmann::json>("{\"a\":\"x\\u0000y\"}", JsonLimits{}).has_value());
}

}  // namespace
}  // namespace parallm
