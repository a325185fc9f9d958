// EBNF / Lark grammar parser (see ebnf_parser.h): rules are declared by a
// first pass over the rule heads, so bodies may name rules defined later.
#include "constrain/ebnf_parser.h"

#include <cctype>
#include <vector>

#include "constrain/regex_parser.h"
#include "util/check.h"

namespace parallm::constrain {
namespace {

bool name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-'; }

class EbnfParser {
 public:
  explicit EbnfParser(const std::string& t) : t_(t) {}

  Grammar parse() {
    if (t_.size() > 1'000'000) throw InputError("grammar is longer than 1000000 bytes");
    // Pass 1: rule heads (name followed by ::= or :), in order.
    std::vector<std::pair<std::string, size_t>> heads;  // name, body offset
    for (i_ = 0; skip_space(true), i_ < t_.size();) {
      if (t_[i_] == '%') fail("uses the Lark directive '" + word_at(i_) + "' (directives are not supported)");
      const size_t start = i_;
      std::string name = read_name();
      if (name.empty()) fail("expects a rule name");
      skip_space(false);
      if (t_.compare(i_, 3, "::=") == 0) {
        i_ += 3;
      } else if (at(':')) {
        ++i_;
      } else if (at('.') || at('{')) {
        fail("rule '" + name + "' uses a Lark priority or template (not supported)");
      } else {
        i_ = start;
        fail("expects '::=' or ':' after rule name '" + name + "'");
      }
      if (g_.find_rule(name) >= 0) fail("defines rule '" + name + "' twice");
      g_.add_rule(name);
      heads.push_back({name, i_});
      skip_body();
    }
    if (heads.empty()) throw InputError("grammar has no rules");
    for (const auto& [name, body] : heads) {
      i_ = body;
      const int32_t r = g_.find_rule(name);
      g_.define(r, alternation());
      skip_space(false);
      if (i_ < t_.size() && t_[i_] != '\n' && !(t_[i_] == '\r')) fail("has unexpected text in rule '" + name + "'");
    }
    int32_t root = g_.find_rule("root");
    if (root < 0) root = g_.find_rule("start");
    g_.set_root(root < 0 ? 0 : root);
    return std::move(g_);
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    size_t line = 1;
    for (size_t k = 0; k < i_ && k < t_.size(); ++k) line += t_[k] == '\n';
    throw InputError("grammar " + what + " (line " + std::to_string(line) + ")");
  }
  bool at(char c) const { return i_ < t_.size() && t_[i_] == c; }
  std::string word_at(size_t k) const {
    size_t e = k + 1;
    while (e < t_.size() && name_char(t_[e])) ++e;
    return t_.substr(k, e - k);
  }

  void skip_comment() {
    while (i_ < t_.size() && t_[i_] != '\n') ++i_;
  }
  // Spaces and comments; newlines too when `newlines` (between rules), or
  // when the next line continues the body (starts with '|' or is indented
  // and holds no rule head).
  void skip_space(bool newlines) {
    while (i_ < t_.size()) {
      const char c = t_[i_];
      if (c == '#' || (c == '/' && i_ + 1 < t_.size() && t_[i_ + 1] == '/')) {
        skip_comment();
      } else if (c == ' ' || c == '\t' || c == '\r' || (newlines && c == '\n')) {
        ++i_;
      } else if (c == '\n' && continues(i_ + 1)) {
        ++i_;
      } else {
        break;
      }
    }
  }
  // Whether the line at k continues the current rule's body.
  bool continues(size_t k) const {
    while (k < t_.size() && (t_[k] == ' ' || t_[k] == '\t' || t_[k] == '\r' || t_[k] == '\n')) ++k;
    if (k >= t_.size()) return false;
    if (t_[k] == '|') return true;
    // A rule head: name then ::= or ':'.
    size_t e = k;
    while (e < t_.size() && name_char(t_[e])) ++e;
    if (e == k) return t_[k] != '%';
    size_t f = e;
    while (f < t_.size() && (t_[f] == ' ' || t_[f] == '\t')) ++f;
    if (t_.compare(f, 3, "::=") == 0 || (f < t_.size() && t_[f] == ':')) return false;
    return true;
  }
  void skip_body() {
    // Up to the next rule head, skipping strings, classes and regexes.
    while (i_ < t_.size()) {
      const char c = t_[i_];
      if (c == '"' || c == '\'') {
        read_string();
      } else if (c == '[') {
        read_class_text();
      } else if (c == '/' && !(i_ + 1 < t_.size() && t_[i_ + 1] == '/')) {
        read_regex_text();
      } else if (c == '\n') {
        if (!continues(i_ + 1)) {
          ++i_;
          return;
        }
        ++i_;
      } else if (c == '#' || c == '/') {
        skip_comment();
      } else {
        ++i_;
      }
    }
  }

