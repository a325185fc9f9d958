// A small, valid SentencePiece-style ("llama" in GGUF terms) vocabulary for
// random-weight models made by `parallm make-model`, so that they can be run
// end to end without any external tokenizer file.
//
// Layout, as in Llama 2's vocabulary: 0 <unk> (type 2), 1 <s>, 2 </s> (type 3,
// control), 3..258 the byte-fallback tokens <0x00>..<0xFF> (type 6, score 0),
// then normal pieces (type 1) with scores -1, -2, ... in order of creation.
// Every multi-character piece extends a shorter piece by one character, so a
// score-driven SentencePiece merge can reach every piece from characters.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace parallm {

struct SpmVocab {
  std::vector<std::string> tokens;  // [n_vocab]
  std::vector<float> scores;        // [n_vocab]
  std::vector<int32_t> types;       // [n_vocab] GGUF token types: 1 normal, 2 unknown, 3 control, 6 byte
};

// n_vocab >= 300; throws InputError otherwise. Deterministic.
SpmVocab generate_spm_vocab(int64_t n_vocab);

}  // namespace parallm
