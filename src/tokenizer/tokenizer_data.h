// The frozen state of one tokenizer, built by a loader (GGUF, tokenizer.json,
// llama2.c file) and only read afterwards. Keeping it plain data lets every
// loader validate into one shape and the encoders stay free functions.
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/pretokenizer.h"
#include "tokenizer/unicode.h"

namespace parallm {

enum class TokenizerKind { kSentencePiece, kByteLevelBpe };

// Token attributes, numbered as GGUF's tokenizer.ggml.token_type.
enum class TokenAttr : uint8_t {
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

// Heterogeneous lookup: find a std::string key by std::string_view.
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using PieceMap = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

struct MergeInfo {
  int32_t rank = 0;       // lower merges first
  int32_t merged_id = 0;  // id of left+right
};

inline uint64_t merge_key(int32_t left, int32_t right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}

struct TokenizerData {
  TokenizerKind kind = TokenizerKind::kSentencePiece;
  std::vector<std::string> pieces;  // [n_vocab] as stored (U+2581 / byte-level chars / raw)
  std::vector<float> scores;        // [n_vocab] SentencePiece merge scores
  std::vector<TokenAttr> attrs;     // [n_vocab]
  PieceMap piece_to_id;             // normal pieces (first id wins on duplicates)

  // SentencePiece options.
  bool llama2c = false;          // llama2.c file: plain spaces, run.c char rules
  bool add_space_prefix = true;  // dummy prefix space at the start of text
  // tokenizer.json Metaspace pre-tokenizer (not a Prepend normalizer): no
  // prefix where the fragment already starts with a space; with
  // prepend_scheme "first" only the text's first fragment gets one; with
  // `split`, each space starts a new word that merges never cross.
  bool metaspace = false;
  bool space_prefix_first_only = false;
  bool metaspace_split = false;
  std::array<int32_t, 256> byte_ids{};  // byte-fallback ids (<0xXX>), -1 if absent

  // Applied to the text between added tokens before either encoder runs.
  UnicodeForm unicode_form = UnicodeForm::kNone;

  // Byte-level BPE options.
  std::unordered_map<uint64_t, MergeInfo> merges;  // (left id, right id) -> merge
  std::array<int32_t, 256> byte_char_ids{};        // id of each byte's mapped char, -1 if absent
  bool ignore_merges = false;                      // a pre-token that is itself a piece is emitted whole
  bool byte_level_prefix_space = false;            // ByteLevel add_prefix_space
  std::shared_ptr<const Pretokenizer> pretokenizer;
  // With add_prefix_space, the rules before the ByteLevel: Hugging Face puts
  // the space before each of their pieces (not only the text's first).
  std::shared_ptr<const Pretokenizer> prefix_pretokenizer;

  // Added / special tokens split out of the text before the algorithm runs,
  // longest first so that "<|eot_id|>" wins over a shorter prefix.
  std::vector<int32_t> split_tokens;

  int32_t bos_id = -1, eos_id = -1, unk_id = -1, pad_id = -1;
  bool add_bos = false, add_eos = false;
  std::vector<int32_t> stop_ids;
  std::optional<std::string> chat_template;

  int32_t n_vocab() const { return static_cast<int32_t>(pieces.size()); }
  bool valid_id(int64_t id) const { return id >= 0 && id < static_cast<int64_t>(pieces.size()); }
};

// Shared finishing steps for every loader: checks sizes, builds piece_to_id,
// byte tables, split_tokens and stop_ids. Throws InputError on inconsistency.
void finalize_tokenizer_data(TokenizerData& data);

}  // namespace parallm