  std::string read_name() {
    const size_t s = i_;
    while (i_ < t_.size() && name_char(t_[i_])) ++i_;
    return t_.substr(s, i_ - s);
  }

  uint32_t hex(size_t n) {
    uint32_t v = 0;
    for (size_t k = 0; k < n; ++k, ++i_) {
      if (i_ >= t_.size() || !std::isxdigit(static_cast<unsigned char>(t_[i_]))) fail("has a bad hex escape");
      const char c = t_[i_];
      v = v * 16 +
          static_cast<uint32_t>(std::isdigit(static_cast<unsigned char>(c)) ? c - '0' : std::tolower(c) - 'a' + 10);
    }
    return v;
  }
  static std::string utf8(uint32_t cp) {
    std::string o;
    if (cp < 0x80) {
      o += static_cast<char>(cp);
    } else if (cp < 0x800) {
      o += static_cast<char>(0xC0 | (cp >> 6)), o += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      o += static_cast<char>(0xE0 | (cp >> 12)), o += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      o += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      o += static_cast<char>(0xF0 | (cp >> 18)), o += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      o += static_cast<char>(0x80 | ((cp >> 6) & 0x3F)), o += static_cast<char>(0x80 | (cp & 0x3F));
    }
    return o;
  }

  std::string read_string() {
    const char q = t_[i_++];
    std::string out;
    while (true) {
      if (i_ >= t_.size() || t_[i_] == '\n') fail("has an unterminated string");
      const char c = t_[i_++];
      if (c == q) break;
      if (c != '\\') {
        out += c;
        continue;
      }
      if (i_ >= t_.size()) fail("has an unterminated string");
      const char e = t_[i_++];
      switch (e) {
        case 'n':
          out += '\n';
          break;
        case 't':
          out += '\t';
          break;
        case 'r':
          out += '\r';
          break;
        case '0':
          out += '\0';
          break;
        case 'x':
          out += static_cast<char>(hex(2));
          break;
        case 'u':
          out += utf8(hex(4));
          break;
        case 'U':
          out += utf8(hex(8));
          break;
        default:
          out += e;
      }
    }
    if (at('i') && !(i_ + 1 < t_.size() && name_char(t_[i_ + 1])))
      fail("uses a case-insensitive string (not supported)");
    return out;
  }
  std::string read_class_text() {
    const size_t s = i_++;
    if (at('^')) ++i_;
    if (at(']')) ++i_;
    while (i_ < t_.size() && t_[i_] != ']') {
      if (t_[i_] == '\\') ++i_;
      if (t_[i_] == '\n') fail("has an unterminated character class");
      ++i_;
    }
    if (!at(']')) fail("has an unterminated character class");
    ++i_;
    return t_.substr(s, i_ - s);
  }
  std::string read_regex_text() {
    ++i_;
    std::string out;
    while (i_ < t_.size() && t_[i_] != '/') {
      if (t_[i_] == '\n') fail("has an unterminated /regex/");
      if (t_[i_] == '\\' && i_ + 1 < t_.size()) {
        if (t_[i_ + 1] == '/') {
          out += '/';
          i_ += 2;
          continue;
        }
        out += t_[i_++];
      }
      out += t_[i_++];
    }
    if (!at('/')) fail("has an unterminated /regex/");
    ++i_;
    if (i_ < t_.size() && std::isalpha(static_cast<unsigned char>(t_[i_]))) fail("uses /regex/ flags (not supported)");
    return out;
  }

