// Public tokenizer API: text <-> token ids for every model family parallm
// loads, plus incremental UTF-8-safe detokenization for streaming.
//
// Two algorithms sit behind one class (docs/tokenizer.md):
//  - SentencePiece-style BPE with scores (GGUF "llama" vocab, llama2.c
//    tokenizer files): dummy prefix space, per-character pieces with byte
//    fallback, then repeatedly merge the adjacent pair whose merged piece has
//    the highest score.
//  - Byte-level BPE with ranked merges (GGUF "gpt2" vocab, tokenizer.json):
//    special tokens split out, a pre-tokenizer regex (PCRE2, Unicode classes),
//    GPT-2's byte-to-unicode mapping, then merges by rank.
// Loaders validate every length and id, so garbage files give an InputError,
// never a crash (tests/fuzz/fuzz_tokenizer.cpp).
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace parallm {

class GgufFile;
struct TokenizerData;

class Tokenizer {
 public:
  explicit Tokenizer(std::shared_ptr<const TokenizerData> data);
  virtual ~Tokenizer();

  // Text -> ids. add_special: prepend BOS (and append EOS) when the
  // tokenizer's config says so. parse_special: recognise control / added
  // special tokens written in the text (e.g. "<|eot_id|>"); user-defined added
  // tokens are always recognised.
  std::vector<int32_t> encode(std::string_view text, bool add_special, bool parse_special = true) const;
  // Decoded bytes of one token (byte fallback and byte-level mapping undone;
  // may be a partial UTF-8 sequence). Special tokens give their text.
  std::string token_to_piece(int32_t id) const;
  // Concatenated pieces; skips special tokens when asked; strips the
  // SentencePiece dummy-prefix space at the start and after BOS.
  std::string decode(const std::vector<int32_t>& ids, bool skip_special = true) const;

  int32_t n_vocab() const;
  int32_t bos_id() const;  // -1 if none
  int32_t eos_id() const;  // -1 if none
  bool add_bos() const;
  bool add_eos() const;
  // EOS, EOT (<|eot_id|>, <|im_end|>, <|endoftext|> ...) as the vocab says;
  // for SentencePiece vocabularies also BOS (llama2.c stops on it).
  bool is_stop_token(int32_t id) const;
  bool is_special(int32_t id) const;  // control / unknown tokens
  std::optional<std::string> chat_template() const;
  // "sentencepiece" or "byte-level-bpe" (for summaries and --json output).
  std::string kind_name() const;

  const TokenizerData& data() const { return *data_; }

 private:
  std::shared_ptr<const TokenizerData> data_;
};

// Incremental, UTF-8-safe detokenization for streaming: push() returns only
// complete UTF-8 text; incomplete multi-byte sequences are held until they
// complete (or are flushed as U+FFFD by flush()). Invalid bytes become U+FFFD.
// The SentencePiece leading space is stripped only from the piece directly
// after a pushed BOS (as llama2.c prints), so a stream of generated tokens
// keeps its first space.
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tokenizer, bool skip_special = true);
  std::string push(int32_t id);
  std::string flush();

 private:
  const Tokenizer& tokenizer_;
  bool skip_special_;
  bool after_bos_ = false;
  std::string pending_;  // bytes of an incomplete UTF-8 sequence
};

// path: a GGUF model or vocabulary file, a tokenizer.json or its folder
// (tokenizer_config.json beside it supplies bos/eos/add_bos/chat_template),
// or a llama2.c tokenizer file (.bin). Throws InputError on bad input.
std::unique_ptr<Tokenizer> load_tokenizer(const std::string& path);
// For model files already opened.
std::unique_ptr<Tokenizer> tokenizer_from_gguf(const GgufFile& gguf);

// Parse-from-memory entry points (used by the loaders, tests and the fuzzer).
std::unique_ptr<Tokenizer> parse_llama2c_tokenizer(const uint8_t* data, size_t size);
// config_json may be empty (no tokenizer_config.json).
std::unique_ptr<Tokenizer> parse_tokenizer_json(std::string_view tokenizer_json, std::string_view config_json);

}  // namespace parallm
