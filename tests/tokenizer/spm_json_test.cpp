// SentencePiece-style tokenizer.json (Llama 2 / Mistral layout: Prepend and
// Replace normalizers, byte fallback, ranked merges). No such file ships in
// shared/, so the test writes one from the Llama 2 GGUF vocabulary the way
// Hugging Face's converter does (every split of a piece into two pieces is a
// merge, ranked by the merged piece's score) and checks that the ranked-merge
// path reproduces the llama-spm vectors too.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <tuple>

#include "loader/gguf_reader.h"
#include "test_util.h"

namespace parallm::test {
namespace {

std::string llama2_tokenizer_json() {
  const GgufFile gguf(shared_path("models/vocab/ggml-vocab-llama-spm.gguf"));
  const auto pieces = gguf.get_string_array("tokenizer.ggml.tokens");
  const auto scores = gguf.get_float_array("tokenizer.ggml.scores");
  const auto types = gguf.get_int_array("tokenizer.ggml.token_type");
  nlohmann::json vocab = nlohmann::json::object();
  std::map<std::string, int32_t> normal;
  for (size_t i = 0; i < pieces.size(); ++i) {
    vocab[pieces[i]] = i;
    if (types[i] == 1) normal.emplace(pieces[i], static_cast<int32_t>(i));
  }
  std::vector<std::tuple<float, int32_t, int32_t, std::string, std::string>> merges;
  for (const auto& [piece, id] : normal) {
    for (size_t k = 1; k < piece.size(); ++k) {
      auto l = normal.find(piece.substr(0, k));
      auto r = normal.find(piece.substr(k));
      if (l != normal.end() && r != normal.end()) {
        merges.emplace_back(-scores[id], l->second, r->second, l->first, r->first);
      }
    }
  }
  std::sort(merges.begin(), merges.end());
  nlohmann::json merge_list = nlohmann::json::array();
  for (const auto& m : merges) merge_list.push_back({std::get<3>(m), std::get<4>(m)});
  nlohmann::json added = nlohmann::json::array();
  for (int id : {0, 1, 2}) added.push_back({{"id", id}, {"content", pieces[id]}, {"special", true}});
  const nlohmann::json root = {
      {"model",
       {{"type", "BPE"}, {"vocab", vocab}, {"merges", merge_list}, {"byte_fallback", true}, {"unk_token", "<unk>"}}},
      {"normalizer",
       {{"type", "Sequence"},
        {"normalizers",
         {{{"type", "Prepend"}, {"prepend", "\xE2\x96\x81"}},
          {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "\xE2\x96\x81"}}}}}},
      {"pre_tokenizer", nullptr},
      {"added_tokens", added}};
  return root.dump();
}

TEST(SentencePieceTokenizerJson, RankedMergesReproduceLlamaSpmVectors) {
  const auto tok = parse_tokenizer_json(llama2_tokenizer_json(),
                                        R"({"add_bos_token": true, "bos_token": "<s>", "eos_token": "</s>"})");
  EXPECT_EQ(tok->kind_name(), "sentencepiece");
  EXPECT_EQ(tok->bos_id(), 1);
  EXPECT_TRUE(tok->add_bos());
  const std::string base = shared_path("models/vocab/ggml-vocab-llama-spm.gguf");
  int failures = 0;
  for (const auto& [text, expected] : read_vocab_vectors(base + ".inp", base + ".out")) {
    const auto ids = tok->encode(text, false, false);
    failures += ids != expected;
    EXPECT_EQ(ids_to_string(ids), ids_to_string(expected)) << "'" << text << "'";
    EXPECT_EQ(tok->decode(ids), text);
  }
  EXPECT_EQ(failures, 0);
  EXPECT_EQ(tok->encode("Hi</s>", true).back(), 2);
}

}  // namespace
}  // namespace parallm::test
