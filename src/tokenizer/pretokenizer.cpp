// PCRE2-backed regex splitting (see pretokenizer.h). The compiled code is
// shared and read-only; match data is created per call, so split() is safe
// to call from several threads at once.
#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer/pretokenizer.h"

#include <pcre2.h>

#include <algorithm>
#include <cstdint>

#include "tokenizer/unicode.h"
#include "util/check.h"

namespace parallm {

// GPT-2's pattern as the Hugging Face ByteLevel pre-tokenizer writes it.
const char* const kGpt2Pattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
// Llama 3 and Qwen2 tokenizer.json Split patterns (digits in groups of up to
// three for Llama 3, one by one for Qwen2).
const char* const kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char* const kQwen2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

const char* const kPunctuationChar = R"([\p{P}\x21-\x2F\x3A-\x40\x5B-\x60\x7B-\x7E])";

namespace {

// Deeper nesting is refused, which also bounds the recursion below (the
// pattern is untrusted input; real ones nest at most twice).
constexpr int kMaxClassDepth = 16;

// The end (index of the closing ']') of the class opening at `open`, nested
// classes, escapes and POSIX [:name:] skipped; npos when unclosed.
size_t class_end(const std::string& p, size_t open, int depth = 0) {
  if (depth > kMaxClassDepth) {
    throw InputError("pre-tokenizer regex nests character classes deeper than " + std::to_string(kMaxClassDepth));
  }
  size_t i = open + 1;
  if (i < p.size() && p[i] == '^') ++i;
  if (i < p.size() && p[i] == ']') ++i;  // a leading ] is literal
  for (; i < p.size(); ++i) {
    if (p[i] == '\\') {
      ++i;
    } else if (p[i] == '[' && i + 1 < p.size() && p[i + 1] == ':' && p.find(":]", i + 2) != std::string::npos) {
      i = p.find(":]", i + 2) + 1;
    } else if (p[i] == '[') {
      i = class_end(p, i, depth + 1);
      if (i == std::string::npos) return i;
    } else if (p[i] == ']') {
      return i;
    }
  }
  return std::string::npos;
}

std::string translate_class(const std::string& p, size_t open, size_t close);

// After "\\p" or "\\P" (p[i] is the letter): a script name, \p{Han}, means
// the Script property in Oniguruma but Script_Extensions in PCRE2 10.40+
// (where "。" is Han too), so it becomes \p{sc:Han}. General categories
// (one or two letters, L&) and PCRE2's own X.. properties stay as they are.
void script_property(const std::string& p, size_t& i, std::string& out) {
  if ((p[i] != 'p' && p[i] != 'P') || i + 1 >= p.size() || p[i + 1] != '{') return;
  const size_t close = p.find('}', i + 2);
  if (close == std::string::npos) return;
  std::string name = p.substr(i + 2, close - i - 2);
  std::string negate;
  if (!name.empty() && name[0] == '^') negate = "^", name.erase(0, 1);
  const bool category = name.size() <= 2 || name == "Any" || name[0] == 'X' || name.find(':') != std::string::npos;
  out += '{' + negate + (category ? "" : "sc:") + name + '}';
  i = close;
}

// The members of a class body with nested (non-negated) classes merged in.
std::string flatten_members(const std::string& p, size_t begin, size_t end) {
  std::string out;
  for (size_t i = begin; i < end; ++i) {
    if (p[i] == '\\' && i + 1 < end) {
      out.append(p, i, 2);
      ++i;
      script_property(p, i, out);
    } else if (p[i] == '[' && i + 1 < end && p[i + 1] == ':' && p.find(":]", i + 2) < end) {
      const size_t close = p.find(":]", i + 2);
      out.append(p, i, close + 2 - i);
      i = close + 1;
    } else if (p[i] == '[') {
      const size_t close = class_end(p, i);
      if (p[i + 1] == '^') throw InputError("pre-tokenizer regex has a negated class inside a class: " + p);
      out += flatten_members(p, i + 1, close);
      i = close;
    } else {
      out += p[i];
    }
  }
  return out;
}

// One Oniguruma class [open, close] in PCRE2: nested classes are unions, and
// `X&&Y` (intersection) becomes (?:(?=Y)X).
std::string translate_class(const std::string& p, size_t open, size_t close) {
  size_t body = open + 1;
  const bool negated = body < close && p[body] == '^';
  if (negated) ++body;
  // Split the body at top-level "&&".
  std::vector<std::pair<size_t, size_t>> parts;
  size_t part_start = body;
  for (size_t i = body; i < close; ++i) {
    if (p[i] == '\\') {
      ++i;
    } else if (p[i] == '[') {
      if (i + 1 < close && p[i + 1] == ':' && p.find(":]", i + 2) < close) {
        i = p.find(":]", i + 2) + 1;
      } else {
        i = class_end(p, i);
      }
    } else if (p[i] == '&' && i + 1 < close && p[i + 1] == '&') {
      parts.push_back({part_start, i});
      part_start = i + 2;
      ++i;
    }
  }
  parts.push_back({part_start, close});
  auto part_class = [&](std::pair<size_t, size_t> part, bool negate) {
    const auto [b, e] = part;
    if (!negate && e > b + 1 && p[b] == '[' && p[b + 1] != ':' && class_end(p, b) == e - 1) {
      return translate_class(p, b, e - 1);
    }
    return std::string("[") + (negate ? "^" : "") + flatten_members(p, b, e) + "]";
  };
  if (parts.size() == 1) return part_class(parts[0], negated);
  if (negated) throw InputError("pre-tokenizer regex has a negated class intersection (unsupported): " + p);
  std::string out = "(?:";
  for (size_t k = 1; k < parts.size(); ++k) out += "(?=" + part_class(parts[k], false) + ")";
  return out + part_class(parts[0], false) + ")";
}

}  // namespace

std::string onig_to_pcre2(const std::string& pattern) {
  std::string out;
  out.reserve(pattern.size());
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {  // an escape is copied whole (\p{..} reads on as text)
      out.append(pattern, i, 2);
      ++i;
      script_property(pattern, i, out);
    } else if (c == '[') {
      const size_t close = class_end(pattern, i);
      if (close == std::string::npos) return out + pattern.substr(i);  // let PCRE2 report it
      out += translate_class(pattern, i, close);
      i = close;
    } else {
      out += c;
    }
  }
  return out;
}

