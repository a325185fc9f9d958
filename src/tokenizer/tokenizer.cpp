// Tokenizer: special-token splitting around the two encoders, decoding, and
// the finishing step shared by all loaders (finalize_tokenizer_data).
//
// Special-token handling follows llama.cpp / Hugging Face: user-defined added
// tokens are always split out of the text; control (and unknown) tokens only
// with parse_special. For SentencePiece, the dummy prefix space goes at the
// start of the text and after each special token.
#include "tokenizer/tokenizer.h"

#include <algorithm>

#include "tokenizer/encoders.h"
#include "tokenizer/tokenizer_data.h"
#include "tokenizer/unicode.h"
#include "util/check.h"

namespace parallm {
namespace {

// Texts of end-of-generation tokens across families (stop tokens besides EOS).
constexpr const char* kStopTexts[] = {
    "<|eot_id|>",    "<|eom_id|>", "<|im_end|>", "<|endoftext|>", "<|end_of_text|>",
    "<end_of_turn>", "<|end|>",    "<|return|>", "</s>",
};

// Parses "<0xAB>" into 0xAB; -1 if `piece` is not a byte piece.
int parse_byte_piece(std::string_view piece) {
  if (piece.size() != 6 || piece.substr(0, 3) != "<0x" || piece[5] != '>') return -1;
  int value = 0;
  for (char c : piece.substr(3, 2)) {
    int digit = -1;
    if (c >= '0' && c <= '9') digit = c - '0';
    if (c >= 'A' && c <= 'F') digit = c - 'A' + 10;
    if (c >= 'a' && c <= 'f') digit = c - 'a' + 10;
    if (digit < 0) return -1;
    value = value * 16 + digit;
  }
  return value;
}

// A space or U+2581: where a Metaspace word starts.
bool starts_with_space(std::string_view text) {
  return (!text.empty() && text[0] == ' ') || text.substr(0, 3) == "\xE2\x96\x81";
}

bool splittable(TokenAttr attr, bool parse_special) {
  if (attr == TokenAttr::kUserDefined) return true;
  return parse_special && (attr == TokenAttr::kControl || attr == TokenAttr::kUnknown);
}

}  // namespace

void finalize_tokenizer_data(TokenizerData& d) {
  const size_t n = d.pieces.size();
  if (n == 0) throw InputError("tokenizer has an empty vocabulary");
  if (n > (1u << 24)) throw InputError("tokenizer vocabulary is too large: " + std::to_string(n));
  if (d.scores.empty()) d.scores.assign(n, 0.0f);
  if (d.attrs.empty()) d.attrs.assign(n, TokenAttr::kNormal);
  if (d.scores.size() != n || d.attrs.size() != n) {
    throw InputError("tokenizer arrays disagree in length (pieces " + std::to_string(n) + ", scores " +
                     std::to_string(d.scores.size()) + ", types " + std::to_string(d.attrs.size()) + ")");
  }
  for (int32_t* id : {&d.bos_id, &d.eos_id, &d.unk_id, &d.pad_id}) {
    if (!d.valid_id(*id)) *id = -1;
  }

  d.piece_to_id.clear();
  d.piece_to_id.reserve(n);
  d.byte_ids.fill(-1);
  d.split_tokens.clear();
  for (size_t i = 0; i < n; ++i) {
    const auto id = static_cast<int32_t>(i);
    const TokenAttr attr = d.attrs[i];
    if (attr == TokenAttr::kNormal || attr == TokenAttr::kByte) d.piece_to_id.emplace(d.pieces[i], id);
    if (attr == TokenAttr::kByte) {
      const int byte = parse_byte_piece(d.pieces[i]);
      if (byte >= 0 && d.byte_ids[byte] < 0) d.byte_ids[byte] = id;
    }
    if (!d.llama2c && !d.pieces[i].empty() &&
        (attr == TokenAttr::kUserDefined || attr == TokenAttr::kControl || attr == TokenAttr::kUnknown)) {
      d.split_tokens.push_back(id);
    }
  }
  // User-defined added tokens may also be pieces the model's merges build
  // (Gemma's "\n\n", "▁▁"): look them up too, after every normal piece.
  for (size_t i = 0; i < n; ++i) {
    if (d.attrs[i] == TokenAttr::kUserDefined) {
      d.piece_to_id.emplace(d.pieces[i], static_cast<int32_t>(i));
    }
  }
  std::stable_sort(d.split_tokens.begin(), d.split_tokens.end(),
                   [&](int32_t a, int32_t b) { return d.pieces[a].size() > d.pieces[b].size(); });

  for (int b = 0; b < 256; ++b) {
    std::string mapped;
    utf8_append(mapped, byte_to_unicode(static_cast<uint8_t>(b)));
    auto it = d.piece_to_id.find(mapped);
    d.byte_char_ids[b] = it == d.piece_to_id.end() ? -1 : it->second;
  }

  std::vector<int32_t> stops;
  for (int32_t id : d.stop_ids) {
    if (d.valid_id(id)) stops.push_back(id);
  }
  if (d.eos_id >= 0) stops.push_back(d.eos_id);
  // NOTE: llama2.c models end a story by producing BOS and run.c stops there;
  // SentencePiece vocabularies therefore treat BOS as a stop token too.
  if (d.kind == TokenizerKind::kSentencePiece && d.bos_id >= 0) stops.push_back(d.bos_id);
  for (size_t i = 0; i < n; ++i) {
    if (d.attrs[i] != TokenAttr::kControl && d.attrs[i] != TokenAttr::kUserDefined) continue;
    for (const char* text : kStopTexts) {
      if (d.pieces[i] == text) stops.push_back(static_cast<int32_t>(i));
    }
  }
  std::sort(stops.begin(), stops.end());
  stops.erase(std::unique(stops.begin(), stops.end()), stops.end());
  d.stop_ids = std::move(stops);
}

Tokenizer::Tokenizer(std::shared_ptr<const TokenizerData> data) : data_(std::move(data)) {
  PARALLM_CHECK(data_ != nullptr);
}

Tokenizer::~Tokenizer() = default;

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special, bool parse_special) const {
  const TokenizerData& d = *data_;
  std::vector<int32_t> out;
  if (add_special && d.add_bos && d.bos_id >= 0) out.push_back(d.bos_id);

  bool prev_special = true;  // SentencePiece: dummy prefix at start and after specials
  bool text_start = true;    // nothing encoded yet (Metaspace prepend_scheme "first")
  std::string normalized;
  auto encode_raw = [&](std::string_view raw) {
    if (raw.empty()) return;
    if (d.unicode_form != UnicodeForm::kNone) {
      normalized = unicode_normalize(raw, d.unicode_form);
      raw = normalized;
    }
    if (d.kind == TokenizerKind::kSentencePiece) {
      bool prefix = d.add_space_prefix && prev_special;
      if (d.metaspace) prefix = prefix && (text_start || !d.space_prefix_first_only) && !starts_with_space(raw);
      if (d.metaspace_split) {
        // Each space (or U+2581) starts a word; merges stay inside words.
        size_t start = 0;
        for (size_t i = 1; i <= raw.size(); ++i) {
          if (i < raw.size() && !starts_with_space(raw.substr(i))) continue;
          spm_encode(d, raw.substr(start, i - start), prefix && start == 0, out);
          start = i;
        }
      } else {
        spm_encode(d, raw, prefix, out);
      }
    } else {
      bpe_encode(d, raw, out);
    }
    prev_special = false;
    text_start = false;
  };

  size_t raw_start = 0;
  size_t pos = 0;
  while (pos < text.size() && !d.split_tokens.empty()) {
    int32_t found = -1;
    for (int32_t id : d.split_tokens) {  // longest first
      const std::string& piece = d.pieces[id];
      if (piece[0] == text[pos] && splittable(d.attrs[id], parse_special) && text.substr(pos, piece.size()) == piece) {
        found = id;
        break;
      }
    }
    if (found < 0) {
      ++pos;
      continue;
    }
    encode_raw(text.substr(raw_start, pos - raw_start));
    out.push_back(found);
    prev_special = true;
    text_start = false;
    pos += d.pieces[found].size();
    raw_start = pos;
  }
  encode_raw(text.substr(raw_start));

  if (add_special && d.add_eos && d.eos_id >= 0) out.push_back(d.eos_id);
  return out;
}

