// Compilers and masks of src/constrain against independent references:
// regexes against std::regex (ECMAScript, full match), grammars against
// hand-derived accept/reject sets, JSON schemas by generating strings from
// the automaton and parsing them with nlohmann, and token masks against
// feeding every token's bytes one at a time.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>
#include <regex>

#include "constrain/compile_cache.h"
#include "constrain/ebnf_parser.h"
#include "constrain/json_schema.h"
#include "constrain/matcher.h"
#include "constrain/regex_parser.h"
#include "util/check.h"

namespace parallm::constrain {
namespace {

Grammar regex_grammar(const std::string& re) {
  Grammar g;
  g.define(g.add_rule("root"), parse_regex(re));
  g.compile();
  return g;
}

bool matches(const Grammar& g, const std::string& s) {
  Matcher m(&g);
  return m.feed(s) && m.accepting();
}

// A random complete string of the grammar: random bytes allowed by the
// matcher, ending once accepting with probability 1/4 or when the distance
// must be closed.
std::string sample(const Grammar& g, std::mt19937& rng, int budget = 200) {
  Matcher m(&g);
  std::string out;
  for (int step = 0;; ++step) {
    const bool closing = m.distance() + step >= budget;
    if (m.accepting() && (!m.can_continue(m.current()) || closing || rng() % 4 == 0)) return out;
    std::vector<int> ok;
    Matcher::Set next;
    for (int c = 0; c < 256; ++c) {
      m.step(m.current(), static_cast<uint8_t>(c), &next);
      if (!next.empty() && (!closing || m.distance(next) < m.distance())) ok.push_back(c);
    }
    if (ok.empty()) {
      ADD_FAILURE() << "dead end after '" << out << "'";
      return out;
    }
    const char c = static_cast<char>(ok[rng() % ok.size()]);
    EXPECT_TRUE(m.feed(std::string(1, c)));
    out += c;
  }
}

TEST(Regex, AgreesWithStdRegex) {
  const std::vector<std::string> patterns = {"abc",
                                             "a|b|cd",
                                             "a*b+c?",
                                             "(ab)*",
                                             "[a-c]{2,3}",
                                             "[^a-c]x",
                                             "\\d{3}-\\d{4}",
                                             "(?:foo|bar)baz",
                                             "x{2}y{1,}z{0,2}",
                                             "\\w+@\\w+\\.com",
                                             "[A-Z][a-z]*( [A-Z][a-z]*)*",
                                             "-?(0|[1-9][0-9]*)(\\.[0-9]+)?",
                                             "^yes|no$",
                                             "\\s*\\S",
                                             "(a|ab)(c|bcd)",
                                             "[\\d\\-]+",
                                             "a.c"};
  const std::vector<std::string> inputs = {
      "",      "a",    "b",      "cd",  "abc",          "ab",           "abab",        "aab",    "bbc",
      "ac",    "abcc", "xx",     "dx",  "ax",           "555-1234",     "55-1234",     "foobaz", "barbaz",
      "fobaz", "xxyz", "xxyyzz", "xyz", "bob@site.com", "bob@site.org", "Hello World", "hello",  "Hello world",
      "-0.5",  "12",   "012",    "1.",  "yes",          "no",           " x",          "  ",     "abcd",
      "1-2",   "a-",   "a\nc",   "aXc"};
  for (const std::string& p : patterns) {
    const Grammar g = regex_grammar(p);
    std::string stripped = p;
    const std::regex ref(stripped, std::regex::ECMAScript);
    for (const std::string& s : inputs) {
      EXPECT_EQ(matches(g, s), std::regex_match(s, ref)) << "pattern " << p << " input '" << s << "'";
    }
  }
}

TEST(Regex, SamplesMatch) {
  std::mt19937 rng(7);
  for (const std::string p : {"[a-f0-9]{8}", "(red|green|blue)(, (red|green|blue))*", "\\d+(\\.\\d{1,2})?"}) {
    const Grammar g = regex_grammar(p);
    const std::regex ref(p);
    for (int i = 0; i < 50; ++i) {
      const std::string s = sample(g, rng);
      EXPECT_TRUE(std::regex_match(s, ref)) << p << ": " << s;
    }
  }
}

TEST(Regex, Unicode) {
  const Grammar g = regex_grammar("[α-ω]+é.");
  EXPECT_TRUE(matches(g, "αβγé€"));
  EXPECT_TRUE(matches(g, "ωéx"));
  EXPECT_FALSE(matches(g, "aéx"));
  EXPECT_FALSE(matches(g, "αé"));
  const Grammar any = regex_grammar(".");
  EXPECT_TRUE(matches(any, "\xF0\x9F\x98\x80"));  // U+1F600
  EXPECT_FALSE(matches(any, "\xED\xA0\x80"));     // a surrogate is not UTF-8
  EXPECT_FALSE(matches(any, "\xC0\x80"));         // overlong
}

TEST(Regex, UnsupportedSyntaxIsNamed) {
  for (const auto& [p, word] : std::vector<std::pair<std::string, std::string>>{{"(a)\\1", "backreference"},
                                                                                {"a(?=b)", "lookaround"},
                                                                                {"\\bword", "\\b"},
                                                                                {"(?i)abc", "inline flag"},
                                                                                {"a{5,2}", "n < m"},
                                                                                {"(ab", "unclosed"},
                                                                                {"ab)", "unmatched"},
                                                                                {"*a", "nothing to repeat"},
                                                                                {"a{100000}", "repeats more"},
                                                                                {"[abc", "unterminated"},
                                                                                {"a^b", "anchors"}}) {
    try {
      regex_grammar(p);
      ADD_FAILURE() << p << " compiled";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(word), std::string::npos) << p << ": " << e.what();
    }
  }
}

TEST(Grammar, GbnfAndLark) {
  const std::string gbnf = R"G(
# arithmetic
root ::= expr
expr ::= term (("+" | "-") term)*
term ::= num | "(" expr ")"
num  ::= [0-9]+
)G";
  Grammar g = parse_ebnf(gbnf);
  g.compile();
  for (const std::string s : {"1", "1+2", "(1-2)+3", "((7))", "10-(2+3)"}) EXPECT_TRUE(matches(g, s)) << s;
  for (const std::string s : {"", "+", "1+", "(1", "1)", "a", "1++2"}) EXPECT_FALSE(matches(g, s)) << s;

