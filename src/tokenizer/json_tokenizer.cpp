// Hugging Face tokenizer.json (+ optional tokenizer_config.json), BPE model:
//  - byte-level: a ByteLevel pre-tokenizer, with Split regexes (any of
//    Hugging Face's split behaviours, inverted or not: Llama 3, Qwen2,
//    DeepSeek V3, GPT-4o), Digits, Punctuation, whitespace, BERT and
//    delimiter splits before it or after it (then on the mapped text). The
//    Split patterns are read from the file (Oniguruma syntax translated to
//    PCRE2), so a new family with its own regex needs no code.
//  - SentencePiece-style (Llama 2, Mistral, Gemma): Metaspace pre-tokenizer or
//    a Prepend/Replace normalizer putting U+2581 for spaces, byte fallback; the
//    SentencePiece encoder runs with the file's ranked merges.
// Unicode normalizers (NFC, NFKC, NFD, NFKD) are applied to the text between
// added tokens, as Hugging Face does. Anything else is an InputError naming
// the unsupported component.
//
// Which special tokens encode() adds follows Python transformers: the
// Llama-style classes (LlamaTokenizer, GemmaTokenizer, CodeLlama, Cohere)
// take add_bos_token / add_eos_token from tokenizer_config.json (BOS by
// default), as does a config that names no class but sets them; every other
// class adds what the file's post_processor template says, and nothing
// without one.
#include <nlohmann/json.hpp>

#include "tokenizer/merges.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_data.h"
#include "util/check.h"
#include "util/json_parse.h"

