// GGUF `tokenizer.ggml.pre` values: which split rules each name stands for.
// llama.cpp's converter (convert_hf_to_gguf.py, get_vocab_base_pre) names a
// byte-level BPE vocabulary's pre-tokenizer by hashing what its tokenizer.json
// does to a probe text; llama.cpp (src/llama-vocab.cpp) then applies a regex
// list per name. The table below has every name llama.cpp knows, with the
// rules written as the family's tokenizer.json pre_tokenizer does them
// (Split / Digits / Punctuation in order, then ByteLevel), so that a GGUF
// vocabulary splits as its Hugging Face original. Where llama.cpp rewrote a
// pattern for its own regex engine (`'[sS]` for `(?i:'s)`, lookahead tricks
// for \p{Lu}), the original is used: PCRE2 compiles it. Patterns PCRE2 cannot
// compile as written are translated: BLOOM's nested class is flattened, and
// Kimi K2's class intersection `[...&&[^\p{Han}]]` becomes a negative
// lookahead before the class.
#include <algorithm>

#include "tokenizer/pretokenizer.h"
#include "util/check.h"

namespace parallm {
namespace {

using B = SplitBehavior;

// Patterns used by more than one family (the others sit in the table).
// GPT-4o / o200k (tiktoken), also Llama 4 and MiniMax M2: a cased word keeps
// its case run, contractions ride on words, digits in threes.
const char* const kO200k =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// DeepSeek V3's third Split (also Hunyuan dense, JoyAI, AFMoE): an ASCII
// punctuation mark may lead an ASCII word; letters take their marks.
const char* const kDeepseekV3Words =
    R"([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// DeepSeek V3's CJK Split: CJK Unified Ideographs up to U+9FA5, Hiragana, Katakana.
const char* const kDeepseekV3Cjk = "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+";
// DeepSeek LLM / Coder's CJK Split: ideographs, U+0800..U+4E00 (!), Hangul syllables.
const char* const kDeepseekCjk = "[\u4e00-\u9fa5\u0800-\u4e00\uac00-\ud7ff]+";
// BLOOM's Split ` ?[^(\s|[.,!?…。，、।۔،])]+`: Oniguruma reads the inner
// [...] as part of the outer class; PCRE2 needs it flattened.
const char* const kBloom = " ?[^(\\s|.,!?\u2026\u3002\uff0c\u3001\u0964\u06d4\u060c)]+";
// Contractions as the Qwen-style patterns write them.
#define PARALLM_CONTRACTIONS "(?i:'s|'t|'re|'ve|'m|'ll|'d)"

// One row: the names that mean it, the rules (in the tokenizer.json's
// order), and llama.cpp's flags for those names.
struct Family {
  std::vector<const char*> names;
  std::vector<SplitRule> rules;
  bool ignore_merges = false;
  bool add_bos = false;
};

SplitRule rule(const char* pattern, B behavior = B::kIsolated) { return {pattern, behavior, false, false}; }
// A rule after ByteLevel in the tokenizer.json: it sees the mapped text.
SplitRule after_byte_level(const char* pattern, B behavior = B::kIsolated) { return {pattern, behavior, false, true}; }

const std::vector<Family>& families() {
  static const std::vector<Family> table = {
      // ByteLevel with GPT-2's regex alone: GPT-2, Phi-2, MPT and OLMo
      // (GPT-NeoX's tokenizer), Jais, Trillion, Granite Docling, Jina
      // (es/de/v2, v1-en, v2-code), GigaChat, A.X 4.0, Mellum, ModernBERT,
      // EXAONE 4, RoBERTa-style BPE.
      {{"gpt-2",           "gpt2",    "phi-2",   "mpt",         "olmo",       "jais",       "trillion",
        "granite-docling", "jina-es", "jina-de", "jina-v2-es",  "jina-v2-de", "jina-v1-en", "jina-v2-code",
        "gigachat",        "a.x-4.0", "mellum",  "modern-bert", "exaone4",    "roberta-bpe"},
       {rule(kGpt2Pattern)}},
      // llama.cpp's fallback for a vocabulary it could not name (and for a
      // GGUF without the key): punctuation runs, GPT-2, digit runs, threes.
      {{"default"}, {rule(R"([\p{P}\$\+<=>\^~\|]+)"), rule(kGpt2Pattern), rule(R"(\p{N}+)"), rule("[0-9][0-9][0-9]")}},
      // Llama 3 (and 3.x), Falcon 3, Falcon-H1, Pixtral, Mi:dm 2.0, LFM2,
      // Jina v5 nano: the Llama 3 Split; merges are skipped for whole pieces.
      {{"llama-bpe", "llama3", "llama-v3", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2", "jina-v5-nano"},
       {rule(kLlama3Pattern)},
       /*ignore_merges=*/true,
       /*add_bos=*/true},
      // The same regex without Llama 3's flags: DBRX (cl100k), Smaug, GLM-4.
      {{"dbrx", "smaug-bpe", "chatglm-bpe", "glm4"}, {rule(kLlama3Pattern)}},
      // Jais 2: Llama 3's regex with whitespace runs cut at powers of two.
      {{"jais-2"},
       {rule(
           PARALLM_CONTRACTIONS
           R"(|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s{512}(?!\S)|\s{256}(?!\S)|\s{128}(?!\S)|\s{64}(?!\S)|\s{32}(?!\S)|\s{16}(?!\S)|\s{8}(?!\S)|\s{4}(?!\S)|\s{1,2}(?!\S)|\s{1})")}},
      // Qwen2 / Qwen3, the DeepSeek-R1 Qwen distills, StableLM 2, Hunyuan,
      // KORMo, F2LLM v2, Megrez, Solar Open, Grok 2: digits one by one.
      {{"qwen2", "deepseek-r1-qwen", "stablelm2", "hunyuan", "kormo", "f2llmv2", "megrez", "solar-open", "grok-2"},
       {rule(kQwen2Pattern)}},
      // Qwen3.5: letters take their combining marks.
      {{"qwen35"},
       {rule(PARALLM_CONTRACTIONS
             R"(|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)")}},
      // UfakZeka: Qwen2 without contractions (Turkish apostrophe suffixes stay on the word).
      {{"ufakzeka"}, {rule(R"([^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)")}},
      // Seed-Coder: single digits; punctuation runs stop before a newline.
      {{"seed-coder"},
       {rule(PARALLM_CONTRACTIONS
             R"(|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1}| ?[^\s\p{L}\p{N}\r\n]+|\s*[\r\n]+|\s+(?!\S)|\s+)")}},
      // Ling / Ring (BailingMoE 1 and 2), LLaDA-MoE: possessive quantifiers,
      // which PCRE2 has (llama.cpp made them greedy).
      {{"bailingmoe", "bailingmoe2", "llada-moe"},
       {rule(
           R"('(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+)")}},
      // EXAONE MoE: a word may run on across single spaces.
      {{"exaone-moe"},
       {rule(
           PARALLM_CONTRACTIONS
           R"(|[^\r\n\p{L}\p{N}]?(?:\p{L}\p{M}*(?: \p{L}\p{M}*)*)+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]?|\s*[\r\n]|\s+(?!\S)|\s+)")}},
      // MiniCPM 5: digits in threes first, then Llama 3's regex with digit runs.
      {{"minicpm5"},
       {rule(R"(\p{N}{1,3})"),
        rule(PARALLM_CONTRACTIONS
             R"(|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}+| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)")},
       /*ignore_merges=*/true},
      // Laguna: lines and newline runs apart, then Qwen2's regex.
      {{"laguna"}, {rule(R"([^\n]+|[\n]+)"), rule(kQwen2Pattern)}},
      // DeepSeek LLM (7B/67B, V2): newlines, Latin/Greek/Cyrillic/... words with
      // one leading space, ASCII and fullwidth punctuation runs, trailing
      // spaces, CJK and Hangul runs, single digits.
      {{"deepseek-llm"},
       {rule("[\r\n]"),
        rule("\\s?[A-Za-z\u00b5\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u01ba\u01bc-\u01bf\u01c4-\u0293\u0295-\u02af\u0370"
             "-\u0373\u0376\u0377\u037b-\u037d\u037f\u0386\u0388-\u038a\u038c\u038e-\u03a1\u03a3-\u03f5\u03f7-"
             "\u0481\u048a-\u052f\u0531-\u0556\u10a0-\u10c5\u13a0-\u13f5\u13f8-\u13fd\u1c90-\u1cba\u1cbd-\u1cbf"
             "\u1d00-\u1d2b\u1d6b-\u1d77\u1d79-\u1d9a\u1e00-\u1f15\u1f18-\u1f1d\u1f20-\u1f45\u1f48-\u1f4d\u1f50"
             "-\u1f57\u1f59\u1f5b\u1f5d\u1f5f-\u1f7d\u1f80-\u1fb4\u1fb6-\u1fbc\u1fbe\u1fc2-\u1fc4\u1fc6-\u1fcc"
             "\u1fd0-\u1fd3\u1fd6-\u1fdb\u1fe0-\u1fec\u1ff2-\u1ff4\u1ff6-\u1ffc\u2102\u2107\u210a-\u2113\u2115"
             "\u2119-\u211d\u2124\u2126\u2128\u212a-\u212d\u212f-\u2134\u2139\u213c-\u213f\u2145-\u2149\u214e\u2183"
             "\u2184\u2c00-\u2c7b\u2c7e-\u2ce4\u2ceb-\u2cee\u2cf2\u2cf3\ua640-\ua66d\ua680-\ua69b\ua722-\ua76f"
             "\ua771-\ua787\ua78b-\ua78e\uab70-\uabbf\ufb00-\ufb06\ufb13-\ufb17\uff21-\uff3a\uff41-\uff5a\U00010400"
             "-\U0001044f\U000104b0-\U000104d3\U000104d8-\U000104fb\U00010c80-\U00010cb2\U00010cc0-\U00010cf2\U000118a0"
             "-\U000118df\U0001e900-\U0001e943]+"),
        rule("\\s?[!-/:-~\uff01-\uff0f\uff1a-\uff5e\u2018-\u201f\u3000-\u3002]+"), rule(R"(\s+$)"), rule(kDeepseekCjk),
        rule(R"(\p{N})")}},
      // DeepSeek Coder (1.x): newlines, space-led letter and punctuation runs,
      // CJK and Hangul runs, single digits.
      {{"deepseek-coder"},
       {rule("[\r\n]"), rule(R"(\s?\p{L}+)"), rule(R"(\s?\p{P}+)"), rule(kDeepseekCjk), rule(R"(\p{N})")}},
      // DeepSeek V3 / R1, Hunyuan dense, JoyAI, HY v4: digits in threes, CJK
      // runs, then words.
      {{"deepseek-v3", "hunyuan-dense", "joyai-llm", "hy_v4"},
       {rule(R"(\p{N}{1,3})"), rule(kDeepseekV3Cjk), rule(kDeepseekV3Words)}},
      // Spark 2.5: DeepSeek V3's shape, newlines alone, then single digits.
      {{"spark2_5"},
       {rule(R"(\p{N}{1,3})"), rule(kDeepseekV3Cjk),
        rule(
            R"([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+|[\r\n]|\s+(?!\S)|\s+)"),
        rule(R"(\p{N})")}},
      // AFMoE: digit runs cut in threes from the right (1234 -> 1, 234),
      // CJK / Thai / Lao / Khmer / Myanmar / Hangul runs, DeepSeek V3's words.
      {{"afmoe"},
       {rule(R"(\p{N}{1,3}(?=(?:\p{N}{3})*(?!\p{N})))"),
        rule("[\u4e00-\u9fff\u3400-\u4dbf\uf900-\ufaff\u3040-\u309f\u30a0-\u30ff\uff65-\uff9f\u2f00-\u2fdf"
             "\u0e00-\u0e7f\u0e80-\u0eff\u1780-\u17ff\u1000-\u109f\uaa60-\uaa7f\ua9e0-\ua9ff\uac00-\ud7af"
             "\u1100-\u11ff]+"),
        rule(kDeepseekV3Words)}},
      // Youtu: Hangul / CJK punctuation / Bopomofo / CJK runs, then o200k
      // with single digits.
      {{"youtu"},
       {rule("[\uac00-\ud7a3\u3131-\u318e]+|[\uff01\u2026\u201c\u201d\u2018\u2019\u2014\uff1a\uff1b\uff0c\u3001-"
             "\u303f\ufe30-\ufe4f]+|[\u3105-\u312f]+|[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+"),
        rule(
            R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)")},
       /*ignore_merges=*/true},
      // Falcon (7B/40B/RW, Mamba): Punctuation (Contiguous), ByteLevel with
      // GPT-2's regex, then Digits (runs) and threes on the mapped text.
      {{"falcon"},
       {rule(kPunctuationChar, B::kContiguous), rule(kGpt2Pattern), after_byte_level(R"(\p{N})", B::kContiguous),
        after_byte_level("[0-9][0-9][0-9]")}},
      // Digits one by one, then ByteLevel with GPT-2's regex: StarCoder,
      // Refact, Command R, SmolLM, CodeShell, EXAONE 3, Minerva, Mellum 2.
      {{"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b", "mellum2"},
       {rule(R"(\p{N})"), rule(kGpt2Pattern)}},
      // BLOOM, Poro, GPT-3 Finnish: everything but spaces and a few stops.
      {{"bloom", "poro-chat", "gpt3-finnish"}, {rule(kBloom)}},
      // Viking: BLOOM's split, then single digits.
      {{"viking"}, {rule(kBloom), rule(R"(\p{N})")}},
      // Mistral's Tekken (Nemo, Pixtral-style tiktoken): o200k's shape
      // without contractions, single digits.
      {{"tekken"},
       {rule(
           R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)")},
       /*ignore_merges=*/true,
       /*add_bos=*/true},
      // Chameleon: sentinel and image tokens, tabs/newlines and 4- or
      // 2-space runs, single digits, single punctuation, then GPT-2.
      {{"chameleon"},
       {rule("<sentinel:[0-9]+>"), rule("(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z"), rule("([\t\n]|    |  )"),
        rule(R"(\p{N})"), rule(R"([\p{P}!-/:-@\[-`{-~])"), rule(kGpt2Pattern)},
       /*ignore_merges=*/false,
       /*add_bos=*/true},
      {{"gpt-4o", "llama4", "kanana2", "talkie", "minimax-m2"}, {rule(kO200k)}},
      // Granite embedding multilingual 97M: o200k whose case runs take
      // combining marks (llama.cpp's form, lookaheads included).
      {{"granite-embed-multi-97m"},
       {rule(
           R"([^\r\n\p{L}\p{N}]?(?:(?=[\p{L}\p{M}])[^a-z])*(?:(?=[\p{L}\p{M}])[^A-Z])+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?(?:(?=[\p{L}\p{M}])[^a-z])+(?:(?=[\p{L}\p{M}])[^A-Z])*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)")},
       /*ignore_merges=*/true},
      // Tiny Aya, Cohere 2 MoE: digit runs cut in threes from the right, then o200k.
      {{"tiny_aya", "cohere2moe"}, {rule(R"(\d{1,3}(?=(?:\d{3})*\b))"), rule(kO200k)}},
      // SuperBPE: digit runs, each cut in threes from the right by an empty match.
      {{"superbpe"}, {rule(R"(\p{N}+)"), rule(R"((?=(\d{3})+(?!\d)))")}},
      // Kimi K2 (tiktoken, no tokenizer.json): Han runs, then o200k's words
      // without Han letters. sc:Han is the Script property, as tiktoken and
      // Oniguruma read \p{Han} (PCRE2's \p{Han} also takes "。").
      {{"kimi-k2"},
       {rule(
           R"(\p{sc:Han}+|[^\r\n\p{L}\p{N}]?(?:(?!\p{sc:Han})[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}])*(?:(?!\p{sc:Han})[\p{Ll}\p{Lm}\p{Lo}\p{M}])+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?(?:(?!\p{sc:Han})[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}])+(?:(?!\p{sc:Han})[\p{Ll}\p{Lm}\p{Lo}\p{M}])*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)")}},
  };
  return table;
}

#undef PARALLM_CONTRACTIONS

// Names llama.cpp knows that are not byte-level BPE: their vocabularies keep
// raw UTF-8 with U+2581 for spaces (Gemma 4 style) or split on whitespace.
constexpr const char* kNotByteLevel[] = {"gemma4", "granite-embed-multi-311m", "sarvam-moe", "whitespace"};

}  // namespace

std::vector<std::string> gguf_pre_names() {
  std::vector<std::string> names;
  for (const Family& f : families()) names.insert(names.end(), f.names.begin(), f.names.end());
  return names;
}

GgufPre gguf_pre(const std::string& pre) {
  for (const Family& f : families()) {
    if (std::find(f.names.begin(), f.names.end(), pre) != f.names.end()) {
      return {f.rules, f.ignore_merges, f.add_bos};
    }
  }
  for (const char* name : kNotByteLevel) {
    if (pre == name) {
      throw InputError("unsupported tokenizer.ggml.pre '" + pre +
                       "': its vocabulary is not byte-level BPE (raw UTF-8 pieces), which parallm's GGUF "
                       "loader does not read");
    }
  }
  std::string list;
  for (const std::string& name : gguf_pre_names()) list += (list.empty() ? "" : ", ") + name;
  throw InputError("unsupported tokenizer.ggml.pre '" + pre + "' (supported: " + list + ")");
}

std::vector<SplitRule> rules_for_gguf_pre(const std::string& pre) { return gguf_pre(pre).rules; }

}  // namespace parallm