  const std::string lark = R"(
start: greeting " " NAME
greeting: "hello" | "hi"
    | "hey"
NAME: /[A-Z][a-z]+/
)";
  Grammar l = parse_ebnf(lark);
  l.compile();
  EXPECT_TRUE(matches(l, "hello World"));
  EXPECT_TRUE(matches(l, "hey Bob"));
  EXPECT_FALSE(matches(l, "hello world"));
  EXPECT_FALSE(matches(l, "yo Bob"));
}

// fuzz_grammar found it: a nullable rule under a star called and returned
// forever (stack overflow). The matcher must stop and still match.
TEST(Grammar, NullableRuleInALoopTerminates) {
  auto c =
      compile_constraint(ConstraintKind::kGrammar,
                         "root ::= expr\nexpr ::= term ((\"+\" | \"-\") term*)\nterm ::= [2-9]* | \"(\" expr \")\"\n");
  Matcher m(&c->grammar());
  EXPECT_TRUE(m.feed("2+3"));
  EXPECT_TRUE(m.accepting());
  Matcher n(&c->grammar());
  EXPECT_TRUE(n.feed("(2-)+"));
  EXPECT_FALSE(n.feed("x"));
}

// fuzz_regex found it: a star next to a long counted repeat of a class that
// overlaps it has few DFA states per byte but NFA subsets hundreds of states
// wide; the subset construction ran for minutes under the state limits. The
// work budget turns it into a refusal; ordinary large constraints still fit.
TEST(Grammar, CompileWorkIsBounded) {
  try {
    compile_constraint(ConstraintKind::kRegex, "a*[a-z]{386}f");
    FAIL() << "expected a refusal";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("too large to compile"), std::string::npos) << e.what();
  }
  auto c = compile_constraint(ConstraintKind::kRegex, "[a-z]{386}f");
  Matcher m(&c->grammar());
  EXPECT_TRUE(m.feed(std::string(386, 'q') + "f"));
  EXPECT_TRUE(m.accepting());
}

