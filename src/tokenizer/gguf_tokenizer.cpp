// Tokenizer from GGUF metadata (tokenizer.ggml.*), as llama.cpp writes it:
// model "llama" is SentencePiece BPE with scores, "gpt2" byte-level BPE with
// merges and a pre-tokenizer named by tokenizer.ggml.pre.
#include <algorithm>

#include "loader/gguf_reader.h"
#include "tokenizer/merges.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_data.h"
#include "util/check.h"

namespace parallm {
namespace {

int32_t optional_id(const GgufFile& gguf, const std::string& key) {
  const auto value = gguf.get_int_opt(key);
  if (!value || *value < 0 || *value > INT32_MAX) return -1;
  return static_cast<int32_t>(*value);
}

}  // namespace

std::unique_ptr<Tokenizer> tokenizer_from_gguf(const GgufFile& gguf) {
  const auto model = gguf.get_string_opt("tokenizer.ggml.model");
  if (!model) throw InputError(gguf.path() + " has no tokenizer (tokenizer.ggml.model missing)");
  auto data = std::make_shared<TokenizerData>();
  TokenizerData& d = *data;
  if (*model == "llama") {
    d.kind = TokenizerKind::kSentencePiece;
  } else if (*model == "gpt2") {
    d.kind = TokenizerKind::kByteLevelBpe;
  } else {
    throw InputError(gguf.path() + ": unsupported tokenizer model '" + *model + "' (supported: llama, gpt2)");
  }

  d.pieces = gguf.get_string_array("tokenizer.ggml.tokens");
  const size_t n = d.pieces.size();
  if (gguf.has("tokenizer.ggml.scores")) d.scores = gguf.get_float_array("tokenizer.ggml.scores");
  if (gguf.has("tokenizer.ggml.token_type")) {
    const auto types = gguf.get_int_array("tokenizer.ggml.token_type");
    if (types.size() != n) {
      throw InputError(gguf.path() + ": tokenizer.ggml.token_type has " + std::to_string(types.size()) +
                       " entries for " + std::to_string(n) + " tokens");
    }
    d.attrs.resize(n);
    for (size_t i = 0; i < n; ++i) {
      const int64_t t = types[i];
      d.attrs[i] = (t >= 1 && t <= 6) ? static_cast<TokenAttr>(t) : TokenAttr::kNormal;
    }
  }

  d.bos_id = optional_id(gguf, "tokenizer.ggml.bos_token_id");
  d.eos_id = optional_id(gguf, "tokenizer.ggml.eos_token_id");
  d.unk_id = optional_id(gguf, "tokenizer.ggml.unknown_token_id");
  d.pad_id = optional_id(gguf, "tokenizer.ggml.padding_token_id");
  for (const char* key : {"tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"}) {
    const int32_t id = optional_id(gguf, key);
    if (id >= 0) d.stop_ids.push_back(id);
  }
  d.chat_template = gguf.get_string_opt("tokenizer.chat_template");

  std::string pre;
  if (d.kind == TokenizerKind::kSentencePiece) {
    if (d.bos_id < 0 && !gguf.has("tokenizer.ggml.bos_token_id")) d.bos_id = 1;
    if (d.eos_id < 0 && !gguf.has("tokenizer.ggml.eos_token_id")) d.eos_id = 2;
    if (d.unk_id < 0 && !gguf.has("tokenizer.ggml.unknown_token_id")) d.unk_id = 0;
    d.add_space_prefix = gguf.get_bool_opt("tokenizer.ggml.add_space_prefix").value_or(true);
    d.add_bos = true;
  } else {
    // Without the key llama.cpp uses its "default" rules (and warns).
    pre = gguf.get_string_opt("tokenizer.ggml.pre").value_or("default");
    GgufPre family = gguf_pre(pre);
    d.pretokenizer = std::make_shared<Pretokenizer>(family.rules);
    d.ignore_merges = family.ignore_merges;
    d.add_bos = family.add_bos;
    d.add_space_prefix = false;
  }
  d.add_bos = gguf.get_bool_opt("tokenizer.ggml.add_bos_token").value_or(d.add_bos);
  d.add_eos = gguf.get_bool_opt("tokenizer.ggml.add_eos_token").value_or(false);

  finalize_tokenizer_data(d);

  if (d.kind == TokenizerKind::kByteLevelBpe) {
    const auto merges = gguf.get_string_array("tokenizer.ggml.merges");
    if (merges.size() > static_cast<size_t>(INT32_MAX)) throw InputError("too many merges");
    d.merges.reserve(merges.size());
    for (size_t i = 0; i < merges.size(); ++i) {
      add_merge_line(d, merges[i], static_cast<int32_t>(i));
    }
  }
  return std::make_unique<Tokenizer>(std::move(data));
}

}  // namespace parallm