namespace parallm {
namespace {

using nlohmann::json;

// The depth limit also bounds the recursion over Sequence normalizers,
// pre-tokenizers and post-processors below (one call per two levels).
json parse_file_json(std::string_view text, const char* name) {
  JsonError e;
  std::optional<json> j = try_parse_json<json>(text, JsonLimits{kFileJsonDepth}, &e);
  if (!j) throw InputError(std::string(name) + ": " + e.message);
  return std::move(*j);
}

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

// Rust's char::is_whitespace and the regex crate's Unicode \w (UTS #18:
// Alphabetic, marks, decimal digits, connector punctuation, joiners).
const char* const kWhiteSpace = R"(\p{White_Space})";
#define PARALLM_RUST_WORD R"(\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\x{200C}\x{200D})"
const char* const kRustWordMembers = PARALLM_RUST_WORD;
const char* const kRustWord = "[" PARALLM_RUST_WORD "]";
#undef PARALLM_RUST_WORD

struct PreTokenizerSpec {
  std::vector<SplitRule> rules;
  bool byte_level = false;
  bool add_prefix_space = false;
  size_t rules_before_byte_level = 0;
  bool metaspace = false;               // U+2581 for spaces (SentencePiece-style)
  bool metaspace_prefix = false;        // dummy prefix U+2581
  bool metaspace_prefix_first = false;  // ... only before the first fragment (prepend_scheme "first")
  bool metaspace_split = false;         // Metaspace `split`: each U+2581 starts a new word
  bool spaces_replaced = false;         // the normalizer already put U+2581 for " "
  UnicodeForm unicode_form = UnicodeForm::kNone;
};

// Each component becomes split rules in order. A rule after the ByteLevel
// matches the ByteLevel-mapped text, as Hugging Face runs it (Falcon).
void read_pre_tokenizer(const json& node, PreTokenizerSpec& spec) {
  if (node.is_null()) return;
  const std::string type = node.value("type", "");
  auto add = [&](SplitRule rule) {
    rule.byte_level_text = spec.byte_level;
    spec.rules.push_back(std::move(rule));
  };
  if (type == "Sequence") {
    for (const auto& child : node.at("pretokenizers")) read_pre_tokenizer(child, spec);
  } else if (type == "Split") {
    SplitRule rule;
    rule.behavior = parse_split_behavior(node.value("behavior", "Isolated"));
    rule.invert = node.value("invert", false);
    const json& pattern = node.at("pattern");
    if (pattern.contains("Regex")) {
      rule.pattern = onig_to_pcre2(pattern.at("Regex").get<std::string>());
    } else {
      rule.pattern = quote_regex(pattern.at("String").get<std::string>());
    }
    add(std::move(rule));
  } else if (type == "Digits") {
    // Each digit is a match; Contiguous (the default) keeps runs together.
    add({R"(\p{N})", node.value("individual_digits", false) ? SplitBehavior::kIsolated : SplitBehavior::kContiguous});
  } else if (type == "Punctuation") {
    add({kPunctuationChar, parse_split_behavior(node.value("behavior", "Isolated"))});
  } else if (type == "WhitespaceSplit") {
    add({kWhiteSpace, SplitBehavior::kRemoved});
  } else if (type == "Whitespace") {
    // Hugging Face's `\w+|[^\w\s]+` in Rust's regex crate, whose \w is
    // wider than PCRE2's (marks, ZWJ) and narrower (only Nd digits).
    add({std::string(kRustWord) + "+|[^" + kRustWordMembers + R"(\p{White_Space}]+)", SplitBehavior::kRemoved, true});
  } else if (type == "BertPreTokenizer") {
    // Whitespace removed, then every punctuation character on its own.
    add({kWhiteSpace, SplitBehavior::kRemoved});
    add({kPunctuationChar, SplitBehavior::kIsolated});
  } else if (type == "CharDelimiterSplit") {
    add({quote_regex(node.at("delimiter").get<std::string>()), SplitBehavior::kRemoved});
  } else if (type == "Metaspace") {
    if (node.value("replacement", std::string(kSpaceMark)) != kSpaceMark) {
      throw InputError("unsupported tokenizer.json Metaspace replacement (supported: U+2581)");
    }
    spec.metaspace = true;
    const std::string scheme = node.contains("prepend_scheme")        ? node.at("prepend_scheme").get<std::string>()
                               : node.value("add_prefix_space", true) ? "always"
                                                                      : "never";
    if (scheme != "always" && scheme != "first" && scheme != "never") {
      throw InputError("unsupported tokenizer.json Metaspace prepend_scheme '" + scheme +
                       "' (supported: always, first, never)");
    }
    spec.metaspace_prefix = scheme != "never";
    spec.metaspace_prefix_first = scheme == "first";
    spec.metaspace_split = node.value("split", true);
  } else if (type == "ByteLevel") {
    spec.rules_before_byte_level = spec.rules.size();
    if (node.value("use_regex", true)) add({kGpt2Pattern});
    spec.byte_level = true;
    spec.add_prefix_space = node.value("add_prefix_space", false);
  } else {
    throw InputError("unsupported tokenizer.json pre_tokenizer '" + type +
                     "' (supported: Sequence, Split, Digits, Punctuation, Whitespace, "
                     "WhitespaceSplit, BertPreTokenizer, CharDelimiterSplit, ByteLevel, Metaspace)");
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
    spec.spaces_replaced = true;
  } else if (type == "NFC" || type == "NFKC" || type == "NFD" || type == "NFKD") {
    if (spec.unicode_form != UnicodeForm::kNone) {
      throw InputError("unsupported tokenizer.json: more than one Unicode normalizer");
    }
    spec.unicode_form = type == "NFC"    ? UnicodeForm::kNfc
                        : type == "NFKC" ? UnicodeForm::kNfkc
                        : type == "NFD"  ? UnicodeForm::kNfd
                                         : UnicodeForm::kNfkd;
  } else {
    throw InputError("unsupported tokenizer.json normalizer '" + type +
                     "' (supported: NFC, NFKC, NFD, NFKD, and Prepend/Replace of U+2581 "
                     "for spaces)");
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

// The ids a post_processor puts before and after a single sequence; nullopt
// when it has no template (ByteLevel alone, or none).
struct Template {
  std::vector<int32_t> before, after;
};

std::optional<Template> read_template(const json& node, const TokenizerData& d) {
  if (!node.is_object()) return std::nullopt;
  const std::string type = node.value("type", "");
  if (type == "Sequence") {
    std::optional<Template> found;
    for (const auto& child : node.at("processors")) {
      if (auto t = read_template(child, d)) found = std::move(t);
    }
    return found;
  }
  if (type == "BertProcessing" || type == "RobertaProcessing") {
    Template t;
    t.before.push_back(node.at("cls").at(1).get<int32_t>());
    t.after.push_back(node.at("sep").at(1).get<int32_t>());
    return t;
  }
  if (type != "TemplateProcessing") return std::nullopt;
  Template t;
  bool seen_sequence = false;
  const json specials = node.value("special_tokens", json::object());
  for (const auto& item : node.at("single")) {
    if (item.contains("Sequence")) {
      seen_sequence = true;
      continue;
    }
    const std::string name = item.at("SpecialToken").at("id").get<std::string>();
    std::vector<int32_t> ids;
    if (specials.contains(name)) {
      ids = specials.at(name).at("ids").get<std::vector<int32_t>>();
    } else if (const int32_t id = find_piece(d, name); id >= 0) {
      ids.push_back(id);
    } else {
      throw InputError("tokenizer.json post_processor names an unknown token '" + name + "'");
    }
    auto& side = seen_sequence ? t.after : t.before;
    side.insert(side.end(), ids.begin(), ids.end());
  }
  return t;
}

// Sets add_bos / add_eos (and the ids they add) as Python transformers does;
// see the file comment.
void decide_added_tokens(const json& root, const json& config, TokenizerData& d) {
  std::string cls = config.value("tokenizer_class", "");
  if (cls.size() > 4 && cls.compare(cls.size() - 4, 4, "Fast") == 0) cls.resize(cls.size() - 4);
  const bool llama_style =
      cls == "LlamaTokenizer" || cls == "CodeLlamaTokenizer" || cls == "GemmaTokenizer" || cls == "CohereTokenizer";
  // NOTE: without a class, transformers picks one from the model's
  // config.json, which this loader does not read; explicit flags then win.
  const bool explicit_flags = cls.empty() && (config.contains("add_bos_token") || config.contains("add_eos_token"));
  if (llama_style || explicit_flags) {
    d.add_bos = config.value("add_bos_token", true);
    d.add_eos = config.value("add_eos_token", false);
    return;
  }
  const auto t = read_template(root.value("post_processor", json()), d);
  d.add_bos = d.add_eos = false;
  if (!t) return;
  if (t->before.size() > 1 || t->after.size() > 1) {
    throw InputError(
        "unsupported tokenizer.json post_processor: more than one token before or "
        "after the text");
  }
  for (int32_t id : t->before) {
    if (!d.valid_id(id)) throw InputError("tokenizer.json post_processor token id out of range");
    d.bos_id = id;
    d.add_bos = true;
  }
  for (int32_t id : t->after) {
    if (!d.valid_id(id)) throw InputError("tokenizer.json post_processor token id out of range");
    d.eos_id = id;
    d.add_eos = true;
  }
}

std::unique_ptr<Tokenizer> parse_json_impl(std::string_view tokenizer_json, std::string_view config_json) {
  const json root = parse_file_json(tokenizer_json, "tokenizer.json");
  const json config = config_json.empty() ? json::object() : parse_file_json(config_json, "tokenizer_config.json");
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
  if (!spec.byte_level && !spec.rules.empty()) {
    // The SentencePiece encoder takes the whole text. A split on " " after
    // the normalizer turned every space into U+2581 (Gemma 3) matches nothing.
    for (const SplitRule& rule : spec.rules) {
      if (!(spec.spaces_replaced && rule.pattern == " ")) {
        throw InputError(
            "unsupported tokenizer.json: a Split pre-tokenizer with "
            "SentencePiece-style spaces");
      }
    }
    spec.rules.clear();
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
  d.metaspace = !spec.byte_level && spec.metaspace && !spec.spaces_replaced;
  d.space_prefix_first_only = d.metaspace && spec.metaspace_prefix_first;
  d.metaspace_split = d.metaspace && spec.metaspace_split;
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
  d.unicode_form = spec.unicode_form;
  if (spec.byte_level && spec.add_prefix_space && spec.rules_before_byte_level > 0) {
    const auto split_at = spec.rules.begin() + static_cast<std::ptrdiff_t>(spec.rules_before_byte_level);
    d.prefix_pretokenizer = std::make_shared<Pretokenizer>(std::vector<SplitRule>(spec.rules.begin(), split_at));
    d.pretokenizer = std::make_shared<Pretokenizer>(std::vector<SplitRule>(split_at, spec.rules.end()));
  } else if (spec.byte_level) {
    d.pretokenizer = std::make_shared<Pretokenizer>(spec.rules);
  }

  if (auto text = token_text(config, "bos_token")) d.bos_id = find_piece(d, *text);
  if (auto text = token_text(config, "eos_token")) d.eos_id = find_piece(d, *text);
  if (auto text = token_text(config, "unk_token")) d.unk_id = find_piece(d, *text);
  if (auto text = token_text(config, "pad_token")) d.pad_id = find_piece(d, *text);
  if (d.unk_id < 0 && model.contains("unk_token") && model.at("unk_token").is_string()) {
    d.unk_id = find_piece(d, model.at("unk_token").get<std::string>());
  }
  decide_added_tokens(root, config, d);
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

std::unique_ptr<Tokenizer> parse_tokenizer_json(std::string_view tokenizer_json, std::string_view config_json) {
  try {
    return parse_json_impl(tokenizer_json, config_json);
  } catch (const json::exception& e) {
    throw InputError(std::string("malformed tokenizer.json / tokenizer_config.json: ") + e.what());
  }
}

}  // namespace parallm
