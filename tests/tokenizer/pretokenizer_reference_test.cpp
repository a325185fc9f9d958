// Pre-tokenizer configurations against Hugging Face's own `tokenizers` (the
// Rust library behind transformers, npm package `tokenizers`, run with node by
// hf_pretokenize.mjs): for each family llama.cpp names, a small tokenizer.json
// (a byte-level BPE vocabulary: the 256 byte chars and a few merges) with the
// family's pre_tokenizer as its published tokenizer.json has it, split and
// encoded by both on the tricky texts of pretok_corpus.json (digits of every
// length and script, contractions in both cases, CJK, Hangul, Thai, emoji with
// ZWJ and skin tones, whitespace runs with tabs and CRLF, punctuation runs,
// mixed scripts, combining marks). Three things must agree with the
// reference's pieces and ids: parallm's split of that tokenizer.json, its ids,
// and the split of rules_for_gguf_pre() for every GGUF name of the family.
// The reference runs the patterns with Oniguruma, parallm with PCRE2, so this
// also checks the translations (BLOOM's nested class, Kimi K2's class
// intersection, possessive quantifiers). Metaspace configurations
// (prepend_scheme, split) are compared the same way on ids.
// Skips when node or the npm package is missing.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "common/command_output.h"
#include "test_util.h"
#include "tokenizer/encoders.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_data.h"
#include "util/mapped_file.h"

