// Pre-tokenization for byte-level BPE: a sequence of regexes, each splitting
// every piece further with Hugging Face's "Isolated" behaviour (matches and
// the gaps between them both become pieces). PCRE2 in UTF + UCP mode gives
// the Unicode classes (\p{L}, \p{N}, \s) that GPT-2, Llama 3 and Qwen2 use;
// invalid UTF-8 never matches and ends up in a gap piece, so garbage bytes
// still tokenize (through byte-level BPE) instead of failing.
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace parallm {

// Built-in patterns for GGUF tokenizer.ggml.pre values.
extern const char* const kGpt2Pattern;
extern const char* const kLlama3Pattern;
extern const char* const kQwen2Pattern;

// Maps a GGUF `tokenizer.ggml.pre` value to its pattern; throws InputError
// listing the supported names for an unknown one.
std::string pattern_for_gguf_pre(const std::string& pre);

class Pretokenizer {
 public:
  // Throws InputError when a pattern does not compile.
  explicit Pretokenizer(const std::vector<std::string>& patterns);
  ~Pretokenizer();
  Pretokenizer(const Pretokenizer&) = delete;
  Pretokenizer& operator=(const Pretokenizer&) = delete;

  // Splits `text` into consecutive, non-empty pieces that cover it exactly.
  std::vector<std::string_view> split(std::string_view text) const;

 private:
  struct Compiled;
  std::vector<std::unique_ptr<Compiled>> regexes_;
};

}  // namespace parallm
