// Recursive-descent regex parser (see regex_parser.h): alternation >
// concatenation > quantified atom.
#include "constrain/regex_parser.h"

#include <vector>

#include "util/check.h"

namespace parallm::constrain {
namespace {

using Ranges = std::vector<std::pair<uint32_t, uint32_t>>;

const Ranges kDigit = {{'0', '9'}};
const Ranges kWord = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
const Ranges kSpace = {{'\t', '\r'}, {' ', ' '}};

class RegexParser {
 public:
  explicit RegexParser(const std::string& p) : p_(p) {}

  ExprPtr parse() {
    if (p_.size() > 100000) fail("is longer than 100000 bytes");
    if (at('^')) ++i_;
    ExprPtr e = alternation();
    if (i_ < p_.size()) fail(p_[i_] == ')' ? "has an unmatched ')'" : "could not be parsed");
    return e;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw InputError("regex " + what + " at offset " + std::to_string(i_));
  }
  bool at(char c) const { return i_ < p_.size() && p_[i_] == c; }

  ExprPtr alternation() {
    std::vector<ExprPtr> alts{concatenation()};
    while (at('|')) {
      ++i_;
      alts.push_back(concatenation());
    }
    return alt(std::move(alts));
  }

  ExprPtr concatenation() {
    std::vector<ExprPtr> items;
    while (i_ < p_.size() && !at('|') && !at(')')) {
      if (at('$')) {  // only at the very end (or before ')' / '|' of the end)
        ++i_;
        if (i_ != p_.size()) fail("has '$' before its end (anchors inside the pattern are not supported)");
        break;
      }
      if (at('^')) fail("has '^' after its start (anchors inside the pattern are not supported)");
      items.push_back(quantified(atom()));
    }
    return seq(std::move(items));
  }

  int32_t number() {
    int64_t n = 0;
    const size_t start = i_;
    while (i_ < p_.size() && p_[i_] >= '0' && p_[i_] <= '9') {
      n = n * 10 + (p_[i_++] - '0');
      if (n > kMaxRegexRepeat) fail("repeats more than " + std::to_string(kMaxRegexRepeat) + " times");
    }
    return i_ == start ? -1 : static_cast<int32_t>(n);
  }

  ExprPtr quantified(ExprPtr e) {
    while (i_ < p_.size()) {
      int32_t lo, hi;
      const char c = p_[i_];
      if (c == '*') {
        lo = 0, hi = -1, ++i_;
      } else if (c == '+') {
        lo = 1, hi = -1, ++i_;
      } else if (c == '?') {
        lo = 0, hi = 1, ++i_;
      } else if (c == '{') {
        const size_t save = i_++;
        lo = number();
        hi = lo;
        if (at(',')) {
          ++i_;
          hi = number();
          if (lo < 0) lo = 0;
        }
        if (!at('}') || (lo < 0 && hi < 0)) {  // not a quantifier: a literal '{' (as Python reads it)
          i_ = save;
          return e;
        }
        ++i_;
        if (hi >= 0 && hi < lo) fail("has a repetition {m,n} with n < m");
      } else {
        return e;
      }
      if (at('?') || at('+')) ++i_;  // lazy / possessive: the same language
      e = repeat(e, lo, hi);
    }
    return e;
  }

  uint32_t hex(size_t n) {
    uint32_t v = 0;
    for (size_t k = 0; k < n; ++k) {
      if (i_ >= p_.size() || !isxdigit(static_cast<unsigned char>(p_[i_]))) fail("has a bad hex escape");
      const char c = p_[i_++];
      v = v * 16 + static_cast<uint32_t>(isdigit(static_cast<unsigned char>(c)) ? c - '0' : (tolower(c) - 'a' + 10));
    }
    return v;
  }

  // One UTF-8 code point of the pattern.
  uint32_t code_point() {
    const unsigned char c = static_cast<unsigned char>(p_[i_]);
    const int n = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    if (c >= 0x80 && c < 0xC0) fail("is not valid UTF-8");
    if (i_ + static_cast<size_t>(n) > p_.size()) fail("is not valid UTF-8");
    uint32_t cp = n == 1 ? c : n == 2 ? (c & 0x1F) : n == 3 ? (c & 0x0F) : (c & 0x07);
    for (int k = 1; k < n; ++k) {
      const unsigned char d = static_cast<unsigned char>(p_[i_ + static_cast<size_t>(k)]);
      if ((d & 0xC0) != 0x80) fail("is not valid UTF-8");
      cp = (cp << 6) | (d & 0x3F);
    }
    i_ += static_cast<size_t>(n);
    return cp;
  }