TEST(Grammar, ErrorsAreNamed) {
  for (const auto& [text, word] :
       std::vector<std::pair<std::string, std::string>>{{"root ::= a\na ::= a \"x\" | \"y\"", "left-recursive"},
                                                        {"root ::= missing", "not defined"},
                                                        {"root ::= \"a", "unterminated"},
                                                        {"%import common.WS\nstart: WS", "directive"},
                                                        {"root ::= a\na ::= \"x\" a", "accepts no output"},
                                                        {"root ::= \"a\"\nroot ::= \"b\"", "twice"}}) {
    try {
      Grammar g = parse_ebnf(text);
      g.compile();
      ADD_FAILURE() << text << " compiled";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(word), std::string::npos) << text << ": " << e.what();
    }
  }
}

// The schema validator of this test: the subset of JSON Schema the
// compiler honours, written from the specification.
bool valid(const nlohmann::json& v, const nlohmann::json& s, const nlohmann::json& root) {
  if (s.is_boolean()) return s.get<bool>();
  if (s.contains("$ref")) {
    const std::string ref = s["$ref"];
    if (ref == "#") return valid(v, root, root);
    return valid(v, root["$defs"][ref.substr(8)], root);
  }
  if (s.contains("anyOf")) {
    for (const auto& b : s["anyOf"]) {
      if (valid(v, b, root)) return true;
    }
    return false;
  }
  if (s.contains("const") && v != s["const"]) return false;
  if (s.contains("enum") && std::find(s["enum"].begin(), s["enum"].end(), v) == s["enum"].end()) return false;
  if (s.contains("type")) {
    const std::string t = s["type"];
    if (t == "string") {
      if (!v.is_string()) return false;
      size_t n = 0;
      for (unsigned char c : v.get<std::string>()) n += (c & 0xC0) != 0x80;
      if (s.contains("minLength") && n < s["minLength"].get<size_t>()) return false;
      if (s.contains("maxLength") && n > s["maxLength"].get<size_t>()) return false;
    } else if (t == "integer" || t == "number") {
      if (!v.is_number() || (t == "integer" && !v.is_number_integer())) return false;
      const double x = v.get<double>();
      if (s.contains("minimum") && x < s["minimum"].get<double>()) return false;
      if (s.contains("maximum") && x > s["maximum"].get<double>()) return false;
      if (s.contains("exclusiveMinimum") && x <= s["exclusiveMinimum"].get<double>()) return false;
      if (s.contains("exclusiveMaximum") && x >= s["exclusiveMaximum"].get<double>()) return false;
    } else if (t == "boolean") {
      if (!v.is_boolean()) return false;
    } else if (t == "null") {
      if (!v.is_null()) return false;
    } else if (t == "array") {
      if (!v.is_array()) return false;
      if (s.contains("minItems") && v.size() < s["minItems"].get<size_t>()) return false;
      if (s.contains("maxItems") && v.size() > s["maxItems"].get<size_t>()) return false;
      for (const auto& x : v) {
        if (s.contains("items") && !valid(x, s["items"], root)) return false;
      }
    } else if (t == "object") {
      if (!v.is_object()) return false;
      for (const auto& r : s.value("required", nlohmann::json::array())) {
        if (!v.contains(r.get<std::string>())) return false;
      }
      for (const auto& [k, x] : v.items()) {
        if (s.contains("properties") && s["properties"].contains(k)) {
          if (!valid(x, s["properties"][k], root)) return false;
        } else if (s.contains("additionalProperties") && !valid(x, s["additionalProperties"], root)) {
          return false;
        }
      }
    }
  }
  return true;
}

