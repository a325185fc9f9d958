// Helpers shared by the tokenizer tests: paths of the shared test files and
// the npm-installed tokenizer.json files, the llama.cpp test-vector reader,
// and a per-process cache so a large vocabulary loads once per test binary.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace parallm::test {

std::string shared_path(const std::string& relative);  // under PARALLM_SHARED_DIR

// Folder of an npm-installed tokenizer ("llama3", "qwen3") holding
// tokenizer.json + tokenizer_config.json, or "" when npm did not install it.
std::string npm_tokenizer_dir(const std::string& family);

// One test case: input text and the expected ids (no BOS).
using VocabVector = std::pair<std::string, std::vector<int32_t>>;
// Reads llama.cpp's <vocab>.inp / .out pair: inputs separated by lines
// "__ggml_vocab_test__", one line of space-separated ids per input.
std::vector<VocabVector> read_vocab_vectors(const std::string& inp_path, const std::string& out_path);

// Loads (once per process) and returns the tokenizer at `path`.
const Tokenizer& cached_tokenizer(const std::string& path);

std::string ids_to_string(const std::vector<int32_t>& ids);

}  // namespace parallm::test