  // After a backslash: a class (d w s, upper-case negated) into `ranges`
  // (returns true), or one code point into `cp`.
  bool escape(Ranges* ranges, bool* negated, uint32_t* cp, bool in_class) {
    if (i_ >= p_.size()) fail("ends with a lone backslash");
    const char c = p_[i_++];
    *negated = false;
    switch (c) {
      case 'd':
        *ranges = kDigit;
        return true;
      case 'w':
        *ranges = kWord;
        return true;
      case 's':
        *ranges = kSpace;
        return true;
      case 'D':
        *ranges = kDigit, *negated = true;
        return true;
      case 'W':
        *ranges = kWord, *negated = true;
        return true;
      case 'S':
        *ranges = kSpace, *negated = true;
        return true;
      case 'n':
        *cp = '\n';
        return false;
      case 't':
        *cp = '\t';
        return false;
      case 'r':
        *cp = '\r';
        return false;
      case 'f':
        *cp = '\f';
        return false;
      case 'v':
        *cp = '\v';
        return false;
      case '0':
        *cp = 0;
        return false;
      case 'x':
        *cp = hex(2);
        return false;
      case 'u':
        if (at('{')) {
          ++i_;
          uint32_t v = 0;
          int n = 0;
          while (i_ < p_.size() && isxdigit(static_cast<unsigned char>(p_[i_])) && n < 6) v = v * 16 + hex(1), ++n;
          if (!at('}') || n == 0) fail("has a bad \\u{...} escape");
          ++i_;
          *cp = v;
        } else {
          *cp = hex(4);
        }
        if (*cp > 0x10FFFF || (*cp >= 0xD800 && *cp <= 0xDFFF)) fail("escapes a value that is not a code point");
        return false;
      case 'b':
        if (in_class) {
          *cp = '\b';
          return false;
        }
        fail("uses \\b (word boundaries are not supported)");
      default:
        if ((c >= '1' && c <= '9') || c == 'k') fail("uses a backreference (not supported)");
        if (isalnum(static_cast<unsigned char>(c))) fail(std::string("uses the unsupported escape \\") + c);
        --i_;
        *cp = code_point();
        return false;
    }
  }

  ExprPtr klass() {
    ++i_;  // '['
    bool negate = false;
    if (at('^')) negate = true, ++i_;
    Ranges ranges;
    std::vector<Ranges> negated_parts;
    bool first = true;
    while (true) {
      if (i_ >= p_.size()) fail("has an unterminated character class");
      if (at(']') && !first) {
        ++i_;
        break;
      }
      first = false;
      if (p_.compare(i_, 2, "[:") == 0) fail("uses a POSIX class [:...:] (not supported)");
      uint32_t lo;
      if (at('\\')) {
        ++i_;
        Ranges cls;
        bool neg;
        if (escape(&cls, &neg, &lo, true)) {
          if (neg) {
            for (auto r : complement(cls)) ranges.push_back(r);
          } else {
            for (auto r : cls) ranges.push_back(r);
          }
          continue;
        }
      } else {
        lo = code_point();
      }
      uint32_t hi = lo;
      if (at('-') && i_ + 1 < p_.size() && p_[i_ + 1] != ']') {
        ++i_;
        if (at('\\')) {
          ++i_;
          Ranges cls;
          bool neg;
          if (escape(&cls, &neg, &hi, true)) fail("has a class escape as a range end");
        } else {
          hi = code_point();
        }
        if (hi < lo) fail("has a reversed range in a character class");
      }
      ranges.push_back({lo, hi});
    }
    ranges = normalize(ranges);
    if (negate) ranges = complement(ranges);
    return utf8_ranges(ranges);
  }

  ExprPtr atom() {
    const char c = p_[i_];
    if (c == '(') {
      ++i_;
      if (at('?')) {
        ++i_;
        if (at(':')) {
          ++i_;
        } else if (at('P') && i_ + 1 < p_.size() && p_[i_ + 1] == '<') {
          i_ += 2;
          while (i_ < p_.size() && p_[i_] != '>') ++i_;
          if (!at('>')) fail("has an unterminated group name");
          ++i_;
        } else if (at('<') && i_ + 1 < p_.size() && p_[i_ + 1] != '=' && p_[i_ + 1] != '!') {
          ++i_;
          while (i_ < p_.size() && p_[i_] != '>') ++i_;
          if (!at('>')) fail("has an unterminated group name");
          ++i_;
        } else if (at('=') || at('!') || at('<')) {
          fail("uses lookaround (not supported)");
        } else {
          fail("uses an inline flag or group extension (?...) that is not supported");
        }
      }
      ExprPtr e = alternation();
      if (!at(')')) fail("has an unclosed '('");
      ++i_;
      return e;
    }
    if (c == '[') return klass();
    if (c == '.') {
      ++i_;
      return utf8_ranges(complement({{'\n', '\n'}}));
    }
    if (c == '*' || c == '+' || c == '?') fail(std::string("has a quantifier '") + c + "' with nothing to repeat");
    if (c == '\\') {
      ++i_;
      Ranges cls;
      bool neg;
      uint32_t cp;
      if (escape(&cls, &neg, &cp, false)) return utf8_ranges(neg ? complement(cls) : cls);
      return utf8_range(cp, cp);
    }
    const uint32_t cp = code_point();
    return utf8_range(cp, cp);
  }

  const std::string& p_;
  size_t i_ = 0;
};

}  // namespace

ExprPtr parse_regex(const std::string& pattern) { return RegexParser(pattern).parse(); }

}  // namespace parallm::constrain