std::string Tokenizer::token_to_piece(int32_t id) const {
  const TokenizerData& d = *data_;
  if (!d.valid_id(id)) return {};
  const std::string& piece = d.pieces[id];
  const TokenAttr attr = d.attrs[id];
  if (attr == TokenAttr::kControl || attr == TokenAttr::kUserDefined || attr == TokenAttr::kUnknown) {
    return piece;
  }
  std::string out;
  if (d.kind == TokenizerKind::kSentencePiece) {
    if (attr == TokenAttr::kByte) {
      const int byte = parse_byte_piece(piece);
      if (byte >= 0) return std::string(1, static_cast<char>(byte));
    }
    if (d.llama2c) return piece;
    out.reserve(piece.size());
    for (size_t i = 0; i < piece.size(); ++i) {
      if (piece.compare(i, 3, "\xE2\x96\x81") == 0) {
        out += ' ';
        i += 2;
      } else {
        out += piece[i];
      }
    }
    return out;
  }
  size_t pos = 0;
  while (pos < piece.size()) {
    const size_t start = pos;
    const int32_t cp = utf8_next(piece, pos);
    const int32_t byte = cp < 0 ? -1 : unicode_to_byte(static_cast<uint32_t>(cp));
    if (byte >= 0) {
      out += static_cast<char>(byte);
    } else {
      out.append(piece, start, pos - start);
    }
  }
  return out;
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids, bool skip_special) const {
  const TokenizerData& d = *data_;
  const bool spm_strip = d.kind == TokenizerKind::kSentencePiece && d.add_space_prefix;
  bool strip = spm_strip;
  std::string out;
  for (int32_t id : ids) {
    if (!d.valid_id(id)) continue;
    if (id == d.bos_id) {
      if (!skip_special) out += token_to_piece(id);
      strip = spm_strip;
      continue;
    }
    if (skip_special && is_special(id)) continue;
    std::string piece = token_to_piece(id);
    if (strip && !piece.empty() && piece[0] == ' ') piece.erase(0, 1);
    strip = false;
    out += piece;
  }
  return out;
}

int32_t Tokenizer::n_vocab() const { return data_->n_vocab(); }
int32_t Tokenizer::bos_id() const { return data_->bos_id; }
int32_t Tokenizer::eos_id() const { return data_->eos_id; }
bool Tokenizer::add_bos() const { return data_->add_bos && data_->bos_id >= 0; }
bool Tokenizer::add_eos() const { return data_->add_eos && data_->eos_id >= 0; }

bool Tokenizer::is_stop_token(int32_t id) const {
  return std::binary_search(data_->stop_ids.begin(), data_->stop_ids.end(), id);
}

bool Tokenizer::is_special(int32_t id) const {
  if (!data_->valid_id(id)) return false;
  const TokenAttr attr = data_->attrs[id];
  return attr == TokenAttr::kControl || attr == TokenAttr::kUnknown;
}

std::optional<std::string> Tokenizer::chat_template() const { return data_->chat_template; }

std::string Tokenizer::kind_name() const {
  return data_->kind == TokenizerKind::kSentencePiece ? "sentencepiece" : "byte-level-bpe";
}

}  // namespace parallm
