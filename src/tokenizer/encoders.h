// The two merge algorithms, as free functions over frozen TokenizerData.
// Both append to `out` and never fail: characters or bytes without a piece
// fall back to byte pieces, then to the unknown token, then are dropped.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/tokenizer_data.h"

namespace parallm {

// SentencePiece-style BPE with scores on one raw text fragment. add_prefix
// adds the dummy prefix space; spaces become U+2581 unless data.llama2c.
void spm_encode(const TokenizerData& data, std::string_view text, bool add_prefix, std::vector<int32_t>& out);

// Byte-level BPE on one raw text fragment: pre-tokenize, map bytes, merge by rank.
void bpe_encode(const TokenizerData& data, std::string_view text, std::vector<int32_t>& out);

// The pre-tokens bpe_encode() merges (raw bytes, ByteLevel's prefix space included).
void bpe_pretokenize(const TokenizerData& data, std::string_view text, std::vector<std::string>& pieces);

}  // namespace parallm