TEST(JsonSchema, SamplesParseAndValidate) {
  const std::vector<std::string> schemas = {
      R"({"type":"object","properties":{"name":{"type":"string","maxLength":8},"age":{"type":"integer","minimum":0,"maximum":130}},"required":["name","age"],"additionalProperties":false})",
      R"({"type":"array","items":{"type":"number","minimum":-2.5,"maximum":3},"minItems":1,"maxItems":4})",
      R"({"type":"object","properties":{"a":{"type":"boolean"},"b":{"type":"null"},"c":{"enum":["x",1,null,[1]]},"d":{"const":{"k":"v"}}}})",
      R"({"$defs":{"node":{"type":"object","properties":{"v":{"type":"integer","exclusiveMinimum":-10,"exclusiveMaximum":10},"kids":{"type":"array","items":{"$ref":"#/$defs/node"},"maxItems":2}},"required":["v"]}},"$ref":"#/$defs/node"})",
      R"({"anyOf":[{"type":"string","minLength":2,"maxLength":3},{"type":"integer","minimum":100,"maximum":250}]})",
      R"({"type":"object","additionalProperties":{"type":"integer","minimum":5,"maximum":5}})",
      R"({"type":"integer","minimum":-1234,"maximum":-17})",
      R"({"type":"number","exclusiveMinimum":0,"maximum":1})",
  };
  std::mt19937 rng(11);
  for (const std::string& text : schemas) {
    const nlohmann::json schema = nlohmann::json::parse(text);
    Grammar g = json_schema_grammar(nlohmann::ordered_json::parse(text));
    g.compile();
    for (int i = 0; i < 60; ++i) {
      const std::string out = sample(g, rng, 120);
      nlohmann::json v;
      ASSERT_NO_THROW(v = nlohmann::json::parse(out)) << text << ": " << out;
      EXPECT_TRUE(valid(v, schema, schema)) << text << ": " << out;
    }
  }
}

TEST(JsonSchema, IntegerRangesExact) {
  for (const auto& [lo, hi] : std::vector<std::pair<int, int>>{{0, 0}, {-5, 5}, {7, 123}, {-300, -12}, {99, 1001}}) {
    nlohmann::json s = {{"type", "integer"}, {"minimum", lo}, {"maximum", hi}};
    Grammar g = json_schema_grammar(nlohmann::ordered_json(s));
    g.compile();
    for (int x = -1100; x <= 1100; ++x)
      EXPECT_EQ(matches(g, std::to_string(x)), x >= lo && x <= hi) << lo << ".." << hi << " " << x;
    EXPECT_FALSE(matches(g, "-0"));
    EXPECT_FALSE(matches(g, "007"));
  }
}

TEST(JsonSchema, ErrorsAreNamed) {
  for (const auto& [text, word] : std::vector<std::pair<std::string, std::string>>{
           {R"({"type":"string","minLength":5,"maxLength":2})", "maxLength"},
           {R"({"enum":[]})", "accepts no output"},
           {R"({"type":"object","patternProperties":{"a":{}}})", "patternProperties"},
           {R"({"type":"array","uniqueItems":true})", "uniqueItems"},
           {R"({"$ref":"#/$defs/none"})", "names no definition"},
           {R"({"type":"string","format":"hostname"})", "format"},
           {R"({"type":"string","pattern":"(a)\\1"})", "backreference"},
           {R"({"type":"integer","minimum":5,"maximum":4})", "no value"},
           {R"({"not":{"type":"string"}})", "'not'"},
           {R"({"type":"bogus"})", "bogus"}}) {
    try {
      Grammar g = json_schema_grammar(nlohmann::ordered_json::parse(text));
      g.compile();
      ADD_FAILURE() << text << " compiled";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(word), std::string::npos) << text << ": " << e.what();
    }
  }
  nlohmann::json big = {{"enum", nlohmann::json::array()}};
  for (int i = 0; i < 5000; ++i) big["enum"].push_back("value" + std::to_string(i));
  EXPECT_THROW(json_schema_grammar(nlohmann::ordered_json(big)), InputError);
}

