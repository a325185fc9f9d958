// Paged attention on a CUDA device for a mixed batch (prefill chunks and
// decode tokens of many sequences), over the block tables the CPU uses
// (kv_cache.h). Per-item math: math/attention.h.
#pragma once
#include <cstdint>

#include "device/stream_handle.h"
#include "kernels/cuda/kv_cache.h"

namespace parallm::cuda {

// What a layer's attention may see and how it bends scores, as
// cpu::AttendLimits: the last `window` positions (0 = all), and
// score -> softcap * tanh(score / softcap) after the scale (0 = off).
struct AttendLimits {
  int64_t window = 0;
  float softcap = 0.0f;
};

// out [n_tokens, n_head, head_dim] (device); q [n_tokens, n_head, head_dim]
// with RoPE applied; positions, seq_of_token [n_tokens]; block_tables
// [n_seqs, max_blocks_per_seq] row-major, sequence s's block i at
// block_tables[s * max_blocks_per_seq + i] (entries past a sequence's last
// block are not read). Token t attends causally to positions
// 0..positions[t] of its own sequence, whose K / V are already in the cache
// (kv_write first). n_head is a multiple of kv.n_kv_head (GQA: query head
// h reads KV head h / (n_head / n_kv_head)). With a q8_0 cache the query is
// rounded through q8_0 first, as the CPU kernel does. Softmax in f32 with
// the running max; agrees with cpu::paged_attention to f32 rounding.
// head_dim even and at most 256 (kAttnMaxHeadDim); for q8_0 also
// block_size * head_dim / 32 even (any even block_size). One block of 4
// warps per (token, query head), keys in 32-key tiles (math/attention.h).
void paged_attention(float* out, const float* q, const PagedKv& kv, const int32_t* positions,
                     const int32_t* seq_of_token, const int32_t* block_tables, int64_t max_blocks_per_seq,
                     int64_t n_tokens, int64_t n_head, float scale, AttendLimits limits, StreamHandle stream);

}  // namespace parallm::cuda
