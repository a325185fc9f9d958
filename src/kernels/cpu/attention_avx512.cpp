// AVX-512 paged attention for one task (a query token against a run of KV
// heads): keys and values are read straight from the cache in its dtype
// (f16/bf16/q8_0 widened in registers), block by block across the heads, and the
// next blocks are prefetched while this one is read.
//
// NOTE: the portable loop (attention.cpp) first widened each 2 KB block to an
// f32 scratch row; with 32 sequences decoding together that copy was 15% of a
// step in perf, most of it waiting on DRAM: each (block, head) chunk is a
// short stream the hardware prefetcher does not ramp up on, and the blocks of
// one sequence are scattered through the pool. Prefetching two blocks ahead
// hides that latency.
#include <algorithm>
#include <cstring>
#include <type_traits>

#include "kernels/cpu/avx512_common.h"
#include "util/check.h"

namespace parallm::cpu::avx512 {

namespace {

constexpr int64_t kPrefetchBlocks = 2;  // blocks ahead of the one being read

// A q8_0 cache row: head_dim / 32 blocks of an f16 scale and 32 int8
// (attention.h's layout). Its kernels (key_scores_q8, weighted_rows_q8)
// apply a scale once per block and row (to the row's dot over the block; to
// the row's weight), not once per 16 values.
// NOTE: widening and scaling every 16 values made q8_0 attention
// compute-bound: 27 GB/s against f16's 32-42 in the kernel lab.
struct LoadQ8_0 {
  static constexpr int64_t kBlock = 32;
  static constexpr int64_t kBlockBytes = 34;
  static int64_t row_bytes(int64_t hd) { return hd / kBlock * kBlockBytes; }
  // Values k..k+15 (k % 16 == 0), unscaled.
  static __m512 load_raw(const char* row, int64_t k) {
    const char* q = row + (k / kBlock) * kBlockBytes + 2 + k % kBlock;
    return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q))));
  }
  // The scale of the block holding value k.
  static float scale(const char* row, int64_t k) {
    uint16_t d;
    std::memcpy(&d, row + (k / kBlock) * kBlockBytes, 2);
    return _cvtsh_ss(d);
  }
};

// Bytes of one head's row in the cache.
template <class L>
inline int64_t cache_row_bytes(int64_t hd) {
  if constexpr (requires { L::row_bytes(hd); }) {
    return L::row_bytes(hd);
  } else {
    return hd * L::kBytes;
  }
}

// Bytes of one (block, head) chunk: block_size rows.
template <class L>
inline int64_t chunk_bytes(const AttendTask& a) {
  return a.block_size * cache_row_bytes<L>(a.head_dim);
}

// The task's heads of block b: n_heads chunks side by side in the pool.
template <class L>
inline const char* block_heads(const AttendTask& a, const char* pool, int64_t b) {
  return pool + (a.table[b] * a.n_kv_head + a.h_kv) * chunk_bytes<L>(a);
}

// Prefetches one block's heads a few lines per call, spread over the rows
// of the block being read, so the miss buffers never flood.
template <class L>
class BlockFetch {
 public:
  BlockFetch(const AttendTask& a, const char* pool, int64_t n_blocks, int64_t rows_per_block)
      : a_(a), pool_(pool), n_blocks_(n_blocks) {
    lines_ = (a.n_heads * chunk_bytes<L>(a) + 63) / 64;
    per_row_ = (lines_ + rows_per_block - 1) / rows_per_block;
  }
  void start(int64_t b) {
    base_ = b < n_blocks_ ? block_heads<L>(a_, pool_, b) : nullptr;
    line_ = 0;
  }
  void step() {
    if (base_ == nullptr) return;
    for (int64_t k = 0; k < per_row_ && line_ < lines_; ++k, ++line_) _mm_prefetch(base_ + line_ * 64, _MM_HINT_T0);
  }
  void all(int64_t b) {
    start(b);
    if (base_ == nullptr) return;
    for (; line_ < lines_; ++line_) _mm_prefetch(base_ + line_ * 64, _MM_HINT_T0);
  }

 private:
  const AttendTask& a_;
  const char* pool_;
  const char* base_ = nullptr;
  int64_t n_blocks_, lines_ = 0, per_row_ = 1, line_ = 0;
};

template <class L>
constexpr bool kScaledBlocks = std::is_same_v<L, LoadQ8_0>;