TEST(TokenMask, EqualsBruteForce) {
  std::vector<std::string> pieces = {"",     "{",  "}",   "\"", "\"a", "a", "ab",  "\":", ":",    "1", "12",
                                     "true", "tr", ",\"", ",",  "x\"", " ", "b\"", "\"}", "null", "-", "0"};
  for (int b = 0; b < 128; ++b) pieces.push_back(std::string(1, static_cast<char>(b)));
  const VocabIndex vocab(pieces);
  auto c = compile_constraint(
      ConstraintKind::kJsonSchema,
      R"({"type":"object","properties":{"ab":{"type":"string","maxLength":3},"n":{"type":"integer"}},"required":["ab"]})");
  std::mt19937 rng(3);
  for (int trial = 0; trial < 20; ++trial) {
    Matcher m(&c->grammar());
    for (int step = 0; step < 30 && m.can_continue(m.current()); ++step) {
      auto pm = c->mask(&m, m.current(), vocab);
      const TokenMask* mask = &pm->bits;
      std::vector<int> allowed;
      for (size_t id = 0; id < pieces.size(); ++id) {
        Matcher probe = m;
        const bool ok = !pieces[id].empty() && probe.feed(pieces[id]);
        EXPECT_EQ(ok, ((*mask)[id / 64] >> (id % 64) & 1) != 0) << "token '" << pieces[id] << "'";
        if (ok) allowed.push_back(static_cast<int>(id));
      }
      ASSERT_FALSE(allowed.empty());
      ASSERT_TRUE(m.feed(pieces[static_cast<size_t>(allowed[rng() % allowed.size()])]));
    }
  }
  EXPECT_GT(c->stats().hits + c->stats().misses, 0u);
}

// apply() against feeding each token to a copy of the matcher, on a
// vocabulary whose size is no multiple of 64 and logits wider than it (a
// model's padded output rows): allowed logits pass unchanged, everything
// else is -inf, the end token only where the structure may end.
TEST(TokenMask, ApplyEqualsBruteForce) {
  std::mt19937 rng(11);
  std::vector<std::string> pieces;
  const std::string alphabet = "ab\"{}:,[] 019-.etrufalsn";
  for (int i = 0; i < 1000; ++i) {
    std::string p;
    for (size_t n = 1 + rng() % 4; n-- > 0;) p += alphabet[rng() % alphabet.size()];
    pieces.push_back(i % 97 == 0 ? std::string() : p);
  }
  const int32_t end_id = 999;
  pieces[end_id] = "";
  const VocabIndex vocab(pieces);
  const int32_t n_logits = 1003;
  auto c = compile_constraint(
      ConstraintKind::kJsonSchema,
      R"({"type":"object","properties":{"a":{"type":"array","items":{"type":"number"},"maxItems":3},"b":{"type":"boolean"}},"required":["a","b"]})");
  for (int trial = 0; trial < 10; ++trial) {
    TokenConstraint tc(c, &vocab, {end_id}, 1000);
    Matcher m(&c->grammar());
    for (int step = 0; step < 40; ++step) {
      std::vector<float> logits(n_logits), before;
      for (float& l : logits) l = static_cast<float>(rng() % 1000) / 100.0f;
      before = logits;
      if (!tc.apply(logits.data(), n_logits)) break;
      std::vector<int32_t> allowed;
      for (int32_t id = 0; id < n_logits; ++id) {
        bool ok = false;
        if (id == end_id) {
          ok = m.accepting();
        } else if (id < static_cast<int32_t>(pieces.size()) && !pieces[static_cast<size_t>(id)].empty()) {
          Matcher probe = m;
          ok = probe.feed(pieces[static_cast<size_t>(id)]);
        }
        if (ok) {
          EXPECT_EQ(logits[static_cast<size_t>(id)], before[static_cast<size_t>(id)]) << "id " << id;
          allowed.push_back(id);
        } else {
          EXPECT_EQ(logits[static_cast<size_t>(id)], -INFINITY)
              << "id " << id << " '" << (id < 1000 ? pieces[static_cast<size_t>(id)] : "") << "'";
        }
      }
      ASSERT_FALSE(allowed.empty());
      const int32_t id = allowed[rng() % allowed.size()];
      if (id == end_id) break;
      tc.accept(id);
      ASSERT_TRUE(m.feed(pieces[static_cast<size_t>(id)]));
    }
  }
}

