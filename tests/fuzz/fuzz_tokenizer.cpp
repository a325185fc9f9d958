// libFuzzer target for the tokenizer-file parsers and the encoders.
// FUZZ_SOURCES: src/tokenizer/bpe_encoder.cpp src/tokenizer/gguf_pre.cpp src/tokenizer/gguf_tokenizer.cpp src/tokenizer/json_tokenizer.cpp src/tokenizer/llama2c_tokenizer.cpp src/tokenizer/load_tokenizer.cpp src/tokenizer/merges.cpp src/tokenizer/pretokenizer.cpp src/tokenizer/spm_encoder.cpp src/tokenizer/stream_decoder.cpp src/tokenizer/tokenizer.cpp src/tokenizer/unicode.cpp src/loader/gguf_reader.cpp src/core/dtype.cpp src/util/json_parse.cpp src/util/check.cpp src/util/log.cpp src/util/mapped_file.cpp
// FUZZ_LIBS: -lpcre2-8 -lutf8proc
//  - Input starting with '{' (after whitespace): parsed as tokenizer.json.
//  - Input starting with "T:": the rest is text, encoded and decoded by two
//    small built-in tokenizers (byte-level BPE and SentencePiece), so the
//    encoders, the special-token splitter and the stream decoder see garbage.
//  - Anything else: parsed as a llama2.c tokenizer file.
// A successful parse is then exercised: encode a few texts (including the
// input's tail), decode, token_to_piece and stream every id. Parsers may
// only throw InputError; anything else (crash, sanitizer report) is a bug.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>

#include "tokenizer/tokenizer.h"
#include "util/check.h"

namespace {

using parallm::Tokenizer;

void exercise(const Tokenizer& tok, std::string_view extra_text) {
  const std::string texts[] = {"Hello world", " a  b\n\n\tc", "caf\xC3\xA9 \xE2\x82\xAC", "<|endoftext|><s>",
                               std::string(extra_text)};
  for (const auto& text : texts) {
    for (bool special : {false, true}) {
      const auto ids = tok.encode(text, special, special);
      for (int32_t id : ids) {
        if (id < 0 || id >= tok.n_vocab()) __builtin_trap();  // encoder produced a bad id
      }
      (void)tok.decode(ids);
      parallm::StreamDecoder stream(tok);
      for (int32_t id : ids) (void)stream.push(id);
      (void)stream.flush();
    }
  }
  for (int32_t id = -1; id <= tok.n_vocab() && id < 300; ++id) {
    (void)tok.token_to_piece(id);
    (void)tok.is_stop_token(id);
    (void)tok.is_special(id);
  }
}

const Tokenizer& builtin_byte_level() {
  static const auto tok = parallm::parse_tokenizer_json(
      R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "\u0120": 2, "ab": 3, "\u0120ab": 4,
          "\u010a": 5, "c": 6}, "merges": ["a b", "\u0120 ab"]},
          "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": "(?i:'s|'t)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
             "behavior": "Isolated", "invert": false},
            {"type": "ByteLevel", "add_prefix_space": false, "use_regex": false}]},
          "added_tokens": [{"id": 7, "content": "<|endoftext|>", "special": true},
                           {"id": 8, "content": "<x>", "special": false}]})",
      R"({"eos_token": "<|endoftext|>", "bos_token": "<|endoftext|>"})");
  return *tok;
}

const Tokenizer& builtin_sentencepiece() {
  static const auto tok = [] {
    // llama2.c layout: <unk>, BOS, EOS, 256 byte pieces, then " ", "a", " a".
    std::string file(4, '\0');
    const int32_t max_len = 8;
    std::memcpy(file.data(), &max_len, 4);
    auto add = [&](const std::string& piece, float score) {
      const auto len = static_cast<int32_t>(piece.size());
      file.append(reinterpret_cast<const char*>(&score), 4);
      file.append(reinterpret_cast<const char*>(&len), 4);
      file += piece;
    };
    add("<unk>", 0), add("\n<s>\n", 0), add("\n</s>\n", 0);
    char byte_piece[8];
    for (int b = 0; b < 256; ++b) {
      std::snprintf(byte_piece, sizeof(byte_piece), "<0x%02X>", b);
      add(byte_piece, 0);
    }
    add(" ", -1), add("a", -2), add(" a", -3), add("\xC3\xA9", -4);
    return parallm::parse_llama2c_tokenizer(reinterpret_cast<const uint8_t*>(file.data()), file.size());
  }();
  return *tok;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const std::string_view tail = input.substr(size > 64 ? size - 64 : 0);
  if (input.substr(0, 2) == "T:") {
    exercise(builtin_byte_level(), input.substr(2));
    exercise(builtin_sentencepiece(), input.substr(2));
    return 0;
  }
  size_t first = 0;
  while (first < size &&
         (input[first] == ' ' || input[first] == '\n' || input[first] == '\t' || input[first] == '\r')) {
    ++first;
  }
  try {
    if (first < size && input[first] == '{') {
      exercise(*parallm::parse_tokenizer_json(input, ""), tail);
    } else {
      exercise(*parallm::parse_llama2c_tokenizer(data, size), tail);
    }
  } catch (const parallm::InputError&) {
    // Rejected cleanly: the expected outcome for most inputs.
  }
  return 0;
}
