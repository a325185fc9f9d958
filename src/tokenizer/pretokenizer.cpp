// PCRE2-backed regex splitting (see pretokenizer.h). The compiled code is
// shared and read-only; match data is created per call, so split() is safe
// to call from several threads at once.
#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer/pretokenizer.h"

#include <pcre2.h>

#include <cstdint>

#include "util/check.h"

namespace parallm {

// GPT-2's pattern as the Hugging Face ByteLevel pre-tokenizer writes it.
const char* const kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
// Llama 3 and Qwen2 tokenizer.json Split patterns (digits in groups of up to
// three for Llama 3, one by one for Qwen2).
const char* const kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char* const kQwen2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

std::string pattern_for_gguf_pre(const std::string& pre) {
  if (pre == "default" || pre == "gpt-2" || pre == "gpt2") return kGpt2Pattern;
  if (pre == "llama-bpe" || pre == "llama3" || pre == "llama-v3" || pre == "smaug-bpe") {
    return kLlama3Pattern;
  }
  if (pre == "qwen2" || pre == "deepseek-r1-qwen") return kQwen2Pattern;
  throw InputError("unsupported tokenizer.ggml.pre '" + pre +
                   "' (supported: default, gpt-2, llama-bpe, llama3, smaug-bpe, qwen2, "
                   "deepseek-r1-qwen)");
}

struct Pretokenizer::Compiled {
  pcre2_code* code = nullptr;
  ~Compiled() { pcre2_code_free(code); }
};

Pretokenizer::Pretokenizer(const std::vector<std::string>& patterns) {
  for (const auto& pattern : patterns) {
    auto compiled = std::make_unique<Compiled>();
    int error_code = 0;
    PCRE2_SIZE error_offset = 0;
    compiled->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &error_code,
                                   &error_offset, nullptr);
    if (compiled->code == nullptr) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(error_code, message, sizeof(message));
      throw InputError("pre-tokenizer regex does not compile at offset " +
                       std::to_string(error_offset) + ": " +
                       reinterpret_cast<const char*>(message));
    }
    // JIT is an optimisation only: fall back to the interpreter when absent.
    pcre2_jit_compile(compiled->code, PCRE2_JIT_COMPLETE);
    regexes_.push_back(std::move(compiled));
  }
}

Pretokenizer::~Pretokenizer() = default;

namespace {

// Appends the pieces of one regex pass over `text` to `out`.
void split_one(pcre2_code* code, pcre2_match_data* match, std::string_view text,
               std::vector<std::string_view>& out) {
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t pos = 0;       // where the next search starts
  size_t emitted = 0;   // end of the last piece pushed
  while (pos < text.size()) {
    int rc = pcre2_match(code, subject, text.size(), pos, 0, match, nullptr);
    if (rc < 0) break;  // no more matches (or a matching limit): the rest is a gap
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(match);
    size_t start = ov[0], end = ov[1];
    if (end <= start) {  // empty match: step past one character and keep searching
      pos = start + 1;
      while (pos < text.size() && (static_cast<uint8_t>(text[pos]) & 0xC0) == 0x80) ++pos;
      continue;
    }
    if (start > emitted) out.push_back(text.substr(emitted, start - emitted));
    out.push_back(text.substr(start, end - start));
    emitted = pos = end;
  }
  if (emitted < text.size()) out.push_back(text.substr(emitted));
}

}  // namespace

std::vector<std::string_view> Pretokenizer::split(std::string_view text) const {
  std::vector<std::string_view> pieces;
  if (text.empty()) return pieces;
  pieces.push_back(text);
  for (const auto& regex : regexes_) {
    pcre2_match_data* match = pcre2_match_data_create_from_pattern(regex->code, nullptr);
    PARALLM_CHECK(match != nullptr);
    std::vector<std::string_view> next;
    next.reserve(pieces.size() * 2);
    for (std::string_view piece : pieces) split_one(regex->code, match, piece, next);
    pcre2_match_data_free(match);
    pieces = std::move(next);
  }
  return pieces;
}

}  // namespace parallm
