// Pre-tokenization for byte-level BPE: a sequence of split rules, each a regex
// that splits every piece further with one of Hugging Face's Split behaviours
// (by default "Isolated": matches and the gaps between them both become
// pieces; see SplitBehavior for the others). PCRE2 in UTF + UCP mode gives
// the Unicode classes (\p{L}, \p{N}, \s) that GPT-2, Llama 3 and Qwen2 use;
// invalid UTF-8 never matches and ends up in a gap piece, so garbage bytes
// still tokenize (through byte-level BPE) instead of failing.
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace parallm {

// What a Split does with the pieces a regex matches (Hugging Face's
// SplitDelimiterBehavior). With `invert`, the gaps count as the matches.
//   Removed            matches are dropped, gaps kept
//   Isolated           matches and gaps each become a piece
//   MergedWithPrevious a match joins the piece before it ("the-", "final-")
//   MergedWithNext     a match joins the piece after it ("-final")
//   Contiguous         consecutive matches become one piece
enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

// Parses a tokenizer.json behaviour name ("Isolated", ...); throws InputError.
SplitBehavior parse_split_behavior(const std::string& name);

struct SplitRule {
  std::string pattern;  // PCRE2 syntax
  SplitBehavior behavior = SplitBehavior::kIsolated;
  bool invert = false;
};

// Built-in patterns for GGUF tokenizer.ggml.pre values.
extern const char* const kGpt2Pattern;
extern const char* const kLlama3Pattern;
extern const char* const kQwen2Pattern;
// One punctuation character as Hugging Face's Punctuation pre-tokenizer
// counts them: ASCII punctuation and Unicode P*.
extern const char* const kPunctuationChar;

// Maps a GGUF `tokenizer.ggml.pre` value to its split rules; throws
// InputError listing the supported names for an unknown one.
std::vector<SplitRule> rules_for_gguf_pre(const std::string& pre);

class Pretokenizer {
 public:
  // Throws InputError when a pattern does not compile. A bare pattern is an
  // Isolated rule.
  explicit Pretokenizer(const std::vector<std::string>& patterns);
  explicit Pretokenizer(const std::vector<SplitRule>& rules);
  ~Pretokenizer();
  Pretokenizer(const Pretokenizer&) = delete;
  Pretokenizer& operator=(const Pretokenizer&) = delete;

  // Splits `text` into non-empty pieces, in order. They cover it exactly
  // unless a rule removes what it matches.
  std::vector<std::string_view> split(std::string_view text) const;

 private:
  struct Compiled;
  std::vector<std::unique_ptr<Compiled>> rules_;
};

}  // namespace parallm