TEST(TokenMask, ClosesWithinBudget) {
  std::vector<std::string> pieces;
  for (int b = 0; b < 256; ++b) pieces.push_back(std::string(1, static_cast<char>(b)));
  pieces.push_back("");  // the end token
  const VocabIndex vocab(pieces);
  auto c = compile_constraint(
      ConstraintKind::kJsonSchema,
      R"({"type":"object","properties":{"s":{"type":"string"},"t":{"type":"array","items":{"type":"string"}}},"required":["s","t"]})");
  std::mt19937 rng(5);
  for (int budget : {17, 24, 40}) {  // the shortest answer has 15 bytes
    TokenConstraint tc(c, &vocab, {256}, budget);
    std::string out;
    for (int i = 0; i < budget; ++i) {
      std::vector<float> logits(257, 0.0f);
      logits[256] = -INFINITY;  // a model that never ends by itself
      logits['"'] = -20.0f;     // and avoids closing strings
      ASSERT_TRUE(tc.apply(logits.data(), 257));
      std::vector<int> ok;
      for (int id = 0; id < 257; ++id) {
        if (logits[id] != -INFINITY && (logits[id] >= 0.0f || ok.empty())) ok.push_back(id);
      }
      const int id = ok[rng() % ok.size()];
      if (id == 256) break;
      tc.accept(id);
      out += pieces[static_cast<size_t>(id)];
    }
    EXPECT_TRUE(nlohmann::json::accept(out)) << budget << ": " << out;
  }
}

// A recursive grammar (the server test's arithmetic) under a budget, with
// multi-byte tokens that open and close several levels at once and a model
// that never ends by itself: every answer must be complete when the tokens
// run out.
TEST(TokenMask, RecursiveGrammarClosesWithinBudget) {
  std::vector<std::string> pieces;
  for (int b = 0; b < 256; ++b) pieces.push_back(std::string(1, static_cast<char>(b)));
  for (const char* p : {"((", "(((", "))", ")))", "+(", "*(", ")+", ")*", "1+", "2*", "(1", "9)", "))*", "+((", "(5)"})
    pieces.push_back(p);
  const int32_t end_id = static_cast<int32_t>(pieces.size());
  pieces.push_back("");
  const VocabIndex vocab(pieces);
  auto c =
      compile_constraint(ConstraintKind::kGrammar,
                         "root ::= expr\nexpr ::= term ((\"+\" | \"*\") term){0,3}\nterm ::= [0-9] | \"(\" expr \")\"");
  std::mt19937 rng(7);
  const int32_t n = static_cast<int32_t>(pieces.size());
  for (int trial = 0; trial < 300; ++trial) {
    const int budget = 10 + static_cast<int>(rng() % 60);
    TokenConstraint tc(c, &vocab, {end_id}, budget);
    Matcher m(&c->grammar());
    std::string out;
    for (int i = 0; i < budget; ++i) {
      std::vector<float> logits(static_cast<size_t>(n));
      for (float& l : logits) l = static_cast<float>(rng() % 1000) / 100.0f;
      logits[static_cast<size_t>(end_id)] = -INFINITY;  // never ends by itself
      ASSERT_TRUE(tc.apply(logits.data(), n));
      std::vector<int32_t> ok;
      for (int32_t id = 0; id < n; ++id) {
        if (logits[static_cast<size_t>(id)] != -INFINITY) ok.push_back(id);
      }
      ASSERT_FALSE(ok.empty());
      const int32_t id = ok[rng() % ok.size()];
      if (id == end_id) break;
      tc.accept(id);
      out += pieces[static_cast<size_t>(id)];
      ASSERT_TRUE(m.feed(pieces[static_cast<size_t>(id)]));
    }
    EXPECT_TRUE(m.accepting()) << "budget " << budget << ": " << out;
  }
}

}  // namespace
}  // namespace parallm::constrain
