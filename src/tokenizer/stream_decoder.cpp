// Streaming detokenization: token pieces can end in the middle of a UTF-8
// character (byte-fallback pieces, byte-level BPE pieces), so bytes of an
// incomplete trailing sequence wait in `pending_` until the next piece
// completes them. Output is always valid UTF-8 (invalid bytes become U+FFFD).
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_data.h"
#include "tokenizer/unicode.h"

namespace parallm {

StreamDecoder::StreamDecoder(const Tokenizer& tokenizer, bool skip_special)
    : tokenizer_(tokenizer), skip_special_(skip_special) {}

std::string StreamDecoder::push(int32_t id) {
  const TokenizerData& d = tokenizer_.data();
  if (id == d.bos_id && id >= 0) {
    after_bos_ = d.kind == TokenizerKind::kSentencePiece && d.add_space_prefix;
    if (skip_special_) return {};
  } else if (skip_special_ && tokenizer_.is_special(id)) {
    return {};
  }
  std::string piece = tokenizer_.token_to_piece(id);
  if (id != d.bos_id) {
    if (after_bos_ && !piece.empty() && piece[0] == ' ') piece.erase(0, 1);
    after_bos_ = false;
  }
  pending_ += piece;
  const size_t complete = utf8_complete_prefix(pending_);
  std::string out = utf8_sanitize(std::string_view(pending_).substr(0, complete));
  pending_.erase(0, complete);
  return out;
}

std::string StreamDecoder::flush() {
  std::string out = utf8_sanitize(pending_);
  pending_.clear();
  return out;
}

}  // namespace parallm
