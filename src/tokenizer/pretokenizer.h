// Pre-tokenization for byte-level BPE: a sequence of split rules, each a regex
// that splits every piece further with one of Hugging Face's Split behaviours
// (by default "Isolated": matches and the gaps between them both become
// pieces; see SplitBehavior for the others). PCRE2 in UTF + UCP mode gives
// the Unicode classes (\p{L}, \p{N}, \s) that GPT-2, Llama 3 and Qwen2 use;
// invalid UTF-8 never matches and ends up in a gap piece, so garbage bytes
// still tokenize (through byte-level BPE) instead of failing.
//
// A rule may instead see the text as Hugging Face's ByteLevel pre-tokenizer
// leaves it (every byte one GPT-2 byte-to-unicode char): in a tokenizer.json
// Sequence, the rules after a ByteLevel run on that mapped text (Falcon's
// Digits: "ü" = C3 BC maps to "Ã¼", and "¼" is a number there).
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
  bool byte_level_text = false;  // matches the ByteLevel-mapped text (see above)
};

// Patterns shared by the GGUF tables and the tokenizer.json reader.
extern const char* const kGpt2Pattern;
extern const char* const kLlama3Pattern;
extern const char* const kQwen2Pattern;
// One punctuation character as Hugging Face's Punctuation pre-tokenizer
// counts them: ASCII punctuation and Unicode P*.
extern const char* const kPunctuationChar;

// What a GGUF `tokenizer.ggml.pre` value means (gguf_pre.cpp): the split
// rules of the family's tokenizer.json, and the flags llama.cpp sets with it.
struct GgufPre {
  std::vector<SplitRule> rules;
  bool ignore_merges = false;  // a pre-token that is a piece is emitted whole
  bool add_bos = false;        // default of tokenizer.ggml.add_bos_token
};

// Throws InputError listing the supported names for an unknown one.
GgufPre gguf_pre(const std::string& pre);
std::vector<SplitRule> rules_for_gguf_pre(const std::string& pre);
// Every name gguf_pre() accepts, in table order.
std::vector<std::string> gguf_pre_names();

// A tokenizer.json (Oniguruma) regex in PCRE2 syntax: nested character
// classes, which Oniguruma reads as unions (BLOOM's ` ?[^(\s|[.,!?…])]+`),
// are flattened, and a class intersection `[X&&Y]` becomes `(?:(?=Y)X)`;
// throws InputError for the forms without a translation here (a negated
// class nested in a class, a negated intersection).
std::string onig_to_pcre2(const std::string& pattern);

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