// The q8_0 form of weighted_rows: each block's scale joins the row's weight.
template <int NV>
inline void weighted_rows_q8(const char* vb, int64_t n, int64_t row_bytes, int64_t hd, const float* sg, float* o,
                             BlockFetch<LoadQ8_0>* fetch) {
  using L = LoadQ8_0;
  if constexpr (NV > 0) {
    static_assert(NV % 2 == 0, "head_dim of whole 32-blocks");
    __m512 acc[NV], acc2[NV];
    for (int i = 0; i < NV; ++i) acc[i] = _mm512_loadu_ps(o + 16 * i), acc2[i] = _mm512_setzero_ps();
    int64_t r = 0;
    for (; r + 2 <= n; r += 2) {
      if (fetch != nullptr) fetch->step(), fetch->step();
      const char* row = vb + r * row_bytes;
#pragma GCC unroll 8
      for (int j = 0; j < NV / 2; ++j) {
        const __m512 w0 = _mm512_set1_ps(sg[r] * L::scale(row, 32 * j));
        const __m512 w1 = _mm512_set1_ps(sg[r + 1] * L::scale(row + row_bytes, 32 * j));
#pragma GCC unroll 2
        for (int i = 2 * j; i < 2 * j + 2; ++i) {
          acc[i] = _mm512_fmadd_ps(w0, L::load_raw(row, 16 * i), acc[i]);
          acc2[i] = _mm512_fmadd_ps(w1, L::load_raw(row + row_bytes, 16 * i), acc2[i]);
        }
      }
    }
    if (r < n) {
      if (fetch != nullptr) fetch->step();
      const char* row = vb + r * row_bytes;
#pragma GCC unroll 8
      for (int j = 0; j < NV / 2; ++j) {
        const __m512 w = _mm512_set1_ps(sg[r] * L::scale(row, 32 * j));
        acc[2 * j] = _mm512_fmadd_ps(w, L::load_raw(row, 32 * j), acc[2 * j]);
        acc[2 * j + 1] = _mm512_fmadd_ps(w, L::load_raw(row, 32 * j + 16), acc[2 * j + 1]);
      }
    }
    for (int i = 0; i < NV; ++i) _mm512_storeu_ps(o + 16 * i, _mm512_add_ps(acc[i], acc2[i]));
  } else {
    for (int64_t r = 0; r < n; ++r) {
      if (fetch != nullptr) fetch->step();
      const char* row = vb + r * row_bytes;
      for (int64_t d = 0; d < hd; d += 32) {
        const __m512 w = _mm512_set1_ps(sg[r] * L::scale(row, d));
        _mm512_storeu_ps(o + d, _mm512_fmadd_ps(w, L::load_raw(row, d), _mm512_loadu_ps(o + d)));
        _mm512_storeu_ps(o + d + 16, _mm512_fmadd_ps(w, L::load_raw(row, d + 16), _mm512_loadu_ps(o + d + 16)));
      }
    }
  }
}

// out[h][g] += sum over the block's rows of scores[h][g][p] * v_p, with the
// output in NV registers (head_dim = 16 NV) or, NV = 0, in memory.
template <class L, int NV>
inline void weighted_rows(const char* vb, int64_t n, int64_t row_bytes, int64_t hd, const float* sg, float* o,
                          BlockFetch<L>* fetch) {
  if constexpr (kScaledBlocks<L>) {
    weighted_rows_q8<NV>(vb, n, row_bytes, hd, sg, o, fetch);
  } else if constexpr (NV > 0) {
    // Even and odd rows in separate accumulators: one chain of dependent
    // FMAs per output register was latency-bound (4 cycles a row).
    __m512 acc[NV], acc2[NV];
    for (int i = 0; i < NV; ++i) acc[i] = _mm512_loadu_ps(o + 16 * i), acc2[i] = _mm512_setzero_ps();
    int64_t r = 0;
    for (; r + 2 <= n; r += 2) {
      if (fetch != nullptr) fetch->step(), fetch->step();
      const __m512 w0 = _mm512_set1_ps(sg[r]), w1 = _mm512_set1_ps(sg[r + 1]);
      const char* row = vb + r * row_bytes;
#pragma GCC unroll 8
      for (int i = 0; i < NV; ++i) {
        acc[i] = _mm512_fmadd_ps(w0, L::load(row, 16 * i), acc[i]);
        acc2[i] = _mm512_fmadd_ps(w1, L::load(row + row_bytes, 16 * i), acc2[i]);
      }
    }
    if (r < n) {
      if (fetch != nullptr) fetch->step();
      const __m512 w = _mm512_set1_ps(sg[r]);
      const char* row = vb + r * row_bytes;
#pragma GCC unroll 8
      for (int i = 0; i < NV; ++i) acc[i] = _mm512_fmadd_ps(w, L::load(row, 16 * i), acc[i]);
    }
    for (int i = 0; i < NV; ++i) _mm512_storeu_ps(o + 16 * i, _mm512_add_ps(acc[i], acc2[i]));
  } else {
    for (int64_t r = 0; r < n; ++r) {
      if (fetch != nullptr) fetch->step();
      const __m512 w = _mm512_set1_ps(sg[r]);
      const char* row = vb + r * row_bytes;
      for (int64_t d = 0; d < hd; d += 16) {
        _mm512_storeu_ps(o + d, _mm512_fmadd_ps(w, L::load(row, d), _mm512_loadu_ps(o + d)));
      }
    }
  }
}