namespace parallm::test {
namespace {

using nlohmann::json;

// GPT-2's bytes_to_unicode (encoder.py): printable Latin-1 bytes stand for
// themselves, the others for U+0100 upwards in byte order.
std::vector<std::string> gpt2_byte_chars() {
  std::vector<std::string> chars(256);
  auto utf8 = [](uint32_t cp) {
    std::string s;
    if (cp < 0x80) {
      s += static_cast<char>(cp);
    } else {
      s += static_cast<char>(0xC0 | (cp >> 6));
      s += static_cast<char>(0x80 | (cp & 0x3F));
    }
    return s;
  };
  uint32_t next = 256;
  for (uint32_t b = 0; b < 256; ++b) {
    const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174);
    chars[b] = utf8(printable ? b : next++);
  }
  return chars;
}

std::string byte_level(std::string_view raw) {
  static const std::vector<std::string> chars = gpt2_byte_chars();
  std::string out;
  for (char c : raw) out += chars[static_cast<uint8_t>(c)];
  return out;
}

json split(const std::string& regex, const char* behavior = "Isolated", bool invert = false) {
  return {{"type", "Split"}, {"pattern", {{"Regex", regex}}}, {"behavior", behavior}, {"invert", invert}};
}
json digits(bool individual) { return {{"type", "Digits"}, {"individual_digits", individual}}; }
json punctuation(const char* behavior) { return {{"type", "Punctuation"}, {"behavior", behavior}}; }
json bytelevel(bool use_regex) {
  return {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", use_regex}};
}
json sequence(std::vector<json> items) { return {{"type", "Sequence"}, {"pretokenizers", std::move(items)}}; }

// The byte-level BPE tokenizer.json every family shares but for its pre_tokenizer.
json byte_level_tokenizer(const json& pre_tokenizer) {
  json vocab = json::object();
  const std::vector<std::string> chars = gpt2_byte_chars();
  for (int b = 0; b < 256; ++b) vocab[chars[b]] = b;
  json merges = json::array();
  // Merges across the places the families cut: words, spaces, digits,
  // newlines, the two bytes of "ü" (C3 BC) and of "你" (E4 BD A0).
  for (const char* m : {"h e",  "Ġ t", "Ġt he", "i n",  "e r", "Ġ a", "o n", "r e", "Ġ Ġ", "ĠĠ ĠĠ", "1 2",
                        "12 3", "Ã ¼", "ä ½",   "ä½ ł", "Ċ Ċ", "' s", "Ġ 1", "2 3", ". .", "Ġ ."}) {
    merges.push_back(m);
    const std::string merged = [&] {
      std::string s = m;
      s.erase(s.find(' '), 1);
      return s;
    }();
    if (!vocab.contains(merged)) vocab[merged] = static_cast<int>(vocab.size());
  }
  return {{"version", "1.0"},
          {"added_tokens", json::array()},
          {"normalizer", nullptr},
          {"pre_tokenizer", pre_tokenizer},
          {"post_processor", nullptr},
          {"decoder", {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}, {"use_regex", true}}},
          {"model",
           {{"type", "BPE"},
            {"dropout", nullptr},
            {"unk_token", nullptr},
            {"continuing_subword_prefix", nullptr},
            {"end_of_word_suffix", nullptr},
            {"fuse_unk", false},
            {"byte_fallback", false},
            {"ignore_merges", false},
            {"vocab", vocab},
            {"merges", merges}}}};
}

// Patterns as the families' tokenizer.json files write them (Oniguruma).
const char* const kGpt2 = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
const char* const kLlama3 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char* const kQwen2 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char* const kO200k =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char* const kTekken =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char* const kDeepseekV3Words =
    R"([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char* const kDeepseekV3Cjk = "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+";
const char* const kDeepseekCjk = "[\u4e00-\u9fa5\u0800-\u4e00\uac00-\ud7ff]+";
// BLOOM's nested class, as published (Oniguruma reads it as one union).
const char* const kBloom = " ?[^(\\s|[.,!?\u2026\u3002\uff0c\u3001\u0964\u06d4\u060c])]+";
// DeepSeek LLM's space-led words of its letter class.
const char* const kDeepseekLetters =
    "\\s?[A-Za-z\u00b5\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u01ba\u01bc-\u01bf\u01c4-\u0293\u0295-\u02af\u0370"
    "-\u0373\u0376\u0377\u037b-\u037d\u037f\u0386\u0388-\u038a\u038c\u038e-\u03a1\u03a3-\u03f5\u03f7-"
    "\u0481\u048a-\u052f\u0531-\u0556\u10a0-\u10c5\u13a0-\u13f5\u13f8-\u13fd\u1c90-\u1cba\u1cbd-\u1cbf"
    "\u1d00-\u1d2b\u1d6b-\u1d77\u1d79-\u1d9a\u1e00-\u1f15\u1f18-\u1f1d\u1f20-\u1f45\u1f48-\u1f4d\u1f50"
    "-\u1f57\u1f59\u1f5b\u1f5d\u1f5f-\u1f7d\u1f80-\u1fb4\u1fb6-\u1fbc\u1fbe\u1fc2-\u1fc4\u1fc6-\u1fcc"
    "\u1fd0-\u1fd3\u1fd6-\u1fdb\u1fe0-\u1fec\u1ff2-\u1ff4\u1ff6-\u1ffc\u2102\u2107\u210a-\u2113\u2115"
    "\u2119-\u211d\u2124\u2126\u2128\u212a-\u212d\u212f-\u2134\u2139\u213c-\u213f\u2145-\u2149\u214e\u2183"
    "\u2184\u2c00-\u2c7b\u2c7e-\u2ce4\u2ceb-\u2cee\u2cf2\u2cf3\ua640-\ua66d\ua680-\ua69b\ua722-\ua76f"
    "\ua771-\ua787\ua78b-\ua78e\uab70-\uabbf\ufb00-\ufb06\ufb13-\ufb17\uff21-\uff3a\uff41-\uff5a\U00010400"
    "-\U0001044f\U000104b0-\U000104d3\U000104d8-\U000104fb\U00010c80-\U00010cb2\U00010cc0-\U00010cf2\U000118a0"
    "-\U000118df\U0001e900-\U0001e943]+";
// Kimi K2's tiktoken pattern (tokenization_kimi.py), class intersections included.
const char* const kKimiK2 =
    R"([\p{Han}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

struct Family {
  std::string name;
  json pre_tokenizer;
  std::vector<std::string> gguf;  // tokenizer.ggml.pre names that must split the same
};

// `published`: the pre_tokenizer of the family's tokenizer.json on the Hub.
// `from_llama_cpp`: families whose file this test does not have; the config is
// llama.cpp's regex list as Isolated Splits before a ByteLevel, so the check is
// PCRE2 against Oniguruma on the same patterns.
std::vector<Family> families() {
  std::vector<Family> f;
  // published
  f.push_back({"gpt2",
               bytelevel(true),
               {"gpt-2",           "gpt2",    "phi-2",   "mpt",         "olmo",       "jais",       "trillion",
                "granite-docling", "jina-es", "jina-de", "jina-v2-es",  "jina-v2-de", "jina-v1-en", "jina-v2-code",
                "gigachat",        "a.x-4.0", "mellum",  "modern-bert", "exaone4",    "roberta-bpe"}});
  f.push_back({"llama3",
               sequence({split(kLlama3), bytelevel(false)}),
               {"llama-bpe", "llama3", "llama-v3", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2",
                "jina-v5-nano", "dbrx", "smaug-bpe", "chatglm-bpe", "glm4"}});
  f.push_back(
      {"qwen2",
       sequence({split(kQwen2), bytelevel(false)}),
       {"qwen2", "deepseek-r1-qwen", "stablelm2", "hunyuan", "kormo", "f2llmv2", "megrez", "solar-open", "grok-2"}});
  f.push_back({"gpt-4o",
               sequence({split(kO200k, "Removed", true), bytelevel(false)}),
               {"gpt-4o", "llama4", "kanana2", "talkie", "minimax-m2"}});
  f.push_back({"deepseek-v3",
               sequence({split(R"(\p{N}{1,3})"), split(kDeepseekV3Cjk), split(kDeepseekV3Words), bytelevel(false)}),
               {"deepseek-v3", "hunyuan-dense", "joyai-llm", "hy_v4"}});
  f.push_back({"deepseek-llm",
               sequence({split("[\r\n]"), split(kDeepseekLetters),
                         split("\\s?[!-/:-~\uff01-\uff0f\uff1a-\uff5e\u2018-\u201f\u3000-\u3002]+"), split(R"(\s+$)"),
                         split(kDeepseekCjk), digits(true), bytelevel(false)}),
               {"deepseek-llm"}});
  f.push_back({"deepseek-coder",
               sequence({split("[\r\n]"), split(R"(\s?\p{L}+)"), split(R"(\s?\p{P}+)"), split(kDeepseekCjk),
                         digits(true), bytelevel(false)}),
               {"deepseek-coder"}});
  f.push_back({"falcon",
               sequence({punctuation("Contiguous"), bytelevel(true), digits(false), split("[0-9][0-9][0-9]")}),
               {"falcon"}});
  f.push_back({"starcoder",
               sequence({digits(true), bytelevel(true)}),
               {"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b", "mellum2"}});
  f.push_back({"bloom", sequence({split(kBloom), bytelevel(false)}), {"bloom", "poro-chat", "gpt3-finnish"}});
  f.push_back({"viking", sequence({split(kBloom), digits(true), bytelevel(false)}), {"viking"}});
  f.push_back({"tekken", sequence({split(kTekken), bytelevel(false)}), {"tekken"}});
  f.push_back({"chameleon",
               sequence({split("<sentinel:[0-9]+>"), split("(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z"),
                         split("([\t\n]|    |  )"), digits(true), punctuation("Isolated"), bytelevel(true)}),
               {"chameleon"}});
  f.push_back({"kimi-k2", sequence({split(kKimiK2), bytelevel(false)}), {"kimi-k2"}});
  f.push_back(
      {"bailingmoe",
       sequence(
           {split(
                R"('(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+)"),
            bytelevel(false)}),
       {"bailingmoe", "bailingmoe2", "llada-moe"}});
  f.push_back(
      {"seed-coder",
       sequence(
           {split(
                R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1}| ?[^\s\p{L}\p{N}\r\n]+|\s*[\r\n]+|\s+(?!\S)|\s+)"),
            bytelevel(false)}),
       {"seed-coder"}});
  // from_llama_cpp
  for (const char* name : {"default", "jais-2", "qwen35", "ufakzeka", "exaone-moe", "minicpm5", "laguna", "spark2_5",
                           "afmoe", "youtu", "granite-embed-multi-97m", "superbpe", "tiny_aya"}) {
    std::vector<json> items;
    for (const SplitRule& r : rules_for_gguf_pre(name)) items.push_back(split(r.pattern));
    items.push_back(bytelevel(false));
    f.push_back({name, sequence(items), {name}});
  }
  f.back().gguf.push_back("cohere2moe");  // tiny_aya (last) has a second name
  return f;
}

