// ForwardBatch: the tokens of one engine step, possibly from many sequences
// at different positions (prefill chunks and decode tokens mixed). Plain data
// built by the engine from the scheduler's plan.
#pragma once
#include <cstdint>
#include <vector>

namespace parallm {

struct ForwardBatch {
  std::vector<int32_t> tokens;               // [n_tokens] token ids
  std::vector<int32_t> positions;            // [n_tokens] position of each token in its sequence
  std::vector<int32_t> seq_of_token;         // [n_tokens] index into block_tables
  std::vector<int64_t> slots;                // [n_tokens] KV slot (block * block_size + row) of each token
  std::vector<const int32_t*> block_tables;  // [n_seqs] each sequence's KV block ids
  std::vector<int32_t> logit_rows;           // indices into tokens whose logits are wanted (e.g. each sequence's last)
  // [2 * n_pooled] token-row ranges [begin, end): the last stage sums each
  // range's final-norm hidden states into one pooled row [n_embd] (embeddings:
  // the serving engine adds a prompt's chunks and takes the mean).
  std::vector<int32_t> pool_ranges;

  int64_t n_pooled() const { return static_cast<int64_t>(pool_ranges.size() / 2); }

  int64_t n_tokens() const { return static_cast<int64_t>(tokens.size()); }

  // Appends `n` tokens of sequence `seq` starting at position `pos0`.
  void add_sequence_tokens(const int32_t* ids, int64_t n, int32_t pos0, int32_t seq, const int32_t* block_table,
                           int64_t block_size, bool want_last_logits) {
    for (int64_t i = 0; i < n; ++i) {
      const int32_t p = pos0 + static_cast<int32_t>(i);
      tokens.push_back(ids[i]);
      positions.push_back(p);
      seq_of_token.push_back(seq);
      slots.push_back(static_cast<int64_t>(block_table[p / block_size]) * block_size + p % block_size);
    }
    if (static_cast<int64_t>(block_tables.size()) <= seq) block_tables.resize(static_cast<size_t>(seq) + 1);
    block_tables[static_cast<size_t>(seq)] = block_table;
    if (want_last_logits && n > 0) logit_rows.push_back(static_cast<int32_t>(tokens.size() - 1));
  }
  void clear() {
    tokens.clear();
    positions.clear();
    seq_of_token.clear();
    slots.clear();
    block_tables.clear();
    logit_rows.clear();
    pool_ranges.clear();
  }
};

}  // namespace parallm
