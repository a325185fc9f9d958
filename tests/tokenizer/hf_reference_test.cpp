// Token ids of real tokenizer.json files against transformers.js, an
// independent implementation (npm @lenml/tokenizers, run with node): every
// family's ids for a corpus of texts (scripts, digits, whitespace runs, code,
// emoji, special-token text, text that Unicode normalization changes), with
// and without the special tokens the tokenizer adds. The families cover the
// components parallm reads: Split regexes with every behaviour used
// (Isolated, Removed + invert), NFC and NFKC normalizers, SentencePiece-style
// BPE with byte fallback (Llama 2, Gemma) and user-defined added tokens that
// merges build (Gemma's "\n\n", "▁▁"), and the post_processor templates that
// decide BOS. The byte-level families are also written as GGUF vocabularies
// (tokenizer.ggml.* with the family's `pre` name, as llama.cpp's converter
// does) and checked the same way, which covers the GGUF pre-tokenizer rules,
// and Gemma's as a SentencePiece GGUF (model "llama", add_space_prefix false).
// The texts are hf_corpus.json and the pre-tokenizer test's
// pretok_corpus.json. Skips when node or the npm packages are missing.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "common/command_output.h"
#include "loader/gguf_reader.h"
#include "loader/gguf_writer.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"
#include "util/mapped_file.h"

namespace parallm::test {
namespace {

using nlohmann::json;

// The GGUF `tokenizer.ggml.pre` name of each byte-level family's regexes.
const char* gguf_pre_name(const std::string& family) {
  if (family == "llama3" || family == "llama3_1") return "llama-bpe";
  if (family == "qwen3") return "qwen2";
  if (family == "deepseek_v3") return "deepseek-v3";
  if (family == "gpt35turbo") return "dbrx";  // cl100k, the same regex
  if (family == "gpt4o") return "gpt-4o";
  return nullptr;
}

// A GGUF vocabulary from a byte-level tokenizer.json, written as llama.cpp's
// converter writes one: every id's piece and type, merges as "a b" lines.
void write_gguf_vocab(const std::string& tokenizer_json, const char* pre, const std::string& out) {
  const json root = json::parse(read_text_file(tokenizer_json));
  const json& vocab = root.at("model").at("vocab");
  size_t n = 0;
  for (const auto& [piece, id] : vocab.items()) n = std::max(n, id.get<size_t>() + 1);
  for (const auto& t : root.at("added_tokens")) n = std::max(n, t.at("id").get<size_t>() + 1);
  std::vector<std::string> tokens(n);
  std::vector<int64_t> types(n, 5);  // unused
  for (size_t i = 0; i < n; ++i) tokens[i] = "[UNUSED_" + std::to_string(i) + "]";
  for (const auto& [piece, id] : vocab.items()) {
    tokens[id.get<size_t>()] = piece;
    types[id.get<size_t>()] = 1;  // normal
  }
  for (const auto& t : root.at("added_tokens")) {
    tokens[t.at("id").get<size_t>()] = t.at("content").get<std::string>();
    types[t.at("id").get<size_t>()] = t.value("special", false) ? 3 : 4;  // control, user
  }
  std::vector<std::string> merges;
  for (const auto& m : root.at("model").at("merges")) {
    merges.push_back(m.is_string() ? m.get<std::string>() : m[0].get<std::string>() + " " + m[1].get<std::string>());
  }
  GgufWriter w;
  w.set_string("general.architecture", "llama");
  w.set_string("tokenizer.ggml.model", "gpt2");
  w.set_string("tokenizer.ggml.pre", pre);
  w.set_string_array("tokenizer.ggml.tokens", tokens);
  w.set_int_array("tokenizer.ggml.token_type", GgufType::kI32, types);
  w.set_string_array("tokenizer.ggml.merges", merges);
  w.write_file(out);
}

// A SentencePiece GGUF vocabulary from a SentencePiece-style tokenizer.json,
// shaped as llama.cpp's converter writes Gemma's: model "llama", one score
// per piece (a merged piece scores minus the rank of the first merge that
// builds it, so the highest score is the merge Hugging Face does first),
// byte pieces typed 6, added tokens control / user-defined, and
// add_space_prefix false (Gemma's normalizer puts no dummy prefix).
void write_spm_gguf_vocab(const std::string& tokenizer_json, const std::string& out) {
  const json root = json::parse(read_text_file(tokenizer_json));
  const json& vocab = root.at("model").at("vocab");
  size_t n = 0;
  for (const auto& [piece, id] : vocab.items()) n = std::max(n, id.get<size_t>() + 1);
  std::vector<std::string> tokens(n);
  std::vector<int64_t> types(n, 1);
  std::vector<float> scores(n, -1e9f);
  std::unordered_map<std::string, size_t> ids;
  for (const auto& [piece, id] : vocab.items()) {
    tokens[id.get<size_t>()] = piece;
    ids[piece] = id.get<size_t>();
    const bool byte_piece = piece.size() == 6 && piece.rfind("<0x", 0) == 0;
    if (byte_piece) types[id.get<size_t>()] = 6;
  }
  int rank = 0;
  for (const auto& m : root.at("model").at("merges")) {
    const std::string line =
        m.is_string() ? m.get<std::string>() : m[0].get<std::string>() + " " + m[1].get<std::string>();
    const size_t space = line.find(' ', 1);
    const auto it = ids.find(line.substr(0, space) + line.substr(space + 1));
    if (it != ids.end() && scores[it->second] == -1e9f) scores[it->second] = -static_cast<float>(rank);
    ++rank;
  }
  for (const auto& t : root.at("added_tokens")) {
    types[t.at("id").get<size_t>()] = t.value("special", false) ? 3 : 4;  // control, user-defined
  }
  const std::string unk = root.at("model").value("unk_token", "");
  if (ids.count(unk)) types[ids[unk]] = 2;
  GgufWriter w;
  w.set_string("general.architecture", "gemma");
  w.set_string("tokenizer.ggml.model", "llama");
  w.set_string_array("tokenizer.ggml.tokens", tokens);
  w.set_f32_array("tokenizer.ggml.scores", scores);
  w.set_int_array("tokenizer.ggml.token_type", GgufType::kI32, types);
  w.set_bool("tokenizer.ggml.add_space_prefix", false);
  w.set_u32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(ids.count("<bos>") ? ids["<bos>"] : 2));
  w.set_u32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(ids.count("<eos>") ? ids["<eos>"] : 1));
  w.set_u32("tokenizer.ggml.unknown_token_id", static_cast<uint32_t>(ids.count(unk) ? ids[unk] : 3));
  w.write_file(out);
}

