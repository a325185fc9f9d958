// Hugging Face tokenizer.json (+ optional tokenizer_config.json), BPE model:
//  - byte-level: a ByteLevel pre-tokenizer, optionally preceded by Split
//    regexes (Llama 3, Qwen2) or Digits. The Split patterns are read from the
//    file, so a new family with its own regex needs no code.
//  - SentencePiece-style (Llama 2, Mistral): Metaspace pre-tokenizer or a
//    Prepend/Replace normalizer putting U+2581 for spaces, byte fallback; the
//    SentencePiece encoder runs with the file's ranked merges.
// Anything else is an InputError naming the unsupported component.
//
// NOTE: Qwen2/Qwen3 declare an NFC normalizer; it is not applied (no Unicode
// composition tables here). Text that is already NFC, as almost all text is,
// tokenizes identically.
#include <nlohmann/json.hpp>

#include "tokenizer/merges.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_data.h"
#include "util/check.h"

namespace parallm {
namespace {

using nlohmann::json;

// Escapes a literal Split pattern for PCRE2.
std::string quote_regex(const std::string& literal) {
  std::string out;
  for (char c : literal) {
    if (std::string_view("\\^$.|?*+()[]{}").find(c) != std::string_view::npos) out += '\\';
    out += c;
  }
  return out;
}

constexpr std::string_view kSpaceMark = "\xE2\x96\x81";  // U+2581

struct PreTokenizerSpec {
  std::vector<std::string> patterns;
  bool byte_level = false;
  bool add_prefix_space = false;
  bool metaspace = false;           // U+2581 for spaces (SentencePiece-style)
  bool metaspace_prefix = false;    // dummy prefix U+2581
};

void read_pre_tokenizer(const json& node, PreTokenizerSpec& spec) {
  if (node.is_null()) return;
  const std::string type = node.value("type", "");
  if (type == "Sequence") {
    for (const auto& child : node.at("pretokenizers")) read_pre_tokenizer(child, spec);
  } else if (type == "Split") {
    const std::string behavior = node.value("behavior", "Isolated");
    if (behavior != "Isolated" || node.value("invert", false)) {
      throw InputError("unsupported tokenizer.json Split behaviour '" + behavior +
                       "' (supported: Isolated, not inverted)");
    }
    const json& pattern = node.at("pattern");
    if (pattern.contains("Regex")) {
      spec.patterns.push_back(pattern.at("Regex").get<std::string>());
    } else {
      spec.patterns.push_back(quote_regex(pattern.at("String").get<std::string>()));
    }
  } else if (type == "Digits") {
    spec.patterns.push_back(node.value("individual_digits", false) ? R"(\p{N})" : R"(\p{N}+)");
  } else if (type == "Metaspace") {
    if (node.value("replacement", std::string(kSpaceMark)) != kSpaceMark) {
      throw InputError("unsupported tokenizer.json Metaspace replacement (supported: U+2581)");
    }
    spec.metaspace = true;
    spec.metaspace_prefix = node.contains("prepend_scheme")
                                ? node.at("prepend_scheme").get<std::string>() != "never"
                                : node.value("add_prefix_space", true);
  } else if (type == "ByteLevel") {
    spec.byte_level = true;
    spec.add_prefix_space = node.value("add_prefix_space", false);
    if (node.value("use_regex", true)) spec.patterns.push_back(kGpt2Pattern);
  } else {
    throw InputError("unsupported tokenizer.json pre_tokenizer '" + type +
                     "' (supported: Sequence, Split, Digits, ByteLevel, Metaspace)");
  }
}

void read_normalizer(const json& node, PreTokenizerSpec& spec) {
  if (node.is_null()) return;
  const std::string type = node.value("type", "");
  if (type == "Sequence") {
    for (const auto& child : node.at("normalizers")) read_normalizer(child, spec);
  } else if (type == "Prepend" && node.value("prepend", "") == kSpaceMark) {
    spec.metaspace_prefix = true;
  } else if (type == "Replace" && node.at("pattern").value("String", "") == " " &&
             node.value("content", "") == kSpaceMark) {
    spec.metaspace = true;
  } else if (type != "NFC") {
    throw InputError("unsupported tokenizer.json normalizer '" + type +
                     "' (supported: NFC, and Prepend/Replace of U+2581 for spaces)");
  }
}

// "<s>", {"content": "<s>"} or null.
std::optional<std::string> token_text(const json& config, const char* key) {
  if (!config.contains(key)) return std::nullopt;
  const json& v = config.at(key);
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content")) return v.at("content").get<std::string>();
  return std::nullopt;
}

int32_t find_piece(const TokenizerData& d, const std::string& text) {
  for (size_t i = 0; i < d.pieces.size(); ++i) {
    if (d.pieces[i] == text) return static_cast<int32_t>(i);
  }
  return -1;
}

std::unique_ptr<Tokenizer> parse_json_impl(std::string_view tokenizer_json,
                                           std::string_view config_json) {
  const json root = json::parse(tokenizer_json);
  const json config = config_json.empty() ? json::object() : json::parse(config_json);
  if (!root.is_object() || !config.is_object()) throw InputError("tokenizer.json is not an object");
  const json& model = root.at("model");
  const std::string type = model.value("type", "BPE");
  if (type != "BPE") {
    throw InputError("unsupported tokenizer.json model type '" + type + "' (supported: BPE)");
  }
  PreTokenizerSpec spec;
  read_normalizer(root.value("normalizer", json()), spec);
  read_pre_tokenizer(root.value("pre_tokenizer", json()), spec);
  if (spec.byte_level == spec.metaspace) {
    throw InputError(
        "unsupported tokenizer.json: expected either a ByteLevel pre-tokenizer (byte-level BPE) "
        "or U+2581 spaces (Metaspace, SentencePiece-style BPE)");
  }

  const json& vocab = model.at("vocab");
  static const json kNoAdded = json::array();
  const json& added = root.contains("added_tokens") ? root.at("added_tokens") : kNoAdded;
  if (!vocab.is_object() || !added.is_array()) throw InputError("tokenizer.json vocab is malformed");
  const size_t n_entries = vocab.size() + added.size();
  int64_t max_id = -1;
  auto check_id = [&](const json& id) {
    const int64_t v = id.get<int64_t>();
    if (v < 0 || v > static_cast<int64_t>(n_entries) + 65536) {
      throw InputError("tokenizer.json token id " + std::to_string(v) + " is out of range");
    }
    max_id = std::max(max_id, v);
    return static_cast<int32_t>(v);
  };
  for (const auto& [piece, id] : vocab.items()) check_id(id);
  for (const auto& token : added) check_id(token.at("id"));

  auto data = std::make_shared<TokenizerData>();
  TokenizerData& d = *data;
  d.kind = spec.byte_level ? TokenizerKind::kByteLevelBpe : TokenizerKind::kSentencePiece;
  d.add_space_prefix = !spec.byte_level && spec.metaspace_prefix;
  d.pieces.assign(static_cast<size_t>(max_id + 1), std::string());
  d.attrs.assign(d.pieces.size(), TokenAttr::kUnused);
  for (const auto& [piece, id] : vocab.items()) {
    const int32_t i = id.get<int32_t>();
    d.pieces[i] = piece;
    const bool byte_piece = !spec.byte_level && piece.size() == 6 && piece.rfind("<0x", 0) == 0;
    d.attrs[i] = byte_piece ? TokenAttr::kByte : TokenAttr::kNormal;
  }
  for (const auto& token : added) {
    const int32_t i = token.at("id").get<int32_t>();
    d.pieces[i] = token.at("content").get<std::string>();
    d.attrs[i] = token.value("special", false) ? TokenAttr::kControl : TokenAttr::kUserDefined;
  }
  d.ignore_merges = model.value("ignore_merges", false);
  d.byte_level_prefix_space = spec.add_prefix_space;
  if (spec.byte_level) d.pretokenizer = std::make_shared<Pretokenizer>(spec.patterns);

  if (auto text = token_text(config, "bos_token")) d.bos_id = find_piece(d, *text);
  if (auto text = token_text(config, "eos_token")) d.eos_id = find_piece(d, *text);
  if (auto text = token_text(config, "unk_token")) d.unk_id = find_piece(d, *text);
  if (auto text = token_text(config, "pad_token")) d.pad_id = find_piece(d, *text);
  if (d.unk_id < 0 && model.contains("unk_token") && model.at("unk_token").is_string()) {
    d.unk_id = find_piece(d, model.at("unk_token").get<std::string>());
  }
  // NOTE: without an explicit add_bos_token, a declared BOS is added (Llama 3
  // ships its tokenizer_config.json that way and its models expect BOS).
  d.add_bos = config.value("add_bos_token", d.bos_id >= 0);
  d.add_eos = config.value("add_eos_token", false);
  if (config.contains("chat_template")) {
    const json& t = config.at("chat_template");
    if (t.is_string()) {
      d.chat_template = t.get<std::string>();
    } else if (t.is_array()) {
      for (const auto& entry : t) {
        if (entry.value("name", "") == "default") d.chat_template = entry.at("template").get<std::string>();
      }
    }
  }
  finalize_tokenizer_data(d);

  static const json kNoMerges = json::array();
  const json& merges = model.contains("merges") ? model.at("merges") : kNoMerges;
  if (merges.size() >= (1u << 24)) throw InputError("tokenizer.json has too many merges");
  d.merges.reserve(merges.size());
  int32_t rank = 0;
  for (const auto& merge : merges) {
    if (merge.is_string()) {
      add_merge_line(d, merge.get<std::string>(), rank);
    } else if (merge.is_array() && merge.size() == 2) {
      add_merge(d, merge[0].get<std::string>(), merge[1].get<std::string>(), rank);
    } else {
      throw InputError("tokenizer.json merge " + std::to_string(rank) + " is malformed");
    }
    ++rank;
  }
  return std::make_unique<Tokenizer>(std::move(data));
}

}  // namespace

std::unique_ptr<Tokenizer> parse_tokenizer_json(std::string_view tokenizer_json,
                                                std::string_view config_json) {
  try {
    return parse_json_impl(tokenizer_json, config_json);
  } catch (const json::exception& e) {
    throw InputError(std::string("malformed tokenizer.json / tokenizer_config.json: ") + e.what());
  }
}

}  // namespace parallm