// The other pre-tokenizer components and every Split behaviour, each before
// (and one after) a ByteLevel.
std::vector<Family> components() {
  const json whitespace_split = {{"type", "WhitespaceSplit"}};
  const json whitespace = {{"type", "Whitespace"}};
  const json bert = {{"type", "BertPreTokenizer"}};
  const json char_delimiter = {{"type", "CharDelimiterSplit"}, {"delimiter", "-"}};
  json prefixed_bytelevel = bytelevel(true);
  prefixed_bytelevel["add_prefix_space"] = true;
  const json string_split = {
      {"type", "Split"}, {"pattern", {{"String", "--"}}}, {"behavior", "MergedWithPrevious"}, {"invert", false}};
  return {
      {"WhitespaceSplit", sequence({whitespace_split, bytelevel(false)}), {}},
      {"Whitespace", sequence({whitespace, bytelevel(false)}), {}},
      {"BertPreTokenizer", sequence({bert, bytelevel(false)}), {}},
      {"CharDelimiterSplit", sequence({char_delimiter, bytelevel(false)}), {}},
      {"Split String MergedWithPrevious", sequence({string_split, bytelevel(true)}), {}},
      {"Punctuation Isolated", sequence({punctuation("Isolated"), bytelevel(false)}), {}},
      {"Punctuation Removed", sequence({punctuation("Removed"), bytelevel(false)}), {}},
      {"Punctuation MergedWithNext", sequence({punctuation("MergedWithNext"), bytelevel(false)}), {}},
      {"Digits runs", sequence({digits(false), bytelevel(true)}), {}},
      {"Split Contiguous", sequence({split(R"(\s)", "Contiguous"), bytelevel(false)}), {}},
      {"Split MergedWithNext lookahead",
       sequence({split(R"((?:\r?\n)+(?!\r?\n))", "MergedWithNext"), bytelevel(false)}),
       {}},
      {"Split MergedWithPrevious inverted",
       sequence({split(R"(\p{L}+)", "MergedWithPrevious", true), bytelevel(false)}),
       {}},
      {"Split Removed", sequence({split(R"(\s+)", "Removed"), bytelevel(false)}), {}},
      {"Split after ByteLevel", sequence({bytelevel(true), split(R"(\p{L}+)", "Isolated")}), {}},
      // ByteLevel's add_prefix_space puts a space before every piece the rules before it made.
      {"ByteLevel add_prefix_space", sequence({split(R"(\p{L}+)"), prefixed_bytelevel}), {}},
      {"ByteLevel add_prefix_space alone", prefixed_bytelevel, {}},
  };
}