class HfReference : public testing::TestWithParam<const char*> {};

TEST_P(HfReference, IdsEqualTransformersJs) {
  const std::string family = GetParam();
  const std::string dir = npm_tokenizer_dir(family);
  if (dir.empty()) GTEST_SKIP() << "npm package @lenml/tokenizer-" << family << " not installed";
  if (command_output("command -v node").empty()) GTEST_SKIP() << "node not found";
  const std::string here = PARALLM_TOKENIZER_TEST_DIR;
  // Both corpora: this test's and the pre-tokenizer test's tricky texts.
  json both = json::parse(read_text_file(here + "/hf_corpus.json"));
  for (const auto& text : json::parse(read_text_file(here + "/pretok_corpus.json"))) both.push_back(text);
  const std::string corpus_path = testing::TempDir() + "hf_reference_corpus_" + family + ".json";
  std::ofstream(corpus_path) << both.dump();
  const std::string out = command_output("node " + here + "/hf_reference.mjs " + PARALLM_TOKENIZER_NPM_DIR + " " +
                                         family + " " + corpus_path);
  ASSERT_FALSE(out.empty()) << "hf_reference.mjs gave no output for " << family;
  const json reference = json::parse(out);
  const json corpus = json::parse(read_text_file(corpus_path));
  std::filesystem::remove(corpus_path);
  ASSERT_EQ(reference.size(), corpus.size());

  std::unique_ptr<Tokenizer> gguf;
  if (const char* pre = gguf_pre_name(family)) {
    const std::string path = testing::TempDir() + "hf_reference_" + family + ".gguf";
    write_gguf_vocab(dir + "/tokenizer.json", pre, path);
    gguf = load_tokenizer(path);
    std::filesystem::remove(path);
  } else if (family == "gemini") {  // Gemma: the SentencePiece GGUF path
    const std::string path = testing::TempDir() + "hf_reference_" + family + ".gguf";
    write_spm_gguf_vocab(dir + "/tokenizer.json", path);
    gguf = load_tokenizer(path);
    std::filesystem::remove(path);
  }
  const auto tok = load_tokenizer(dir);
  int mismatches = 0;
  for (size_t i = 0; i < corpus.size(); ++i) {
    const std::string text = corpus[i].get<std::string>();
    const auto without = reference[i]["without"].get<std::vector<int32_t>>();
    auto with = reference[i]["with"].get<std::vector<int32_t>>();
    if (family == "deepseek_v3") {
      // transformers.js keeps the file's post_processor (no template), but
      // Python transformers' LlamaTokenizerFast rebuilds it from
      // tokenizer_config.json's add_bos_token: true, and so does parallm.
      ASSERT_EQ(with, without);
      with.insert(with.begin(), 0);  // <｜begin▁of▁sentence｜>
    }
    const auto got_without = tok->encode(text, /*add_special=*/false, /*parse_special=*/true);
    const auto got_with = tok->encode(text, /*add_special=*/true, /*parse_special=*/true);
    mismatches += (got_without != without) + (got_with != with);
    EXPECT_EQ(ids_to_string(got_without), ids_to_string(without)) << family << " case " << i;
    EXPECT_EQ(ids_to_string(got_with), ids_to_string(with)) << family << " case " << i;
    if (gguf) {
      // Qwen's NFC is a tokenizer.json normalizer; GGUF (as llama.cpp) has none.
      const bool nfc_changes = family == "qwen3" && unicode_normalize(text, UnicodeForm::kNfc) != text;
      if (!nfc_changes) {
        const auto got_gguf = gguf->encode(text, /*add_special=*/false, /*parse_special=*/true);
        mismatches += got_gguf != without;
        EXPECT_EQ(ids_to_string(got_gguf), ids_to_string(without)) << family << " GGUF case " << i;
      }
    }
  }
  EXPECT_EQ(mismatches, 0) << family;
}

INSTANTIATE_TEST_SUITE_P(Families, HfReference,
                         testing::Values("llama2", "llama3", "llama3_1", "qwen3", "deepseek_v3", "gemini", "claude",
                                         "gpt35turbo", "gpt4o"),
                         [](const testing::TestParamInfo<const char*>& info) { return std::string(info.param); });

}  // namespace
}  // namespace parallm::test