SplitBehavior parse_split_behavior(const std::string& name) {
  if (name == "Removed") return SplitBehavior::kRemoved;
  if (name == "Isolated") return SplitBehavior::kIsolated;
  if (name == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
  if (name == "MergedWithNext") return SplitBehavior::kMergedWithNext;
  if (name == "Contiguous") return SplitBehavior::kContiguous;
  throw InputError("unsupported tokenizer.json Split behavior '" + name +
                   "' (supported: Removed, Isolated, MergedWithPrevious, MergedWithNext, "
                   "Contiguous)");
}

struct Pretokenizer::Compiled {
  pcre2_code* code = nullptr;
  SplitBehavior behavior = SplitBehavior::kIsolated;
  bool invert = false;
  bool byte_level_text = false;
  ~Compiled() { pcre2_code_free(code); }
};

namespace {

std::vector<SplitRule> isolated_rules(const std::vector<std::string>& patterns) {
  std::vector<SplitRule> rules;
  for (const auto& pattern : patterns) rules.push_back({pattern, SplitBehavior::kIsolated, false});
  return rules;
}

}  // namespace

Pretokenizer::Pretokenizer(const std::vector<std::string>& patterns) : Pretokenizer(isolated_rules(patterns)) {}

Pretokenizer::Pretokenizer(const std::vector<SplitRule>& rules) {
  for (const auto& rule : rules) {
    auto compiled = std::make_unique<Compiled>();
    compiled->behavior = rule.behavior;
    compiled->invert = rule.invert;
    compiled->byte_level_text = rule.byte_level_text;
    int error_code = 0;
    PCRE2_SIZE error_offset = 0;
    compiled->code =
        pcre2_compile(reinterpret_cast<PCRE2_SPTR>(rule.pattern.data()), rule.pattern.size(),
                      PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &error_code, &error_offset, nullptr);
    if (compiled->code == nullptr) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(error_code, message, sizeof(message));
      throw InputError("pre-tokenizer regex does not compile at offset " + std::to_string(error_offset) + ": " +
                       reinterpret_cast<const char*>(message));
    }
    // JIT is an optimisation only: fall back to the interpreter when absent.
    pcre2_jit_compile(compiled->code, PCRE2_JIT_COMPLETE);
    rules_.push_back(std::move(compiled));
  }
}

Pretokenizer::~Pretokenizer() = default;

