// Attention over a paged KV cache, for a mixed batch of sequences at
// different positions (prefill chunks and decode tokens together).
//
// KV layout per layer: [n_blocks, n_kv_head, block_size, head_dim] in the
// cache dtype, so one head's block is contiguous and is widened to f32 in one
// call. f32, f16 and bf16 hold each value; q8_0 holds each head's row as
// ggml q8_0 blocks (32 values in 34 bytes: an f16 scale and 32 int8), about
// half of f16's bytes, for head sizes that are multiples of 32. Token `p` of a sequence lives in block
// block_table[p / block_size], row p % block_size ("slot" = block * block_size + row).
// Each query attends causally to positions 0..its own position of its own
// sequence; the caller writes the batch's K/V (kv_write) before attending.
#pragma once
#include <cstdint>

#include "core/dtype.h"
#include "util/thread_pool.h"

namespace parallm::cpu {

struct PagedKv {
  void* k = nullptr;  // [n_blocks, n_kv_head, block_size, head_dim]
  void* v = nullptr;  // [n_blocks, n_kv_head, block_size, head_dim]
  DType dtype = DType::kF32;
  int64_t block_size = 16;
  int64_t n_kv_head = 0;
  int64_t head_dim = 0;
};

// Whether a cache of dtype t can hold heads of head_dim values.
bool kv_dtype_supported(DType t, int64_t head_dim);
// Bytes of one head's row (head_dim values) in the cache.
size_t kv_row_bytes(const PagedKv& kv);

// Stores k/v rows [n_tokens, n_kv_head * head_dim] at slots[n_tokens].
void kv_write(const PagedKv& kv, const float* k, const float* v, const int64_t* slots, int64_t n_tokens);

// The batch's own K/V rows, for paged_attention to store before it attends.
struct KvRows {
  const float* k;        // [n_tokens, n_kv_head * head_dim]
  const float* v;
  const int64_t* slots;  // [n_tokens]
};

// out [n_tokens, n_head, head_dim]; q [n_tokens, n_head, head_dim] (RoPE applied);
// positions [n_tokens]; block_tables[seq_of_token[t]] lists that sequence's blocks.
// With `write`, the batch's rows are stored first (as kv_write does), shared
// by the threads of the same parallel region when the batch is large.
void paged_attention(float* out, const float* q, const PagedKv& kv, const int32_t* positions,
                     const int32_t* seq_of_token, const int32_t* const* block_tables, int64_t n_tokens,
                     int64_t n_head, float scale, ThreadPool& pool, const KvRows* write = nullptr);

}  // namespace parallm::cpu