std::string reference_dir() {
  const std::string dir = std::string(PARALLM_TOKENIZER_NPM_DIR) + "/node_modules/tokenizers";
  return std::filesystem::exists(dir + "/package.json") ? dir : std::string();
}

// Runs hf_pretokenize.mjs on {tokenizer, texts} entries; one result list per entry.
json run_reference(const json& request) {
  // One file per process: ctest runs this binary's tests side by side.
  const std::string path = testing::TempDir() + "hf_pretokenize_request_" + std::to_string(getpid()) + ".json";
  std::ofstream(path) << request.dump();
  const std::string here = PARALLM_TOKENIZER_TEST_DIR;
  const std::string out =
      command_output("node " + here + "/hf_pretokenize.mjs " + PARALLM_TOKENIZER_NPM_DIR + " " + path);
  std::filesystem::remove(path);
  return out.empty() ? json() : json::parse(out);
}

std::string show(const std::vector<std::string>& pieces) { return json(pieces).dump(); }

class PretokenizerReference : public testing::Test {
 protected:
  void SetUp() override {
    if (reference_dir().empty()) GTEST_SKIP() << "npm package tokenizers not installed";
    if (command_output("command -v node").empty()) GTEST_SKIP() << "node not found";
    corpus_ = json::parse(read_text_file(std::string(PARALLM_TOKENIZER_TEST_DIR) + "/pretok_corpus.json"));
  }
  json corpus_;
};