namespace {

// A stretch of the text: a match of the rule's regex or a gap between two.
struct Segment {
  size_t start = 0, end = 0;
  bool match = false;
};

// Cuts `text` into matches and the gaps between them, in order. An empty
// match is kept as an empty segment: it cuts the gap around it (SuperBPE's
// `(?=(\d{3})+(?!\d))` splits "1234567" into "1", "234", "567") but never
// becomes a piece; the search then steps one character on, as Hugging Face's
// Oniguruma iteration does.
void find_segments(pcre2_code* code, pcre2_match_data* match, std::string_view text, std::vector<Segment>& out) {
  out.clear();
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t pos = 0;      // where the next search starts
  size_t emitted = 0;  // end of the last segment pushed
  while (pos < text.size()) {
    int rc = pcre2_match(code, subject, text.size(), pos, 0, match, nullptr);
    if (rc < 0) break;  // no more matches (or a matching limit): the rest is a gap
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(match);
    size_t start = ov[0], end = ov[1];
    if (start < emitted || end < start) break;  // \K or a lookbehind reached back: treat the rest as a gap
    if (start > emitted) out.push_back({emitted, start, false});
    out.push_back({start, end, true});
    emitted = end;
    pos = end;
    if (end == start) {  // empty match: step past one character and keep searching
      ++pos;
      while (pos < text.size() && (static_cast<uint8_t>(text[pos]) & 0xC0) == 0x80) ++pos;
    }
  }
  if (emitted < text.size()) out.push_back({emitted, text.size(), false});
}

// The text as Hugging Face's ByteLevel leaves it: each byte of `raw` becomes
// its GPT-2 byte-to-unicode char. raw_offset[i] is the byte of `raw` that
// mapped byte i belongs to (size + 1 entries, so the end maps too).
void map_byte_level(std::string_view raw, std::string& mapped, std::vector<uint32_t>& raw_offset) {
  mapped.clear();
  raw_offset.clear();
  for (size_t i = 0; i < raw.size(); ++i) {
    const size_t before = mapped.size();
    utf8_append(mapped, byte_to_unicode(static_cast<uint8_t>(raw[i])));
    raw_offset.insert(raw_offset.end(), mapped.size() - before, static_cast<uint32_t>(i));
  }
  raw_offset.push_back(static_cast<uint32_t>(raw.size()));
}

// Joins or drops segments as the behaviour says (the same folds as Hugging
// Face's NormalizedString::split), then appends the pieces of `text`.
void apply_behavior(SplitBehavior behavior, const std::vector<Segment>& segs, std::string_view text,
                    std::vector<Segment>& kept, std::vector<std::string_view>& out) {
  if (behavior == SplitBehavior::kIsolated) {  // the common case: every non-empty segment as it is
    for (const Segment& s : segs) {
      if (s.end > s.start) out.push_back(text.substr(s.start, s.end - s.start));
    }
    return;
  }
  kept.clear();
  bool previous_match = false;
  switch (behavior) {
    case SplitBehavior::kIsolated:
      break;
    case SplitBehavior::kRemoved:
      for (const Segment& s : segs) {
        if (!s.match) kept.push_back(s);
      }
      break;
    case SplitBehavior::kContiguous:
      for (const Segment& s : segs) {
        if (s.match == previous_match && !kept.empty()) {
          kept.back().end = s.end;
        } else {
          kept.push_back(s);
        }
        previous_match = s.match;
      }
      break;
    case SplitBehavior::kMergedWithPrevious:
      for (const Segment& s : segs) {
        if (s.match && !previous_match && !kept.empty()) {
          kept.back().end = s.end;
        } else {
          kept.push_back(s);
        }
        previous_match = s.match;
      }
      break;
    case SplitBehavior::kMergedWithNext:
      for (auto it = segs.rbegin(); it != segs.rend(); ++it) {
        if (it->match && !previous_match && !kept.empty()) {
          kept.back().start = it->start;
        } else {
          kept.push_back(*it);
        }
        previous_match = it->match;
      }
      std::reverse(kept.begin(), kept.end());
      break;
  }
  for (const Segment& s : kept) {
    if (s.end > s.start) out.push_back(text.substr(s.start, s.end - s.start));
  }
}

}  // namespace

std::vector<std::string_view> Pretokenizer::split(std::string_view text) const {
  std::vector<std::string_view> pieces;
  if (text.empty()) return pieces;
  pieces.push_back(text);
  std::vector<Segment> segs, kept;
  std::string mapped;
  std::vector<uint32_t> raw_offset;
  for (const auto& rule : rules_) {
    pcre2_match_data* match = pcre2_match_data_create_from_pattern(rule->code, nullptr);
    PARALLM_CHECK(match != nullptr);
    std::vector<std::string_view> next;
    next.reserve(pieces.size() * 2);
    for (std::string_view piece : pieces) {
      if (rule->byte_level_text) {
        // Match the mapped text, then cut the raw piece at the same bytes (a
        // cut inside a mapped char falls on the byte that char stands for).
        map_byte_level(piece, mapped, raw_offset);
        find_segments(rule->code, match, mapped, segs);
        for (Segment& s : segs) s.start = raw_offset[s.start], s.end = raw_offset[s.end];
      } else {
        find_segments(rule->code, match, piece, segs);
      }
      if (rule->invert) {
        for (Segment& s : segs) s.match = !s.match;
      }
      apply_behavior(rule->behavior, segs, piece, kept, next);
    }
    pcre2_match_data_free(match);
    pieces = std::move(next);
  }
  return pieces;
}

}  // namespace parallm