// Sixteen per-row partial-sum vectors folded into one vector of their 16
// horizontal sums (lane r = row r): 15 adds and 30 shuffles for 16 rows,
// where a reduction per row costs about 9 instructions of its own.
inline __m512 fold16(__m512 a[16]) {
  __m512 c[8], d[4], e[2];
  for (int i = 0; i < 8; ++i) {  // 128-bit lane: [r0 r1 r0 r1] of rows 2i, 2i+1
    c[i] = _mm512_add_ps(_mm512_unpacklo_ps(a[2 * i], a[2 * i + 1]), _mm512_unpackhi_ps(a[2 * i], a[2 * i + 1]));
  }
  for (int i = 0; i < 4; ++i) {  // 128-bit lane: [r0 r1 r2 r3] of rows 4i..4i+3
    d[i] = _mm512_add_ps(_mm512_shuffle_ps(c[2 * i], c[2 * i + 1], 0x44), _mm512_shuffle_ps(c[2 * i], c[2 * i + 1], 0xee));
  }
  for (int i = 0; i < 2; ++i) {  // lanes 0-1: rows 8i..8i+3 (halves), lanes 2-3: rows 8i+4..8i+7
    e[i] = _mm512_add_ps(_mm512_shuffle_f32x4(d[2 * i], d[2 * i + 1], 0x88),
                         _mm512_shuffle_f32x4(d[2 * i], d[2 * i + 1], 0xdd));
  }
  return _mm512_add_ps(_mm512_shuffle_f32x4(e[0], e[1], 0x88), _mm512_shuffle_f32x4(e[0], e[1], 0xdd));
}

// sc[r] = scale * (key row r . q) for n <= 16 consecutive rows of one head.
// Rows past n repeat the last one (never read past the block), and only n
// scores are stored.
template <class L>
inline void key_scores(const char* kh, int64_t n, int64_t row_bytes, int64_t hd, const float* q, float scale,
                       float* sc) {
  const char* rows[16];
  for (int r = 0; r < 16; ++r) rows[r] = kh + std::min<int64_t>(r, n - 1) * row_bytes;
  __m512 acc[16];
  for (int r = 0; r < 16; ++r) acc[r] = _mm512_setzero_ps();
  for (int64_t d = 0; d < hd; d += 16) {
    const __m512 qd = _mm512_loadu_ps(q + d);
#pragma GCC unroll 16
    for (int r = 0; r < 16; ++r) acc[r] = _mm512_fmadd_ps(L::load(rows[r], d), qd, acc[r]);
  }
  const __mmask16 keep = static_cast<__mmask16>((1u << n) - 1);
  _mm512_mask_storeu_ps(sc, keep, _mm512_mul_ps(fold16(acc), _mm512_set1_ps(scale)));
}

// key_scores for a q8_0 cache: each row's dot over a 32-value block is
// scaled once, by that block's scale, before the 16 rows are folded.
// NOTE: folding per block and scaling 16 rows at once by a gather of their
// scales was slower (4.3 vs 3.6 ms in the kernel lab): the gather stalled.
inline void key_scores_q8(const char* kh, int64_t n, int64_t row_bytes, int64_t hd, const float* q, float scale,
                          float* sc) {
  using L = LoadQ8_0;
  const char* rows[16];
  for (int r = 0; r < 16; ++r) rows[r] = kh + std::min<int64_t>(r, n - 1) * row_bytes;
  __m512 acc[16];
  for (int r = 0; r < 16; ++r) acc[r] = _mm512_setzero_ps();
  for (int64_t d0 = 0; d0 < hd; d0 += L::kBlock) {
    const __m512 q0 = _mm512_loadu_ps(q + d0), q1 = _mm512_loadu_ps(q + d0 + 16);
#pragma GCC unroll 16
    for (int r = 0; r < 16; ++r) {
      const __m512 dot = _mm512_fmadd_ps(L::load_raw(rows[r], d0 + 16), q1, _mm512_mul_ps(L::load_raw(rows[r], d0), q0));
      acc[r] = _mm512_fmadd_ps(dot, _mm512_set1_ps(L::scale(rows[r], d0)), acc[r]);
    }
  }
  const __mmask16 keep = static_cast<__mmask16>((1u << n) - 1);
  _mm512_mask_storeu_ps(sc, keep, _mm512_mul_ps(fold16(acc), _mm512_set1_ps(scale)));
}