TEST_F(PretokenizerReference, FamiliesSplitLikeHuggingFace) {
  std::vector<Family> fams = families();
  for (Family& c : components()) fams.push_back(std::move(c));
  json request = json::array();
  for (const Family& f : fams)
    request.push_back({{"tokenizer", byte_level_tokenizer(f.pre_tokenizer)}, {"texts", corpus_}});
  const json reference = run_reference(request);
  ASSERT_EQ(reference.size(), fams.size()) << "hf_pretokenize.mjs gave no usable output";
  std::set<std::string> unchecked;
  for (const std::string& name : gguf_pre_names()) unchecked.insert(name);
  for (size_t k = 0; k < fams.size(); ++k) {
    const Family& f = fams[k];
    const auto tok = parse_tokenizer_json(byte_level_tokenizer(f.pre_tokenizer).dump(), "");
    std::vector<std::unique_ptr<Pretokenizer>> gguf;
    for (const std::string& name : f.gguf) gguf.push_back(std::make_unique<Pretokenizer>(rules_for_gguf_pre(name)));
    for (const std::string& name : f.gguf) unchecked.erase(name);
    int mismatches = 0;
    for (size_t i = 0; i < corpus_.size(); ++i) {
      const std::string text = corpus_[i].get<std::string>();
      const auto want_pieces = reference[k][i]["pieces"].get<std::vector<std::string>>();
      const auto want_ids = reference[k][i]["ids"].get<std::vector<int32_t>>();
      std::vector<std::string> got;
      bpe_pretokenize(tok->data(), text, got);
      for (std::string& p : got) p = byte_level(p);
      const auto ids = tok->encode(text, /*add_special=*/false, /*parse_special=*/false);
      mismatches += (got != want_pieces) + (ids != want_ids);
      EXPECT_EQ(show(got), show(want_pieces)) << f.name << " tokenizer.json, case " << i;
      EXPECT_EQ(ids_to_string(ids), ids_to_string(want_ids)) << f.name << " ids, case " << i;
      for (size_t g = 0; g < gguf.size(); ++g) {
        std::vector<std::string> from_gguf;
        for (std::string_view p : gguf[g]->split(text)) from_gguf.push_back(byte_level(p));
        mismatches += from_gguf != want_pieces;
        EXPECT_EQ(show(from_gguf), show(want_pieces)) << "GGUF pre '" << f.gguf[g] << "', case " << i;
      }
    }
    EXPECT_EQ(mismatches, 0) << f.name;
  }
  // Every name in the GGUF table is checked against some family here.
  EXPECT_TRUE(unchecked.empty()) << "GGUF pre names without a family here: " << json(unchecked).dump();
}

