// Registering ranked BPE merges by piece text, shared by the GGUF and
// tokenizer.json loaders (call after finalize_tokenizer_data).
#pragma once
#include <string_view>

#include "tokenizer/tokenizer_data.h"

namespace parallm {

// Adds merge `left`+`right` with `rank`; throws InputError when a piece or
// their concatenation is not in the vocabulary. The first rank of a pair wins.
void add_merge(TokenizerData& data, std::string_view left, std::string_view right, int32_t rank);

// Splits a "left right" merge line at its separating space (from index 1, so
// a piece may itself start with a space) and adds it.
void add_merge_line(TokenizerData& data, std::string_view line, int32_t rank);

}  // namespace parallm