template <class L, int NV>
void attend_t(const AttendTask& a) {
  const int64_t hd = a.head_dim, bs = a.block_size, len = a.len, nh = a.n_heads, group = a.group;
  const int64_t n_blocks = (len + bs - 1) / bs;
  const int64_t rb = cache_row_bytes<L>(hd), cb = chunk_bytes<L>(a);
  // Block-major over the task's heads: block b of every head is one run of
  // n_heads chunks in the pool, read front to back.
  // NOTE: head by head (one task per head) a sequence's keys were 2 KB
  // pieces 24 KB apart, which neither the hardware prefetcher nor a
  // two-block software prefetch kept up with: 32-sequence decode attention
  // read ~20 GB/s against ~55 from cache (perf: half the samples on the
  // first use of a key or value row).
  BlockFetch<L> kfetch(a, a.k, n_blocks, bs * nh);
  for (int64_t b = 0; b < kPrefetchBlocks; ++b) kfetch.all(b);
  for (int64_t b = 0; b < n_blocks; ++b) {
    kfetch.start(b + kPrefetchBlocks);
    const char* kb = block_heads<L>(a, a.k, b);
    const int64_t p0 = b * bs, n = std::min(bs, len - p0);
    for (int64_t h = 0; h < nh; ++h) {
      const char* kh = kb + h * cb;
      for (int64_t g = 0; g < group; ++g) {
        const float* q = a.q + (h * group + g) * hd;
        float* sc = a.scores + (h * group + g) * len + p0;
        for (int64_t r0 = 0; r0 < n; r0 += 16) {
          if (g == 0) {
            for (int64_t r = r0; r < std::min(n, r0 + 16); ++r) kfetch.step();
          }
          if constexpr (kScaledBlocks<L>) {
            key_scores_q8(kh + r0 * rb, std::min<int64_t>(16, n - r0), rb, hd, q, a.scale, sc + r0);
          } else {
            key_scores<L>(kh + r0 * rb, std::min<int64_t>(16, n - r0), rb, hd, q, a.scale, sc + r0);
          }
        }
      }
    }
  }
  BlockFetch<L> vfetch(a, a.v, n_blocks, bs * nh);
  for (int64_t b = 0; b < kPrefetchBlocks; ++b) vfetch.all(b);
  const IsaKernels& k = avx512_kernels();
  for (int64_t i = 0; i < nh * group; ++i) k.softmax(a.scores + i * len, len);
  std::fill(a.out, a.out + nh * group * hd, 0.f);
  // Output: o[h][g] = sum_p s[h][g][p] v_p, block-major like the scores.
  for (int64_t b = 0; b < n_blocks; ++b) {
    vfetch.start(b + kPrefetchBlocks);
    const char* vb = block_heads<L>(a, a.v, b);
    const int64_t p0 = b * bs, n = std::min(bs, len - p0);
    for (int64_t h = 0; h < nh; ++h) {
      for (int64_t g = 0; g < group; ++g) {
        weighted_rows<L, NV>(vb + h * cb, n, rb, hd, a.scores + (h * group + g) * len + p0,
                             a.out + (h * group + g) * hd, g == 0 ? &vfetch : nullptr);
      }
    }
  }
}

template <class L>
void attend_dtype(const AttendTask& a) {
  switch (a.head_dim) {
    case 64: attend_t<L, 4>(a); return;
    case 128: attend_t<L, 8>(a); return;
    default: attend_t<L, 0>(a); return;
  }
}

}  // namespace

void attend(const AttendTask& a) {
  switch (a.dtype) {
    case DType::kF32: attend_dtype<LoadF32>(a); return;
    case DType::kF16: attend_dtype<LoadF16>(a); return;
    case DType::kBF16: attend_dtype<LoadBF16>(a); return;
    case DType::kQ8_0: attend_dtype<LoadQ8_0>(a); return;
    default: PARALLM_CHECK_MSG(false, "attention: unsupported KV dtype");
  }
}

}  // namespace parallm::cpu::avx512