// A SentencePiece-style BPE tokenizer.json (U+2581 pieces, byte fallback)
// with a Metaspace pre-tokenizer and a special token.
json metaspace_tokenizer(const json& metaspace) {
  json vocab = {{"<unk>", 0}, {"<sep>", 1}};
  char byte_piece[8];
  for (int b = 0; b < 256; ++b) {
    std::snprintf(byte_piece, sizeof(byte_piece), "<0x%02X>", b);
    vocab[byte_piece] = static_cast<int>(vocab.size());
  }
  vocab["\u2581"] = static_cast<int>(vocab.size());
  for (char c = 33; c < 127; ++c) vocab[std::string(1, c)] = static_cast<int>(vocab.size());
  json merges = json::array();
  for (const char* m : {"\u2581 t", "h e", "\u2581t he", "\u2581 \u2581", "\u2581\u2581 \u2581\u2581", "e r", "i n",
                        "\u2581 a", "a \u2581", "1 2", "\u2581 x"}) {
    std::string merged = m;
    merged.erase(merged.find(' '), 1);
    merges.push_back(m);
    if (!vocab.contains(merged)) vocab[merged] = static_cast<int>(vocab.size());
  }
  return {{"version", "1.0"},
          {"added_tokens",
           {{{"id", 1},
             {"content", "<sep>"},
             {"single_word", false},
             {"lstrip", false},
             {"rstrip", false},
             {"normalized", false},
             {"special", true}}}},
          {"normalizer", nullptr},
          {"pre_tokenizer", metaspace},
          {"post_processor", nullptr},
          {"decoder", nullptr},
          {"model",
           {{"type", "BPE"},
            {"dropout", nullptr},
            {"unk_token", "<unk>"},
            {"continuing_subword_prefix", nullptr},
            {"end_of_word_suffix", nullptr},
            {"fuse_unk", true},
            {"byte_fallback", true},
            {"ignore_merges", false},
            {"vocab", vocab},
            {"merges", merges}}}};
}

TEST_F(PretokenizerReference, MetaspaceLikeHuggingFace) {
  json texts = corpus_;
  for (const char* t : {"a<sep>b", "<sep> x", "x <sep>y <sep>", " <sep>the", "the  there\u2581x"}) texts.push_back(t);
  const json m = {{"type", "Metaspace"}, {"replacement", "\u2581"}};
  std::vector<std::pair<std::string, json>> configs;
  for (const char* scheme : {"always", "first", "never"}) {
    for (bool split : {true, false}) {
      json c = m;
      c["prepend_scheme"] = scheme;
      c["split"] = split;
      configs.push_back({std::string(scheme) + (split ? " split" : ""), c});
    }
  }
  json legacy = m;  // the pre-0.14 form: add_prefix_space, no scheme, split by default
  legacy["add_prefix_space"] = true;
  configs.push_back({"legacy add_prefix_space", legacy});
  json request = json::array();
  for (const auto& [name, c] : configs) request.push_back({{"tokenizer", metaspace_tokenizer(c)}, {"texts", texts}});
  const json reference = run_reference(request);
  ASSERT_EQ(reference.size(), configs.size()) << "hf_pretokenize.mjs gave no usable output";
  for (size_t k = 0; k < configs.size(); ++k) {
    const auto tok = parse_tokenizer_json(metaspace_tokenizer(configs[k].second).dump(), "");
    int mismatches = 0;
    for (size_t i = 0; i < texts.size(); ++i) {
      const auto want = reference[k][i]["ids"].get<std::vector<int32_t>>();
      const auto ids = tok->encode(texts[i].get<std::string>(), /*add_special=*/false, /*parse_special=*/true);
      mismatches += ids != want;
      EXPECT_EQ(ids_to_string(ids), ids_to_string(want)) << "Metaspace " << configs[k].first << ", case " << i;
    }
    EXPECT_EQ(mismatches, 0) << configs[k].first;
  }
}

}  // namespace
}  // namespace parallm::test