  ExprPtr regex(const std::string& text) {
    try {
      return parse_regex(text);
    } catch (const InputError& e) {
      fail(std::string("has a bad pattern: ") + e.what());
    }
  }

  ExprPtr alternation() {
    std::vector<ExprPtr> alts{sequence()};
    skip_space(false);
    while (at('|')) {
      ++i_;
      alts.push_back(sequence());
      skip_space(false);
    }
    return alt(std::move(alts));
  }
  ExprPtr sequence() {
    std::vector<ExprPtr> items;
    while (true) {
      skip_space(false);
      if (i_ >= t_.size() || at('|') || at(')') || at('\n')) break;
      items.push_back(quantified(atom()));
    }
    return seq(std::move(items));
  }
  ExprPtr quantified(ExprPtr e) {
    while (true) {
      if (at('*')) {
        ++i_, e = repeat(e, 0, -1);
      } else if (at('+')) {
        ++i_, e = repeat(e, 1, -1);
      } else if (at('?')) {
        ++i_, e = optional(e);
      } else if (at('{')) {
        ++i_;
        auto num = [&]() -> int32_t {
          skip_space(false);
          int64_t n = 0;
          const size_t s = i_;
          while (i_ < t_.size() && std::isdigit(static_cast<unsigned char>(t_[i_]))) {
            n = n * 10 + (t_[i_++] - '0');
            if (n > kMaxRegexRepeat) fail("repeats more than " + std::to_string(kMaxRegexRepeat) + " times");
          }
          skip_space(false);
          return i_ == s ? -1 : static_cast<int32_t>(n);
        };
        int32_t lo = num(), hi = lo;
        if (at(',')) ++i_, hi = num();
        if (lo < 0) lo = 0;
        if (!at('}')) fail("has a bad {m,n} repetition");
        ++i_;
        if (hi >= 0 && hi < lo) fail("has a repetition {m,n} with n < m");
        e = repeat(e, lo, hi);
      } else {
        return e;
      }
    }
  }
  ExprPtr atom() {
    const char c = t_[i_];
    if (c == '"' || c == '\'') {
      std::string s = read_string();
      // Lark's "a".."z": a character range.
      if (t_.compare(i_, 2, "..") == 0) {
        i_ += 2;
        if (!at('"') && !at('\'')) fail("has a bad \"a\"..\"z\" range");
        const std::string e = read_string();
        return regex("[" + s + "-" + e + "]");
      }
      return literal(s);
    }
    if (c == '[') return regex(read_class_text());
    if (c == '/') return regex(read_regex_text());
    if (c == '(') {
      ++i_;
      ExprPtr e = alternation();
      skip_space(false);
      if (!at(')')) fail("has an unclosed '('");
      ++i_;
      return e;
    }
    if (c == '.') {
      ++i_;
      return regex(".");
    }
    if (name_char(c)) {
      const std::string name = read_name();
      const int32_t r = g_.find_rule(name);
      if (r < 0) fail("uses rule '" + name + "', which is not defined");
      return rule_ref(r);
    }
    fail(std::string("has an unexpected '") + c + "'");
  }

  const std::string& t_;
  size_t i_ = 0;
  Grammar g_;
};

}  // namespace

Grammar parse_ebnf(const std::string& text) { return EbnfParser(text).parse(); }

}  // namespace parallm::constrain
