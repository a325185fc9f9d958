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
#include <array>
#include <cstring>
#include <type_traits>
#include <utility>
#include <vector>

#include "kernels/cpu/avx512_common.h"
#include "util/check.h"

namespace parallm::cpu::avx512 {

namespace {

constexpr int64_t kPrefetchBlocks = 2;  // blocks ahead of the one being read

// A q8_0 cache chunk (attention.h): the rows' int8 quants [block_size][hd],
// then their f16 scales [hd / 32][block_size]. Keys are scored in integers
// (key_scores_q8), values widened to f32 with each block's scale folded
// into the row's weight (weighted_rows_q8).
// NOTE: widening keys to f32 (two loads, widenings and FMAs per 32 values,
// and a scale per block and row) made q8_0 attention compute-bound: 24 GB/s
// against f16's 32 in the kernel lab, at half the bytes.
struct LoadQ8_0 {
  static int64_t chunk_bytes(int64_t bs, int64_t hd) { return bs * hd + bs * (hd / 32) * 2; }
};

// Bytes from one row of a chunk to the next (q8_0: the quants' rows).
template <class L>
inline int64_t cache_row_bytes(int64_t hd) {
  if constexpr (std::is_same_v<L, LoadQ8_0>) {
    return hd;
  } else {
    return hd * L::kBytes;
  }
}

// Bytes of one (block, head) chunk: block_size rows.
template <class L>
inline int64_t chunk_bytes(const AttendTask& a) {
  if constexpr (requires { L::chunk_bytes(a.block_size, a.head_dim); }) {
    return L::chunk_bytes(a.block_size, a.head_dim);
  } else {
    return a.block_size * cache_row_bytes<L>(a.head_dim);
  }
}

// The task's heads of block b: n_heads chunks side by side in the pool.
template <class L>
inline const char* block_heads(const AttendTask& a, const char* pool, int64_t b) {
  return pool + (a.table[b] * a.n_kv_head + a.h_kv) * chunk_bytes<L>(a);
}

// Where run i of a task's reading order starts: its key blocks, then its
// value blocks, then the next task's first key and value blocks (nullptr
// past the end). A run is the task's n_heads chunks of one block.
template <class L>
const char* fetch_run(const AttendTask& a, int64_t n_blocks, int64_t i) {
  if (i < n_blocks) return block_heads<L>(a, a.k, i);
  if (i < 2 * n_blocks) return block_heads<L>(a, a.v, i - n_blocks);
  // The next task's runs, in its own order, as many lines of each as this
  // task's runs have: a longer run is fetched in part, a shorter one with
  // its neighbours' lines (prefetches never fault).
  i -= 2 * n_blocks;
  const int64_t next_blocks = (a.next_len + a.block_size - 1) / a.block_size;
  if (a.next_table == nullptr || i >= 2 * next_blocks) return nullptr;
  const char* pool = i < next_blocks ? a.k : a.v;
  const int64_t b = i < next_blocks ? i : i - next_blocks;
  return pool + (a.next_table[b] * a.n_kv_head + a.next_h_kv) * chunk_bytes<L>(a);
}

// Lines [0, lines) from p, to be prefetched while some other rows are read,
// spread over that work's steps so the miss buffers never flood.
// NOTE: fetching each phase's first two blocks all at once when it started
// (26 KB for 12 heads of q8_0) left a third of the kernel's samples on
// prefetch instructions waiting for miss buffers, with nothing to compute.
// NOTE: a prefetcher object whose position lived in memory, stepped once
// per row, cost ~30% of the kernel from cache (its bookkeeping, not the
// prefetches); these slices keep the position in a register of the loop.
struct Ahead {
  const char* p = nullptr;
  int64_t lines = 0;
  // Prefetches lines [*at, min(*at + n, lines)) and moves *at past them.
  inline void fetch(int64_t* at, int64_t n) const {
    const int64_t stop = std::min(*at + n, lines);
    for (int64_t i = *at; i < stop; ++i) _mm_prefetch(p + 64 * i, _MM_HINT_T0);
    *at = std::max(*at, stop);
  }
  // Lines a step must fetch to be done in `steps` steps.
  int64_t per(int64_t steps) const { return (lines + steps - 1) / steps; }
};

// Chunk `h` of a run (the same head kPrefetchBlocks blocks ahead), or of
// it the lines that rows [r0, r0 + 16) of a chunk of n rows pay for: the
// lines in proportion, and the rest of the chunk with the chunk's last rows.
template <class L>
Ahead ahead_chunk(const char* run, int64_t h, const AttendTask& a, int64_t r0 = 0, int64_t n = 0) {
  if (run == nullptr) return {};
  const int64_t cb = chunk_bytes<L>(a), total = (cb + 63) / 64, bs = a.block_size;
  const int64_t first = total * r0 / bs, last = r0 + 16 >= n ? total : total * (r0 + 16) / bs;
  return {run + h * cb + 64 * first, last - first};
}

// All of run i, at once (a task's first blocks when no task before it
// fetched them).
template <class L>
void fetch_all(const AttendTask& a, int64_t n_blocks, int64_t i) {
  const char* run = fetch_run<L>(a, n_blocks, i);
  if (run == nullptr) return;
  const int64_t lines = (a.n_heads * chunk_bytes<L>(a) + 63) / 64;
  for (int64_t l = 0; l < lines; ++l) _mm_prefetch(run + 64 * l, _MM_HINT_T0);
}

template <class L>
constexpr bool kScaledBlocks = std::is_same_v<L, LoadQ8_0>;

// 16 int8 values widened to f32.
inline __m512 widen_i8(const int8_t* p) {
  return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
}

// The q8_0 form of weighted_rows over the n rows of chunk `vc`: per 16 rows,
// each block's scales times the rows' weights in one vector, then per row
// and block one broadcast weight for its 32 widened values.
template <int NV>
inline void weighted_rows_q8(const char* vc, int64_t n, int64_t bs, int64_t hd, const float* sg, float* o,
                             const Ahead& ahead) {
  int64_t fetched = 0;
  const int64_t per = ahead.per((n + 1) / 2);
  const int8_t* quants = reinterpret_cast<const int8_t*>(vc);
  const char* scales = vc + bs * hd;
  const int64_t nblk = hd / 32;
  if constexpr (NV > 0) {
    static_assert(NV % 2 == 0, "head_dim of whole 32-blocks");
    constexpr int kBlocks = NV / 2;
    __m512 acc[NV], acc2[NV];
    for (int i = 0; i < NV; ++i) acc[i] = _mm512_loadu_ps(o + 16 * i), acc2[i] = _mm512_setzero_ps();
    for (int64_t r0 = 0; r0 < n; r0 += 16) {
      const int64_t m = std::min<int64_t>(16, n - r0);
      const __mmask16 live = static_cast<__mmask16>((1u << m) - 1);
      const __m512 s = _mm512_maskz_loadu_ps(live, sg + r0);
      alignas(64) float w[kBlocks][16];
#pragma GCC unroll 4
      for (int j = 0; j < kBlocks; ++j) {
        _mm512_store_ps(w[j], _mm512_mul_ps(s, LoadF16::load_mask(scales + 2 * (j * bs + r0), 0, live)));
      }
      int64_t r = 0;
      for (; r + 2 <= m; r += 2) {
        ahead.fetch(&fetched, per);
        const int8_t* row = quants + (r0 + r) * hd;
#pragma GCC unroll 4
        for (int j = 0; j < kBlocks; ++j) {
          const __m512 w0 = _mm512_set1_ps(w[j][r]), w1 = _mm512_set1_ps(w[j][r + 1]);
#pragma GCC unroll 2
          for (int i = 2 * j; i < 2 * j + 2; ++i) {
            acc[i] = _mm512_fmadd_ps(w0, widen_i8(row + 16 * i), acc[i]);
            acc2[i] = _mm512_fmadd_ps(w1, widen_i8(row + hd + 16 * i), acc2[i]);
          }
        }
      }
      if (r < m) {
        ahead.fetch(&fetched, per);
        const int8_t* row = quants + (r0 + r) * hd;
#pragma GCC unroll 4
        for (int j = 0; j < kBlocks; ++j) {
          const __m512 w0 = _mm512_set1_ps(w[j][r]);
          acc[2 * j] = _mm512_fmadd_ps(w0, widen_i8(row + 32 * j), acc[2 * j]);
          acc[2 * j + 1] = _mm512_fmadd_ps(w0, widen_i8(row + 32 * j + 16), acc[2 * j + 1]);
        }
      }
    }
    for (int i = 0; i < NV; ++i) _mm512_storeu_ps(o + 16 * i, _mm512_add_ps(acc[i], acc2[i]));
  } else {
    for (int64_t r = 0; r < n; ++r) {
      ahead.fetch(&fetched, per);
      const int8_t* row = quants + r * hd;
      for (int64_t j = 0; j < nblk; ++j) {
        uint16_t h;
        std::memcpy(&h, scales + 2 * (j * bs + r), 2);
        const __m512 w = _mm512_set1_ps(sg[r] * _cvtsh_ss(h));
        float* oj = o + 32 * j;
        _mm512_storeu_ps(oj, _mm512_fmadd_ps(w, widen_i8(row + 32 * j), _mm512_loadu_ps(oj)));
        _mm512_storeu_ps(oj + 16, _mm512_fmadd_ps(w, widen_i8(row + 32 * j + 16), _mm512_loadu_ps(oj + 16)));
      }
    }
  }
}

// out[h][g] += sum over the block's rows of scores[h][g][p] * v_p, with the
// output in NV registers (head_dim = 16 NV) or, NV = 0, in memory.
template <class L, int NV>
inline void weighted_rows_float(const char* vb, int64_t n, int64_t row_bytes, int64_t hd, const float* sg, float* o,
                                const Ahead& ahead) {
  int64_t fetched = 0;
  const int64_t per = ahead.per((n + 1) / 2);
  if constexpr (NV > 0) {
    // Even and odd rows in separate accumulators: one chain of dependent
    // FMAs per output register was latency-bound (4 cycles a row).
    __m512 acc[NV], acc2[NV];
    for (int i = 0; i < NV; ++i) acc[i] = _mm512_loadu_ps(o + 16 * i), acc2[i] = _mm512_setzero_ps();
    int64_t r = 0;
    for (; r + 2 <= n; r += 2) {
      ahead.fetch(&fetched, per);
      const __m512 w0 = _mm512_set1_ps(sg[r]), w1 = _mm512_set1_ps(sg[r + 1]);
      const char* row = vb + r * row_bytes;
#pragma GCC unroll 8
      for (int i = 0; i < NV; ++i) {
        acc[i] = _mm512_fmadd_ps(w0, L::load(row, 16 * i), acc[i]);
        acc2[i] = _mm512_fmadd_ps(w1, L::load(row + row_bytes, 16 * i), acc2[i]);
      }
    }
    if (r < n) {
      ahead.fetch(&fetched, per);
      const __m512 w = _mm512_set1_ps(sg[r]);
      const char* row = vb + r * row_bytes;
#pragma GCC unroll 8
      for (int i = 0; i < NV; ++i) acc[i] = _mm512_fmadd_ps(w, L::load(row, 16 * i), acc[i]);
    }
    for (int i = 0; i < NV; ++i) _mm512_storeu_ps(o + 16 * i, _mm512_add_ps(acc[i], acc2[i]));
  } else {
    for (int64_t r = 0; r < n; ++r) {
      ahead.fetch(&fetched, per);
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
    d[i] =
        _mm512_add_ps(_mm512_shuffle_ps(c[2 * i], c[2 * i + 1], 0x44), _mm512_shuffle_ps(c[2 * i], c[2 * i + 1], 0xee));
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
inline void key_scores(const char* kh, int64_t n, int64_t row_bytes, int64_t hd, const float* q, float scale, float* sc,
                       const Ahead& ahead) {
  const char* rows[16];
  for (int r = 0; r < 16; ++r) rows[r] = kh + std::min<int64_t>(r, n - 1) * row_bytes;
  __m512 acc[16];
  for (int r = 0; r < 16; ++r) acc[r] = _mm512_setzero_ps();
  int64_t fetched = 0;
  const int64_t per = ahead.per(hd / 16);
  for (int64_t d = 0; d < hd; d += 16) {
    ahead.fetch(&fetched, per);
    const __m512 qd = _mm512_loadu_ps(q + d);
#pragma GCC unroll 16
    for (int r = 0; r < 16; ++r) acc[r] = _mm512_fmadd_ps(L::load(rows[r], d), qd, acc[r]);
  }
  const __mmask16 keep = static_cast<__mmask16>((1u << n) - 1);
  _mm512_mask_storeu_ps(sc, keep, _mm512_mul_ps(fold16(acc), _mm512_set1_ps(scale)));
}

// key_scores for a full group of 16 rows of a head of 16 * NV values: the
// rows are at fixed offsets from kh and the head's columns unrolled, so the
// loop needs no table of row pointers (16 of them did not fit the general
// registers and were reloaded from vector registers every column), and q is
// loaded once.
template <class L, int NV>
inline void key_scores16(const char* kh, const float* q, float scale, float* sc, const Ahead& ahead) {
  constexpr int64_t kRow = 16 * NV * L::kBytes;
  __m512 qd[NV];
  for (int i = 0; i < NV; ++i) qd[i] = _mm512_loadu_ps(q + 16 * i);
  int64_t fetched = 0;
  const int64_t per = ahead.per(NV);
  __m512 acc[16];
#pragma GCC unroll 16
  for (int r = 0; r < 16; ++r) acc[r] = _mm512_mul_ps(L::load(kh + r * kRow, 0), qd[0]);
#pragma GCC unroll 8
  for (int i = 1; i < NV; ++i) {
    ahead.fetch(&fetched, per);
#pragma GCC unroll 16
    for (int r = 0; r < 16; ++r) acc[r] = _mm512_fmadd_ps(L::load(kh + r * kRow, 16 * i), qd[i], acc[r]);
  }
  ahead.fetch(&fetched, ahead.lines);
  _mm512_storeu_ps(sc, _mm512_mul_ps(fold16(acc), _mm512_set1_ps(scale)));
}

// A query head quantized for key_scores_q8, per 32 values like the cache
// (d = amax / 127 rounded to f16, q = x / d), per 64-byte column of the head:
//   abs   |q| as unsigned bytes (VPDPBUSD's unsigned operand; bytes past
//         head_dim are 0)
//   neg   the bytes whose q is negative: the key bytes there are negated
//         instead, so |q| * (-k) = q * k
//   scale the two blocks' d times the attention scale, in the lane order of
//         fold_pairs: [d0 x4, d1 x4, d0 x4, d1 x4]
struct QuantQueries {
  const uint8_t* abs;
  const __mmask64* neg;
  const float* scale;
  int64_t n_cols;
};

QuantQueries quantize_queries(const float* q, int64_t n_q, int64_t hd, float attn_scale) {
  struct Buffers {
    std::vector<uint8_t> abs;
    std::vector<__mmask64> neg;
    std::vector<float> scale;
  };
  thread_local Buffers buf;
  const int64_t n_cols = (hd + 63) / 64, nblk = hd / 32;
  buf.abs.resize(static_cast<size_t>(n_q * n_cols * 64));
  buf.neg.resize(static_cast<size_t>(n_q * n_cols));
  buf.scale.resize(static_cast<size_t>(n_q * n_cols * 16));
  for (int64_t i = 0; i < n_q; ++i) {
    for (int64_t c = 0; c < n_cols; ++c) {
      __m128i part[4] = {_mm_setzero_si128(), _mm_setzero_si128(), _mm_setzero_si128(), _mm_setzero_si128()};
      float d[2] = {0.f, 0.f};
      for (int64_t half = 0; half < 2 && 2 * c + half < nblk; ++half) {
        const Block8 b = quantize_block(q + i * hd + (2 * c + half) * 32);
        part[2 * half] = b.lo;
        part[2 * half + 1] = b.hi;
        d[half] = _cvtsh_ss(_cvtss_sh(b.d, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
      }
      const __m512i z = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set_m128i(part[1], part[0])),
                                           _mm256_set_m128i(part[3], part[2]), 1);
      const int64_t at = i * n_cols + c;
      buf.neg[static_cast<size_t>(at)] = _mm512_movepi8_mask(z);
      _mm512_storeu_si512(buf.abs.data() + at * 64, _mm512_abs_epi8(z));
      const __m128 d0 = _mm_set1_ps(d[0] * attn_scale), d1 = _mm_set1_ps(d[1] * attn_scale);
      _mm512_storeu_ps(buf.scale.data() + at * 16,
                       _mm512_insertf32x8(_mm512_castps256_ps512(_mm256_set_m128(d1, d0)), _mm256_set_m128(d1, d0), 1));
    }
  }
  return {buf.abs.data(), buf.neg.data(), buf.scale.data(), n_cols};
}

// fold16's first three steps on int32 sums: a[r] holds row r's 16 lane sums,
// lanes 0-7 from one 32-value block and 8-15 from the next. Returns the
// per-row, per-block sums as
//   e[0] = [rows 0-3 block 0, rows 0-3 block 1, rows 4-7 block 0, rows 4-7 block 1]
//   e[1] = the same for rows 8-15.
inline void fold_pairs(__m512i a[16], __m512i e[2]) {
  __m512i c[8], d[4];
  for (int i = 0; i < 8; ++i) {
    c[i] =
        _mm512_add_epi32(_mm512_unpacklo_epi32(a[2 * i], a[2 * i + 1]), _mm512_unpackhi_epi32(a[2 * i], a[2 * i + 1]));
  }
  for (int i = 0; i < 4; ++i) {
    d[i] =
        _mm512_add_epi32(_mm512_unpacklo_epi64(c[2 * i], c[2 * i + 1]), _mm512_unpackhi_epi64(c[2 * i], c[2 * i + 1]));
  }
  for (int i = 0; i < 2; ++i) {
    e[i] = _mm512_add_epi32(_mm512_shuffle_i32x4(d[2 * i], d[2 * i + 1], 0x88),
                            _mm512_shuffle_i32x4(d[2 * i], d[2 * i + 1], 0xdd));
  }
}

// sc[r] = scale * (key row r0 + r . q) for n <= 16 rows of q8_0 chunk `kc`,
// in integers: per row and 64-byte column one VPDPBUSD of |q| against the
// key bytes with q's signs applied; the per-block sums of 16 rows are then
// folded, scaled by 16 rows' block scales at once (one load each: the
// scales are stored by block) and q's, and summed. Rows past n repeat the
// last one (never read past the chunk), and only n scores are stored.
inline void key_scores_q8(const char* kc, int64_t r0, int64_t n, int64_t bs, int64_t hd, const QuantQueries& qq,
                          int64_t qi, float* sc, const Ahead& ahead) {
  const __m512i idx0 = _mm512_setr_epi32(0, 1, 2, 3, 16, 17, 18, 19, 4, 5, 6, 7, 20, 21, 22, 23);
  const __m512i idx1 = _mm512_setr_epi32(8, 9, 10, 11, 24, 25, 26, 27, 12, 13, 14, 15, 28, 29, 30, 31);
  const __mmask16 live = static_cast<__mmask16>((1u << n) - 1);
  const int8_t* rows[16];
  for (int r = 0; r < 16; ++r) rows[r] = reinterpret_cast<const int8_t*>(kc) + (r0 + std::min<int64_t>(r, n - 1)) * hd;
  const char* scales = kc + bs * hd + 2 * r0;
  const int64_t nblk = hd / 32;
  __m512 f0 = _mm512_setzero_ps(), f1 = _mm512_setzero_ps();
  int64_t fetched = 0;
  const int64_t per = ahead.per(qq.n_cols);
  for (int64_t c = 0; c < qq.n_cols; ++c) {
    ahead.fetch(&fetched, per);
    const int64_t at = qi * qq.n_cols + c;
    const __m512i uq = _mm512_loadu_si512(qq.abs + at * 64);
    const __mmask64 neg = qq.neg[at];
    const __mmask64 bytes = hd - 64 * c >= 64 ? ~0ull : 0xffffffffull;
    __m512i a[16];
#pragma GCC unroll 16
    for (int r = 0; r < 16; ++r) {
      const __m512i k = _mm512_maskz_loadu_epi8(bytes, rows[r] + 64 * c);
      a[r] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), uq, _mm512_mask_sub_epi8(k, neg, _mm512_setzero_si512(), k));
    }
    __m512i e[2];
    fold_pairs(a, e);
    const __m512 d0 = LoadF16::load_mask(scales + 2 * (2 * c) * bs, 0, live);
    const __m512 d1 =
        2 * c + 1 < nblk ? LoadF16::load_mask(scales + 2 * (2 * c + 1) * bs, 0, live) : _mm512_setzero_ps();
    const __m512 qs = _mm512_loadu_ps(qq.scale + at * 16);
    f0 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(e[0]), _mm512_mul_ps(_mm512_permutex2var_ps(d0, idx0, d1), qs), f0);
    f1 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(e[1]), _mm512_mul_ps(_mm512_permutex2var_ps(d0, idx1, d1), qs), f1);
  }
  const __m512 s = _mm512_add_ps(_mm512_shuffle_f32x4(f0, f1, 0x88), _mm512_shuffle_f32x4(f0, f1, 0xdd));
  _mm512_mask_storeu_ps(sc, live, s);
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
  QuantQueries qq{};
  if constexpr (kScaledBlocks<L>) qq = quantize_queries(a.q, nh * group, hd, a.scale);
  if (!a.start_fetched) {
    for (int64_t b = 0; b < kPrefetchBlocks; ++b) fetch_all<L>(a, n_blocks, b);
  }
  for (int64_t b = 0; b < n_blocks; ++b) {
    const char* next = fetch_run<L>(a, n_blocks, b + kPrefetchBlocks);
    const char* kb = block_heads<L>(a, a.k, b);
    const int64_t p0 = b * bs, n = std::min(bs, len - p0);
    for (int64_t h = 0; h < nh; ++h) {
      const char* kh = kb + h * cb;
      for (int64_t g = 0; g < group; ++g) {
        const float* q = a.q + (h * group + g) * hd;
        float* sc = a.scores + (h * group + g) * len + p0;
        for (int64_t r0 = 0; r0 < n; r0 += 16) {
          const Ahead ahead = g == 0 ? ahead_chunk<L>(next, h, a, r0, n) : Ahead{};
          if constexpr (kScaledBlocks<L>) {
            key_scores_q8(kh, r0, std::min<int64_t>(16, n - r0), bs, hd, qq, h * group + g, sc + r0, ahead);
          } else if (n - r0 < 16 || NV == 0) {
            key_scores<L>(kh + r0 * rb, std::min<int64_t>(16, n - r0), rb, hd, q, a.scale, sc + r0, ahead);
          } else if constexpr (NV > 0) {
            key_scores16<L, NV>(kh + r0 * rb, q, a.scale, sc + r0, ahead);
          }
        }
      }
    }
  }
  const IsaKernels& k = avx512_kernels();
  for (int64_t i = 0; i < nh * group; ++i) k.softmax(a.scores + i * len, len);
  std::fill(a.out, a.out + nh * group * hd, 0.f);
  // Output: o[h][g] = sum_p s[h][g][p] v_p, block-major like the scores.
  for (int64_t b = 0; b < n_blocks; ++b) {
    const char* next = fetch_run<L>(a, n_blocks, n_blocks + b + kPrefetchBlocks);
    const char* vb = block_heads<L>(a, a.v, b);
    const int64_t p0 = b * bs, n = std::min(bs, len - p0);
    for (int64_t h = 0; h < nh; ++h) {
      const Ahead ahead = ahead_chunk<L>(next, h, a);
      for (int64_t g = 0; g < group; ++g) {
        const float* sg = a.scores + (h * group + g) * len + p0;
        float* o = a.out + (h * group + g) * hd;
        if constexpr (kScaledBlocks<L>) {
          weighted_rows_q8<NV>(vb + h * cb, n, bs, hd, sg, o, g == 0 ? ahead : Ahead{});
        } else {
          weighted_rows_float<L, NV>(vb + h * cb, n, rb, hd, sg, o, g == 0 ? ahead : Ahead{});
        }
      }
    }
  }
}

// Queries scored together against 16 keys: up to 8 accumulators of 16 scores.
constexpr int kScoreQueries = 8;
// Queries whose outputs are accumulated together: 24 of the 32 registers.
template <int NV>
constexpr int kValueQueries = 24 / NV;

// out[i][0..store[i]) = scale * (kt's 16 keys . q[i]) for Q queries,
// kt = [16 * NV][16] (keys transposed).
template <int NV, int Q>
void tile_scores(const float* kt, const float* const* q, float scale, float* const* out, const int64_t* store) {
  __m512 acc[Q];
#pragma GCC unroll 8
  for (int i = 0; i < Q; ++i) acc[i] = _mm512_setzero_ps();
#pragma GCC unroll 2
  for (int d = 0; d < 16 * NV; ++d) {
    const __m512 kd = _mm512_loadu_ps(kt + 16 * d);
#pragma GCC unroll 8
    for (int i = 0; i < Q; ++i) acc[i] = _mm512_fmadd_ps(_mm512_set1_ps(q[i][d]), kd, acc[i]);
  }
  const __m512 sv = _mm512_set1_ps(scale);
#pragma GCC unroll 8
  for (int i = 0; i < Q; ++i) {
    if (store[i] > 0) {
      _mm512_mask_storeu_ps(out[i], static_cast<__mmask16>((1u << store[i]) - 1), _mm512_mul_ps(acc[i], sv));
    }
  }
}

// o[i] += sum over the n rows of w[i][r] * v_r for Q queries, v = [n][16 * NV] f32.
template <int NV, int Q>
void tile_values(const float* v, int64_t n, const float* const* w, float* const* o) {
  __m512 acc[Q][NV];
#pragma GCC unroll 8
  for (int i = 0; i < Q; ++i) {
#pragma GCC unroll 8
    for (int j = 0; j < NV; ++j) acc[i][j] = _mm512_loadu_ps(o[i] + 16 * j);
  }
  for (int64_t r = 0; r < n; ++r) {
    __m512 vr[NV];
#pragma GCC unroll 8
    for (int j = 0; j < NV; ++j) vr[j] = _mm512_loadu_ps(v + r * 16 * NV + 16 * j);
#pragma GCC unroll 8
    for (int i = 0; i < Q; ++i) {
      const __m512 wi = _mm512_set1_ps(w[i][r]);
#pragma GCC unroll 8
      for (int j = 0; j < NV; ++j) acc[i][j] = _mm512_fmadd_ps(wi, vr[j], acc[i][j]);
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < Q; ++i) {
#pragma GCC unroll 8
    for (int j = 0; j < NV; ++j) _mm512_storeu_ps(o[i] + 16 * j, acc[i][j]);
  }
}

// The two kernels by query count, 1..kScoreQueries and 1..kValueQueries<NV>.
using ScoresFn = void (*)(const float*, const float* const*, float, float* const*, const int64_t*);
using ValuesFn = void (*)(const float*, int64_t, const float* const*, float* const*);
template <int NV, int... Qs>
constexpr std::array<ScoresFn, sizeof...(Qs)> scores_table(std::integer_sequence<int, Qs...>) {
  return {&tile_scores<NV, Qs + 1>...};
}
template <int NV, int... Qs>
constexpr std::array<ValuesFn, sizeof...(Qs)> values_table(std::integer_sequence<int, Qs...>) {
  return {&tile_values<NV, Qs + 1>...};
}

// A tile of consecutive queries of one sequence (a prefill chunk), as small
// matrix products: each (block, head) chunk of keys is widened to f32 and
// transposed once (in registers), then up to 8 queries at a time are scored against its 16
// keys (one key vector loaded per 8 FMAs, no horizontal sums); each chunk of
// values is widened once and up to 6 (head size 64) or 3 (128) queries'
// outputs accumulate in registers over its rows. Single-query tasks read
// every chunk again per query, widened it in the loop (VCVTPH2PS shares the
// FMA ports) and folded 16 horizontal sums per 16 keys.
// NOTE: llama-110m f16 prefill, alternating runs against single-query tasks
// (tiles of 8, keys widened to a buffer, then transposed): 512 tokens 1,053
// -> 1,160 tokens/s, 1,024 tokens 886 -> 965. Kernel lab
// (attention/prefill128-hd64 / prefill512-hd64, 12 layers): that version
// 6.6 / 85.8 ms; kernels by query count (no work on padding queries) and the
// buffers' pointers held in registers 5.85 / 78.5; tiles of 16 4.55 / 65.4
// (32: no better); keys widened and transposed in registers 4.27 / 58.1.
// Each tile reads all its keys and values again, so bigger tiles read less;
// what is left is the widening of values, the transposes and the exps.
template <class L, int NV>
void attend_tile(const AttendTask& a) {
  static_assert(NV > 0 && !kScaledBlocks<L>, "tiles widen float chunks of whole vectors");
  constexpr int64_t kHd = 16 * NV;
  constexpr auto kScores = scores_table<NV>(std::make_integer_sequence<int, kScoreQueries>());
  constexpr auto kValues = values_table<NV>(std::make_integer_sequence<int, kValueQueries<NV>>());
  const int64_t bs = a.block_size, nh = a.n_heads, group = a.group, nq = a.n_queries;
  const int64_t len_max = a.len + nq - 1;
  const int64_t n_blocks = (len_max + bs - 1) / bs;
  const int64_t cb = chunk_bytes<L>(a), rb = cache_row_bytes<L>(kHd);
  const int64_t n_q = group * nq;  // the queries of one KV head
  struct Buffers {
    std::vector<float> wide, kt;
    std::vector<const float*> q, w;
    std::vector<float*> sc, o;
    std::vector<int64_t> store;
  };
  thread_local Buffers buf;
  buf.wide.resize(static_cast<size_t>(bs * kHd));
  buf.kt.resize(static_cast<size_t>(kHd * 16));
  for (auto* v : {&buf.q, &buf.w}) v->resize(static_cast<size_t>(n_q));
  for (auto* v : {&buf.sc, &buf.o}) v->resize(static_cast<size_t>(n_q));
  buf.store.resize(static_cast<size_t>(n_q));
  // Local copies: the compiler cannot keep a thread_local vector's data
  // pointer in a register across stores through float pointers.
  float* const wide = buf.wide.data();
  float* const kt = buf.kt.data();
  const float** const qp = buf.q.data();
  const float** const wp = buf.w.data();
  float** const scp = buf.sc.data();
  float** const op = buf.o.data();
  int64_t* const store = buf.store.data();
  // Query j of head h: query head g = j / nq of the group, token i = j % nq.
  auto scores = [&](int64_t h, int64_t j) { return a.scores + (h * n_q + j) * len_max; };
  auto length = [&](int64_t j) { return a.len + j % nq; };
  auto output = [&](int64_t h, int64_t j) { return a.out + (j % nq) * a.out_stride + (h * group + j / nq) * kHd; };
  // Rows [0, n) of a chunk as f32 rows of kHd values.
  auto widen = [&](const char* chunk, int64_t n) {
    for (int64_t r = 0; r < n; ++r) {
#pragma GCC unroll 8
      for (int j = 0; j < NV; ++j) _mm512_storeu_ps(wide + r * kHd + 16 * j, L::load(chunk + r * rb, 16 * j));
    }
  };
  // Rows [r0, r0 + 16) of a chunk of n rows, widened and transposed into
  // kt = [kHd][16] (rows past n as zeros).
  auto transpose_keys = [&](const char* chunk, int64_t r0, int64_t n) {
    for (int j = 0; j < NV; ++j) {
      __m512 r[16];
#pragma GCC unroll 16
      for (int i = 0; i < 16; ++i) r[i] = r0 + i < n ? L::load(chunk + (r0 + i) * rb, 16 * j) : _mm512_setzero_ps();
      transpose16_regs(r, kt + 16 * 16 * j, 16);
    }
  };

  for (int64_t b = 0; b < n_blocks; ++b) {
    const int64_t p0 = b * bs, rows = std::min(bs, len_max - p0);
    const char* kb = block_heads<L>(a, a.k, b);
    for (int64_t h = 0; h < nh; ++h) {
      for (int64_t r0 = 0; r0 < rows; r0 += 16) {
        transpose_keys(kb + h * cb, r0, rows);
        for (int64_t j = 0; j < n_q; ++j) {
          qp[j] = a.q + (j % nq) * a.q_stride + (h * group + j / nq) * kHd;
          scp[j] = scores(h, j) + p0 + r0;
          store[j] = std::clamp<int64_t>(length(j) - p0 - r0, 0, 16);
        }
        for (int64_t j0 = 0; j0 < n_q; j0 += kScoreQueries) {
          const int64_t n = std::min<int64_t>(kScoreQueries, n_q - j0);
          kScores[n - 1](kt, qp + j0, a.scale, scp + j0, store + j0);
        }
      }
    }
  }
  const IsaKernels& k = avx512_kernels();
  for (int64_t h = 0; h < nh; ++h) {
    for (int64_t j = 0; j < n_q; ++j) {
      float* sc = scores(h, j);
      k.softmax(sc, length(j));
      std::fill(sc + length(j), sc + len_max, 0.f);  // weights of the positions a query does not see
      std::fill(output(h, j), output(h, j) + kHd, 0.f);
    }
  }
  for (int64_t b = 0; b < n_blocks; ++b) {
    const int64_t p0 = b * bs, rows = std::min(bs, len_max - p0);
    const char* vb = block_heads<L>(a, a.v, b);
    for (int64_t h = 0; h < nh; ++h) {
      widen(vb + h * cb, rows);
      for (int64_t j = 0; j < n_q; ++j) {
        wp[j] = scores(h, j) + p0;
        op[j] = output(h, j);
      }
      for (int64_t j0 = 0; j0 < n_q; j0 += kValueQueries<NV>) {
        const int64_t n = std::min<int64_t>(kValueQueries<NV>, n_q - j0);
        kValues[n - 1](wide, rows, wp + j0, op + j0);
      }
    }
  }
}

template <class L>
void attend_dtype(const AttendTask& a) {
  switch (a.head_dim) {
    case 64:
      attend_t<L, 4>(a);
      return;
    case 128:
      attend_t<L, 8>(a);
      return;
    default:
      attend_t<L, 0>(a);
      return;
  }
}

// Tiles for float caches and heads of 64 or 128 values; other tiles run as
// single-query tasks, one after the other.
template <class L>
bool attend_tile_dtype(const AttendTask& a) {
  if constexpr (kScaledBlocks<L>) {
    return false;
  } else {
    switch (a.head_dim) {
      case 64:
        attend_tile<L, 4>(a);
        return true;
      case 128:
        attend_tile<L, 8>(a);
        return true;
      default:
        return false;
    }
  }
}

bool attend_tile_any(const AttendTask& a) {
  switch (a.dtype) {
    case DType::kF32:
      return attend_tile_dtype<LoadF32>(a);
    case DType::kF16:
      return attend_tile_dtype<LoadF16>(a);
    case DType::kBF16:
      return attend_tile_dtype<LoadBF16>(a);
    default:
      return false;
  }
}

}  // namespace

void attend(const AttendTask& a) {
  if (a.n_queries > 1) {
    if (attend_tile_any(a)) return;
    for (int64_t i = 0; i < a.n_queries; ++i) {
      AttendTask one = a;
      one.n_queries = 1;
      one.q = a.q + i * a.q_stride;
      one.out = a.out + i * a.out_stride;
      one.len = a.len + i;
      one.start_fetched = i == 0 && a.start_fetched;
      if (i + 1 < a.n_queries) one.next_table = nullptr;
      attend(one);
    }
    return;
  }
  switch (a.dtype) {
    case DType::kF32:
      attend_dtype<LoadF32>(a);
      return;
    case DType::kF16:
      attend_dtype<LoadF16>(a);
      return;
    case DType::kBF16:
      attend_dtype<LoadBF16>(a);
      return;
    case DType::kQ8_0:
      attend_dtype<LoadQ8_0>(a);
      return;
    default:
      PARALLM_CHECK_MSG(false, "attention: unsupported KV dtype");
  }
}

}  // namespace parallm::cpu::avx512
