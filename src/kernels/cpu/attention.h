// Attention over a paged KV cache, for a mixed batch of sequences at
// different positions (prefill chunks and decode tokens together).
//
// KV layout per layer: [n_blocks, n_kv_head] chunks of block_size rows in the
// cache dtype, so one head's block is contiguous. f32, f16 and bf16 chunks
// are [block_size, head_dim] values. A q8_0 chunk (head sizes that are
// multiples of 32; about half of f16's bytes) quantizes each row per 32
// values as ggml's q8_0 does (d = amax / 127 as f16, q = round(x / d) in
// int8) but stores the quants [block_size, head_dim] first and then the
// scales [head_dim / 32, block_size]: each row's quants are contiguous, and
// the scales of consecutive rows too, for the vector kernels. A chunk is
// block_size * kv_row_bytes() bytes either way. With a q8_0 cache the
// queries are rounded through q8_0 as well (ggml's q8_0 cache does the
// same), so keys are scored with integer dot products.
// Token `p` of a sequence lives in block block_table[p / block_size], row
// p % block_size ("slot" = block * block_size + row).
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

// What a layer's attention may see and how it bends scores (Gemma): a
// sliding window of the last `window` positions (the query's own included;
// 0 = all), and soft-capping, score -> softcap * tanh(score / softcap)
// after the scale (0 = off). Either one runs the portable kernel.
struct AttendLimits {
  int64_t window = 0;
  float softcap = 0.0f;
};

// The batch's own K/V rows, for paged_attention to store before it attends.
struct KvRows {
  const float* k;  // [n_tokens, n_kv_head * head_dim]
  const float* v;
  const int64_t* slots;  // [n_tokens]
};

// out [n_tokens, n_head, head_dim]; q [n_tokens, n_head, head_dim] (RoPE applied);
// positions [n_tokens]; block_tables[seq_of_token[t]] lists that sequence's blocks.
// With `write`, the batch's rows are stored first (as kv_write does), shared
// by the threads of the same parallel region when the batch is large.
void paged_attention(float* out, const float* q, const PagedKv& kv, const int32_t* positions,
                     const int32_t* seq_of_token, const int32_t* const* block_tables, int64_t n_tokens, int64_t n_head,
                     float scale, ThreadPool& pool, const KvRows* write = nullptr, AttendLimits limits = {});

}  // namespace parallm::cpu
