// Request shaping: what each request of a level asks for. Prompts come from a
// seeded word list (one common English word ~ one token in BPE vocabularies;
// a chat template adds a few more, which the server's `usage` then reports) or
// from a JSONL dataset. Each request's content depends only on (seed, level,
// index), so two runs with the same seed send the same bytes.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "loadtest/bench_options.h"

namespace parallm::loadtest {

struct PreparedRequest {
  std::string http_bytes;         // the whole HTTP/1.1 request, ready to write
  int64_t prompt_tokens_est = 0;  // words in the prompt, our token estimate
  int64_t max_tokens = 0;
};

// One dataset line: {"prompt": "..."} or {"messages": [...]} or ShareGPT
// {"conversations": [{"from": "human", "value": "..."}, ...]}, with an
// optional "output_len" (or "max_tokens").
struct DatasetEntry {
  std::string prompt;       // used when messages is null
  nlohmann::json messages;  // chat messages, or null
  int64_t output_len = 0;   // 0: use --output-len
  int64_t prompt_words = 0;
};

// Throws InputError naming the file and line on anything unusable.
std::vector<DatasetEntry> load_dataset(const std::string& path);

// `n_words` words drawn from the built-in list with `rng_state` (splitmix64).
std::string word_prompt(int64_t n_words, uint64_t& rng_state);

// Request `index` of bench level `level` with `seed`: its prompt words (or
// tokens, to `simulate`) and its max_tokens. A stream of its own, apart from
// the prompt's words, so `parallm simulate --seed S` gives its requests the
// lengths bench's run with --seed S sent.
struct RequestLengths {
  int64_t input = 0, output = 0;
};
RequestLengths request_lengths(uint64_t seed, int level, int64_t index, const IntRange& input_len,
                               const IntRange& output_len);

class Workload {
 public:
  Workload(const BenchOptions& options, std::string model);
  PreparedRequest make(int level, int64_t index) const;
  // The JSON body alone (for tests and docs).
  nlohmann::json body(int level, int64_t index, int64_t* prompt_tokens_est, int64_t* max_tokens) const;

 private:
  const BenchOptions& options_;
  std::string model_;
  std::string path_;
  std::vector<DatasetEntry> dataset_;
  std::vector<size_t> order_;  // seeded shuffle of dataset_
};

uint64_t splitmix64(uint64_t& state);

}  // namespace parallm::loadtest
