// AVX-512 paged attention for one (query token, KV head) task: keys and
// values are read straight from the cache in its dtype (f16/bf16 widened in
// registers), and the next blocks are prefetched while this one is scored.
//
// NOTE: the portable loop (attention.cpp) first widened each 2 KB block to an
// f32 scratch row; with 32 sequences decoding together that copy was 15% of a
// step in perf, most of it waiting on DRAM: each (block, head) chunk is a
// short stream the hardware prefetcher does not ramp up on, and the blocks of
// one sequence are scattered through the pool. Prefetching two blocks ahead
// hides that latency.
#include <algorithm>

#include "kernels/cpu/avx512_common.h"
#include "util/check.h"

namespace parallm::cpu::avx512 {

namespace {

constexpr int64_t kPrefetchBlocks = 2;  // blocks ahead of the one being read

// Bytes of one (block, head) chunk: block_size rows of head_dim elements.
template <class L>
inline int64_t chunk_bytes(const AttendTask& a) {
  return a.block_size * a.head_dim * L::kBytes;
}

// Pointer to (block table[b], head h_kv) in a pool.
template <class L>
inline const char* chunk(const AttendTask& a, const char* pool, int64_t b) {
  return pool + (a.table[b] * a.n_kv_head + a.h_kv) * chunk_bytes<L>(a);
}

template <class L>
inline void prefetch_chunk(const AttendTask& a, const char* pool, int64_t b, int64_t n_blocks) {
  if (b >= n_blocks) return;
  const char* p = chunk<L>(a, pool, b);
  for (int64_t off = 0; off < chunk_bytes<L>(a); off += 64) _mm_prefetch(p + off, _MM_HINT_T0);
}

// out_g = sum_p scores[g][p] * v_p. NV > 0: head_dim = 16 NV, the output
// stays in NV registers across all blocks; NV = 0: any multiple of 16, the
// output accumulates in memory (L1).
template <class L, int NV>
void weighted_sum(const AttendTask& a, int64_t g, int64_t n_blocks, int64_t row_bytes) {
  const int64_t hd = a.head_dim, bs = a.block_size;
  const float* sg = a.scores + g * a.len;
  float* o = a.out + g * hd;
  __m512 acc[NV > 0 ? NV : 1];
  if constexpr (NV > 0) {
    for (int i = 0; i < NV; ++i) acc[i] = _mm512_setzero_ps();
  } else {
    std::fill(o, o + hd, 0.f);
  }
  for (int64_t b = 0; b < n_blocks; ++b) {
    if (g == 0) prefetch_chunk<L>(a, a.v, b + kPrefetchBlocks, n_blocks);
    const char* vb = chunk<L>(a, a.v, b);
    const int64_t n = std::min(bs, a.len - b * bs);
    for (int64_t r = 0; r < n; ++r) {
      const __m512 w = _mm512_set1_ps(sg[b * bs + r]);
      const char* row = vb + r * row_bytes;
      if constexpr (NV > 0) {
#pragma GCC unroll 8
        for (int i = 0; i < NV; ++i) acc[i] = _mm512_fmadd_ps(w, L::load(row, 16 * i), acc[i]);
      } else {
        for (int64_t d = 0; d < hd; d += 16) {
          _mm512_storeu_ps(o + d, _mm512_fmadd_ps(w, L::load(row, d), _mm512_loadu_ps(o + d)));
        }
      }
    }
  }
  if constexpr (NV > 0) {
    for (int i = 0; i < NV; ++i) _mm512_storeu_ps(o + 16 * i, acc[i]);
  }
}

template <class L>
void attend_t(const AttendTask& a) {
  const int64_t hd = a.head_dim, bs = a.block_size, len = a.len;
  const int64_t n_blocks = (len + bs - 1) / bs;
  const int64_t row_bytes = hd * L::kBytes;
  for (int64_t b = 0; b < kPrefetchBlocks; ++b) prefetch_chunk<L>(a, a.k, b, n_blocks);
  // Scores: s[g][p] = scale * q_g . k_p
  for (int64_t b = 0; b < n_blocks; ++b) {
    prefetch_chunk<L>(a, a.k, b + kPrefetchBlocks, n_blocks);
    const char* kb = chunk<L>(a, a.k, b);
    const int64_t p0 = b * bs, n = std::min(bs, len - p0);
    for (int64_t g = 0; g < a.group; ++g) {
      const float* q = a.q + g * hd;
      float* sc = a.scores + g * len + p0;
      for (int64_t r = 0; r < n; ++r) {
        const char* row = kb + r * row_bytes;
        __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
        int64_t d = 0;
        for (; d + 32 <= hd; d += 32) {
          acc0 = _mm512_fmadd_ps(L::load(row, d), _mm512_loadu_ps(q + d), acc0);
          acc1 = _mm512_fmadd_ps(L::load(row, d + 16), _mm512_loadu_ps(q + d + 16), acc1);
        }
        if (d < hd) acc0 = _mm512_fmadd_ps(L::load(row, d), _mm512_loadu_ps(q + d), acc0);
        sc[r] = _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1)) * a.scale;
      }
    }
  }
  for (int64_t b = 0; b < kPrefetchBlocks; ++b) prefetch_chunk<L>(a, a.v, b, n_blocks);
  const IsaKernels& k = avx512_kernels();
  for (int64_t g = 0; g < a.group; ++g) k.softmax(a.scores + g * len, len);
  // Output: o_g = sum_p s[g][p] v_p.
  for (int64_t g = 0; g < a.group; ++g) {
    switch (hd) {
      case 64: weighted_sum<L, 4>(a, g, n_blocks, row_bytes); break;
      case 128: weighted_sum<L, 8>(a, g, n_blocks, row_bytes); break;
      default: weighted_sum<L, 0>(a, g, n_blocks, row_bytes); break;
    }
  }
}

}  // namespace

void attend(const AttendTask& a) {
  switch (a.dtype) {
    case DType::kF32: attend_t<LoadF32>(a); return;
    case DType::kF16: attend_t<LoadF16>(a); return;
    case DType::kBF16: attend_t<LoadBF16>(a); return;
    default: PARALLM_CHECK_MSG(false, "attention: unsupported KV dtype");
  }
}

}  // namespace parallm::cpu::avx512
