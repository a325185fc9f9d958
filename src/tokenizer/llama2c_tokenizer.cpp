// llama2.c tokenizer files (tokenizer.bin, tok512.bin): int32
// max_token_length, then per token float32 score, int32 length, bytes.
// The vocabulary size is not stored (run.c takes it from the checkpoint), so
// entries are read to the end of the file. Ids 0/1/2 are <unk>/BOS/EOS and
// byte fallback is id = byte + 3, exactly as run.c hard-codes them.
#include <cstring>

#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_data.h"
#include "util/check.h"
#include "util/mapped_file.h"

namespace parallm {

std::unique_ptr<Tokenizer> parse_llama2c_tokenizer(const uint8_t* bytes, size_t size) {
  auto read_i32 = [&](size_t offset) {
    int32_t v = 0;
    std::memcpy(&v, bytes + offset, 4);
    return v;
  };
  if (size < 4) throw InputError("llama2.c tokenizer file is too short");
  const int32_t max_token_length = read_i32(0);
  if (max_token_length <= 0 || max_token_length > (1 << 20)) {
    throw InputError("llama2.c tokenizer file has an invalid max_token_length " + std::to_string(max_token_length) +
                     " (is this a tokenizer file?)");
  }
  auto data = std::make_shared<TokenizerData>();
  TokenizerData& d = *data;
  d.kind = TokenizerKind::kSentencePiece;
  d.llama2c = true;
  size_t offset = 4;
  while (offset < size) {
    if (size - offset < 8) throw InputError("llama2.c tokenizer file is truncated");
    float score = 0.0f;
    std::memcpy(&score, bytes + offset, 4);
    const int32_t len = read_i32(offset + 4);
    offset += 8;
    if (len < 0 || len > max_token_length || static_cast<size_t>(len) > size - offset) {
      throw InputError("llama2.c tokenizer entry " + std::to_string(d.pieces.size()) + " has an invalid length " +
                       std::to_string(len));
    }
    d.pieces.emplace_back(reinterpret_cast<const char*>(bytes + offset), static_cast<size_t>(len));
    d.scores.push_back(score);
    offset += static_cast<size_t>(len);
  }
  const size_t n = d.pieces.size();
  if (n < 3) throw InputError("llama2.c tokenizer has fewer than 3 tokens");
  d.attrs.assign(n, TokenAttr::kNormal);
  d.attrs[0] = TokenAttr::kUnknown;
  d.attrs[1] = TokenAttr::kControl;
  d.attrs[2] = TokenAttr::kControl;
  for (size_t i = 3; i < n && i < 259; ++i) d.attrs[i] = TokenAttr::kByte;
  d.unk_id = 0, d.bos_id = 1, d.eos_id = 2;
  d.add_bos = true, d.add_eos = false, d.add_space_prefix = true;
  finalize_tokenizer_data(d);
  if (n >= 259) {
    for (int b = 0; b < 256; ++b) d.byte_ids[b] = b + 3;  // run.c: byte + 3
  }
  return std::make_unique<Tokenizer>(std::move(data));
}

}  // namespace parallm
