// AVX-512 kernel table (F/BW/VL/DQ + VNNI + BF16; flags per file in
// src/kernels/CMakeLists.txt). Contents:
//  - decode (n_tokens < kGemmMinTokens) for f32/f16/bf16 weights: one weight
//    row at a time, converted to f32 in registers, against up to 6 tokens;
//  - q8_0 / q4_0 decode with x quantized to 8 bits and VPDPBUSD (VNNI);
//  - packed matrices (every block type, the model's default here) go to
//    packed_avx512.cpp / block_pack_avx512.cpp at any batch size;
//  - unpacked batches go to the integer GEMM in gemm_q8_avx512.cpp (q8_0,
//    q4_0) or the f32-panel GEMM in gemm_avx512.cpp (every other dtype);
//  - KV-cache row conversions and the roofline probes.
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <utility>
#include <vector>

#include "kernels/cpu/avx2_blocks.h"
#include "kernels/cpu/avx512_common.h"
#include "kernels/cpu/isa_table.h"
#include "kernels/cpu/quant.h"
#include "util/check.h"

namespace parallm::cpu {

namespace {

using avx512::Block8;
using avx512::gemm_q8_rows;
using avx512::gemm_rows;
using avx512::LoadBF16;
using avx512::LoadF16;
using avx512::LoadF32;
using avx512::quantize_block;
using avx512::xq_token_bytes;
using avx512::xq_view;
using avx512::XqView;

constexpr int kMaxDecodeTokens = 6;  // row_dot handles up to this many tokens at once

using RowDotFn = void (*)(const char*, size_t, const float*, int64_t, int64_t, float*, int64_t);

// Decode: one weight row at a time against T <= kMaxDecodeTokens tokens, U independent
// accumulators per token to cover FMA latency.
// NOTE: one row at a time, not a 4-row tile: the weights then stream as one
// sequential run the hardware prefetcher follows; 4 interleaved 1.5 KB rows
// measured half the bandwidth (12 vs 24 GB/s per core, f16, Zen 5).
// The run is also prefetched by software kPrefetchAhead bytes ahead
// (isa_table.h): on an Ice Lake host the kernel lab's decode/f16 read
// 16.0-18.6 GB/s without, 18.0-21.3 with (2-8 KB ahead all alike; three
// rounds alternating, probe 22.8 GB/s). Not measured on the Zen 5 host.
template <int T, class L>
void row_dot(const char* row, const float* x, int64_t ldx, int64_t n, float* out, int64_t ldo) {
  constexpr int U = T == 1 ? 4 : (T == 2 ? 2 : 1);
  __m512 acc[U][T];
#pragma GCC unroll 8
  for (int u = 0; u < U; ++u) {
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) acc[u][t] = _mm512_setzero_ps();
  }
  int64_t k = 0;
  for (; k + 16 * U <= n; k += 16 * U) {
    // The weights kPrefetchAhead bytes on (the next rows of the same run).
    const char* ahead = row + L::kBytes * k + kPrefetchAhead;
#pragma GCC unroll 8
    for (int64_t b = 0; b < 16 * U * L::kBytes; b += 64) _mm_prefetch(ahead + b, _MM_HINT_T0);
#pragma GCC unroll 8
    for (int u = 0; u < U; ++u) {
      const __m512 wv = L::load(row, k + 16 * u);
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        acc[u][t] = _mm512_fmadd_ps(wv, _mm512_loadu_ps(x + t * ldx + k + 16 * u), acc[u][t]);
      }
    }
  }
  for (; k < n; k += 16) {
    const __mmask16 m = n - k >= 16 ? 0xffff : static_cast<__mmask16>((1u << (n - k)) - 1);
    const __m512 wv = L::load_mask(row, k, m);
    for (int t = 0; t < T; ++t) {
      acc[0][t] = _mm512_fmadd_ps(wv, _mm512_maskz_loadu_ps(m, x + t * ldx + k), acc[0][t]);
    }
  }
  for (int t = 0; t < T; ++t) {
    for (int u = 1; u < U; ++u) acc[0][t] = _mm512_add_ps(acc[0][t], acc[u][t]);
    out[t * ldo] = _mm512_reduce_add_ps(acc[0][t]);
  }
}

template <int T, class L>
void row_dot_adapter(const char* row, size_t, const float* x, int64_t ldx, int64_t n, float* out, int64_t ldo) {
  row_dot<T, L>(row, x, ldx, n, out, ldo);
}

template <class L, int... Ts>
constexpr std::array<RowDotFn, sizeof...(Ts)> row_dot_table(std::integer_sequence<int, Ts...>) {
  return {&row_dot_adapter<Ts + 1, L>...};
}

template <class L>
constexpr auto kRowDots = row_dot_table<L>(std::make_integer_sequence<int, kMaxDecodeTokens>());

template <class L>
void seq_rows(const char* w, size_t w_stride, const float* x, int64_t n_tokens, int64_t n_in, int64_t o_begin,
              int64_t o_end, float* out, int64_t ldo) {
  for (int64_t t0 = 0; t0 < n_tokens; t0 += kMaxDecodeTokens) {
    const int nt = static_cast<int>(std::min<int64_t>(kMaxDecodeTokens, n_tokens - t0));
    const auto fn = kRowDots<L>[nt - 1];
    for (int64_t o = o_begin; o < o_end; ++o) {
      fn(w + o * w_stride, w_stride, x + t0 * n_in, n_in, n_in, out + t0 * ldo + o, ldo);
    }
  }
}

// Batches from this size on take the GEMM (gemm_avx512.cpp) for float weights.
constexpr int64_t kGemmMinTokens = kMaxDecodeTokens + 1;
// q8_0/q4_0 batches below this size use the integer (VNNI) mat-vec.
constexpr int64_t kQuantGemmMinTokens = 8;

// ---------------------------------------------------------------- q8 activations
// x is quantized per 32-block like ggml's q8_0 (d = amax/127, q = round(x/d))
// and stored twice, once per weight layout. Per token:
//   q8[n_in]   int8, natural order (for q8_0 weights)
//   q4[n_in]   int8, per group of 4 blocks: the low halves (elements 0-15) of
//              the 4 blocks, then their high halves (16-31), matching the low
//              and high nibbles of 4 consecutive q4_0 blocks
//   d[nb]      float block scales
//   corr[nb*4] int32, per group of 4 blocks and lane j (block j/4):
//              -8 * (sum of the 8 q the lane multiplies), which turns the
//              VPDPBUSD over unsigned nibbles into a dot over (nibble - 8)
//   c4[nb], c8[nb]  int32, -8 and -128 times the sum of each block's 32 q:
//              the packed kernels' corrections for q4_0's nibble offset and
//              q8_0's stored q + 128 (packed.h)
//   s16[nb*2]  int32, the sums of each block's q 0-15 and 16-31, and
//   xs16[nb*2] f32, those times d: the block-packed kernels' offsets and
//              mins (block_pack.h), per sub-block of 16 or 32
//   then, for batches, the same values in token tiles (avx512_common.h).
// Batches of kQuantGemmMinTokens or more are read only from their tiles
// (only packed weights take quantized batches that large: wants_xq), so
// their per-token views are left unwritten.
// NOTE: writing both made this 1.7% of a 32-stream serving step in perf;
// without the views, one process alternating every 8 steps (32 sequences):
// step p25 11.53 -> 11.29 and 11.65 -> 11.45 ms, medians 0.02-0.06 ms less.
size_t xq_bytes(int64_t n_tokens, int64_t n_in) {
  const int64_t tiles = n_tokens >= 2 ? (n_tokens + avx512::kXTile - 1) / avx512::kXTile : 0;
  return avx512::xq_tiles_offset(n_tokens, n_in) + static_cast<size_t>(tiles) * avx512::xq_tile_bytes(n_in) + 64;
}

void quantize_x(const float* x, void* xq, int64_t n_tokens, int64_t n_in, int64_t t_begin, int64_t t_end) {
  const int64_t nb = n_in / 32;
  const bool views = n_tokens < kQuantGemmMinTokens;
  for (int64_t t = t_begin; t < t_end; ++t) {
    const XqView v = xq_view(xq, t, n_in);
    int8_t* q8 = const_cast<int8_t*>(v.q8);
    int8_t* q4 = const_cast<int8_t*>(v.q4);
    float* d = const_cast<float*>(v.d);
    int32_t* corr = const_cast<int32_t*>(v.corr);
    int32_t* c4 = const_cast<int32_t*>(v.c4);
    int32_t* c8 = const_cast<int32_t*>(v.c8);
    int32_t* s16 = const_cast<int32_t*>(v.s16);
    float* xs16 = const_cast<float*>(v.xs16);
    const float* xt = x + t * n_in;
    // A batch's token also goes into its tile (see xq_bytes), written here
    // from registers: a second pass re-reading the views stalled on its
    // strided stores.
    char* rec = nullptr;
    int64_t ti = 0;
    if (n_tokens >= 2) {
      rec = static_cast<char*>(xq) + avx512::xq_tiles_offset(n_tokens, n_in) +
            static_cast<size_t>(t / avx512::kXTile) * avx512::xq_tile_bytes(n_in);
      ti = t % avx512::kXTile;
    }
    for (int64_t b = 0; b < nb; ++b) {
      const Block8 q = quantize_block(xt + b * 32);
      const float db = q.d;
      const __m128i lo = q.lo, hi = q.hi;
      if (views) {
        d[b] = db;
        _mm_storeu_si128(reinterpret_cast<__m128i*>(q8 + b * 32), lo);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(q8 + b * 32 + 16), hi);
        if (b < nb - nb % 4) {  // tail blocks (nb % 4) are read from q8 only
          const int64_t g = b / 4, i = b % 4;
          _mm_storeu_si128(reinterpret_cast<__m128i*>(q4 + g * 128 + i * 16), lo);
          _mm_storeu_si128(reinterpret_cast<__m128i*>(q4 + g * 128 + 64 + i * 16), hi);
        }
      }
      // Lane l of block b covers elements 4l..4l+3 and 16+4l..16+4l+3: one
      // VPDPBUSD against ones sums each run of 4 bytes.
      // NOTE: summing the int32 lanes in scalar code was most of this
      // function, itself 4% of a 32-sequence serving step in perf.
      const __m128i ones = _mm_set1_epi8(1);
      const __m128i sum_lo = _mm_dpbusd_epi32(_mm_setzero_si128(), ones, lo);
      const __m128i sum_hi = _mm_dpbusd_epi32(_mm_setzero_si128(), ones, hi);
      const __m128i sums = _mm_add_epi32(sum_lo, sum_hi);
      // [sum of lo, sum of hi] in lanes 0 and 1 (the halves' sums: s16).
      const __m128i halves = _mm_hadd_epi32(_mm_hadd_epi32(sum_lo, sum_hi), _mm_setzero_si128());
      const int32_t s_lo = _mm_cvtsi128_si32(halves), s_hi = _mm_extract_epi32(halves, 1);
      const int32_t total = s_lo + s_hi;
      const int32_t c4b = -8 * total, c8b = -128 * total;
      const float xs_lo = db * static_cast<float>(s_lo), xs_hi = db * static_cast<float>(s_hi);
      if (views) {
        _mm_storeu_si128(reinterpret_cast<__m128i*>(corr + b * 4), _mm_mullo_epi32(sums, _mm_set1_epi32(-8)));
        c4[b] = c4b;
        c8[b] = c8b;
        s16[2 * b] = s_lo, s16[2 * b + 1] = s_hi;
        xs16[2 * b] = xs_lo, xs16[2 * b + 1] = xs_hi;
      }
      if (rec != nullptr) {
        using avx512::kXTile;
        char* r = rec + static_cast<size_t>(b) * avx512::kXTileRecord;
        _mm_storeu_si128(reinterpret_cast<__m128i*>(r + 32 * ti), lo);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(r + 32 * ti + 16), hi);
        std::memcpy(r + kXTile * 32 + 4 * ti, &db, 4);
        std::memcpy(r + kXTile * 36 + 4 * ti, &c4b, 4);
        std::memcpy(r + kXTile * 40 + 4 * ti, &c8b, 4);
        const int32_t s2[2] = {s_lo, s_hi};
        const float xs2[2] = {xs_lo, xs_hi};
        std::memcpy(r + kXTile * 44 + 8 * ti, s2, 8);
        std::memcpy(r + kXTile * 52 + 8 * ti, xs2, 8);
      }
    }
  }
}

bool wants_xq(DType t, int64_t n_tokens, bool packed) {
  // Packed, the other block types run block_pack_avx512.cpp's kernels at any
  // batch size. Unpacked (PARALLM_PACK=0), their decode runs the AVX2 integer
  // row dots (avx2_blocks.h) on this x's 8-bit views.
  // NOTE: they had dequantized each row to f32 first: llama-110m decode on
  // 2 threads, q5_k 27 -> see docs/PERFORMANCE.md ("The new GGUF types").
  if (packed) return true;
  if (avx2::has_block_dot(t)) return n_tokens < kQuantGemmMinTokens;
  return (t == DType::kQ8_0 || t == DType::kQ4_0) && (packed || n_tokens < kQuantGemmMinTokens);
}

// The batches rows() hands to gemm_rows (float GEMM): see rows() below.
bool wants_xt(DType t, int64_t n_tokens, bool packed) {
  return !packed && n_tokens >= kGemmMinTokens && t != DType::kQ8_0 && t != DType::kQ4_0;
}

// Word-permute tables that pull 4 q4_0 blocks' quants and f16 scales out of
// the raw GGUF bytes. Blocks are 18 bytes, so every field starts at an even
// offset and VPERMT2W (AVX512BW) can gather it.
struct alignas(64) WordIndex {
  uint16_t v[32];
};

constexpr WordIndex make_index(int block_words, int first_block, int n_blocks, int words_per_block, int base) {
  WordIndex w{};
  for (int b = 0; b < n_blocks; ++b) {
    for (int j = 0; j < words_per_block; ++j) {
      w.v[b * words_per_block + j] = static_cast<uint16_t>((first_block + b) * block_words + 1 + j - base);
    }
  }
  return w;
}
constexpr WordIndex make_scale_index(int block_words) {
  WordIndex w{};
  for (int b = 0; b < 4; ++b) w.v[b] = static_cast<uint16_t>(b * block_words);
  return w;
}

// q4_0 (9 words per block): all four blocks' quants from words 0-35.
constexpr WordIndex kQ4Quants = make_index(9, 0, 4, 8, 0);
constexpr WordIndex kQ4Scales = make_scale_index(9);

inline __m512i load_index(const WordIndex& w) { return _mm512_load_si512(w.v); }

// [dw(b..b+3) * dx(b..b+3)] in the low 4 lanes, from the gathered f16 words.
inline __m512 scales4(__m512i words, __m128 dx) {
  return _mm512_castps128_ps512(_mm_mul_ps(_mm_cvtph_ps(_mm512_castsi512_si128(words)), dx));
}

// q8_0: 256-bit, one block per VPDPBUSD. NOTE: a 512-bit version (4 blocks
// per iteration gathered with VPERMT2W, like q4_0 below) was faster from L2
// but measured ~41 vs ~43 GB/s streaming from DRAM with 2 threads (noisy
// host; the 256-bit one is also simpler).
float dot_q8_0_ymm(const BlockQ8_0* w, const XqView& x, int64_t nb) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  const __m256i zero = _mm256_setzero_si256();
  int64_t b = 0;
  for (; b + 2 <= nb; b += 2) {
    const __m256i w0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[b].qs));
    const __m256i w1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[b + 1].qs));
    const __m256i x0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.q8 + b * 32));
    const __m256i x1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.q8 + b * 32 + 32));
    const __m256i d0 = _mm256_dpbusd_epi32(zero, _mm256_abs_epi8(w0), _mm256_sign_epi8(x0, w0));
    const __m256i d1 = _mm256_dpbusd_epi32(zero, _mm256_abs_epi8(w1), _mm256_sign_epi8(x1, w1));
    acc0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(d0), _mm256_set1_ps(_cvtsh_ss(w[b].d) * x.d[b]), acc0);
    acc1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(d1), _mm256_set1_ps(_cvtsh_ss(w[b + 1].d) * x.d[b + 1]), acc1);
  }
  const __m256 a = _mm256_add_ps(acc0, acc1);
  __m128 h = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  h = _mm_add_ps(h, _mm_movehl_ps(h, h));
  float sum = _mm_cvtss_f32(_mm_add_ss(h, _mm_movehdup_ps(h)));
  for (; b < nb; ++b) {
    int32_t si = 0;
    for (int j = 0; j < 32; ++j) si += w[b].qs[j] * x.q8[b * 32 + j];
    sum += static_cast<float>(si) * _cvtsh_ss(w[b].d) * x.d[b];
  }
  return sum;
}

// q4_0. NOTE: 4 blocks per iteration, quants and scales gathered with word
// permutes from 2-3 wide loads. Earlier versions: 2 blocks with scalar f16
// converts and broadcasts (14 GB/s per core on q4_0, 20 on q8_0); 4 blocks
// with 128-bit inserts and the scales built in general registers (20 / 25).
// R > 1 rows per pass shares the x loads and ran 35% faster from L2, but
// streaming from DRAM with 2 threads it fell from 42 to 13 GB/s (q8_0) and
// 33 to 24 (q4_0): interleaved row streams defeat the prefetcher here, as
// for f16. Two distant streams (rows o and o + half) kept the bandwidth
// but gained nothing either (33 GB/s), nor did 8 blocks per iteration with
// one scale conversion for both groups (31-33). So R = 1 as below.
// out[r] = dot(row r, x) for r < R, row r at w + r*stride.
template <int R>
void dot_q4_0(const char* w, size_t stride, const XqView& x, int64_t nb, float* out) {
  __m512 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  const __m512i low4 = _mm512_set1_epi8(0x0f);
  const __m512i quant_idx = load_index(kQ4Quants), scale_idx = load_index(kQ4Scales);
  const __m512i idx = _mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0);
  int64_t b = 0;
  for (; b + 4 <= nb; b += 4) {
    const __m512i xl = _mm512_loadu_si512(x.q4 + b * 32), xh = _mm512_loadu_si512(x.q4 + b * 32 + 64);
    const __m512i corr = _mm512_loadu_si512(x.corr + b * 4);
    const __m128 dx = _mm_loadu_ps(x.d + b);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const char* p = w + r * stride + b * sizeof(BlockQ4_0);  // 72 bytes = 36 words
      const __m512i l0 = _mm512_loadu_si512(p);
      const __m512i l1 = _mm512_maskz_loadu_epi16(0xf, p + 64);
      const __m512i z = _mm512_permutex2var_epi16(l0, quant_idx, l1);
      const __m512i lo = _mm512_and_si512(z, low4);
      const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(z, 4), low4);
      const __m512i dot = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(corr, lo, xl), hi, xh);
      const __m512 s = _mm512_permutexvar_ps(idx, scales4(_mm512_permutexvar_epi16(scale_idx, l0), dx));
      acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), s, acc[r]);
    }
  }
  for (int r = 0; r < R; ++r) {
    const auto* blocks = reinterpret_cast<const BlockQ4_0*>(w + r * stride);
    float sum = _mm512_reduce_add_ps(acc[r]);
    for (int64_t t = b; t < nb; ++t) {
      int32_t si = 0;
      for (int j = 0; j < 16; ++j) {
        si += ((blocks[t].qs[j] & 0xf) - 8) * x.q8[t * 32 + j] + ((blocks[t].qs[j] >> 4) - 8) * x.q8[t * 32 + 16 + j];
      }
      sum += static_cast<float>(si) * _cvtsh_ss(blocks[t].d) * x.d[t];
    }
    out[r] = sum;
  }
}

void quant_rows(const RowsTask& a) {
  const int64_t nb = a.n_in / 32;
  const size_t row_bytes = dtype_row_bytes(a.wtype, a.n_in);
  for (int64_t o = a.o_begin; o < a.o_end; ++o) {
    const char* row = a.w + o * a.w_stride;
    // NOTE: the kernel lab's decode/q8_0 and q4_0 (this layout) read 13-15
    // GB/s without this prefetch, 17.6-21 with (Ice Lake host, three rounds).
    for (size_t b = 0; b < row_bytes; b += 64) _mm_prefetch(row + kPrefetchAhead + b, _MM_HINT_T0);
    for (int64_t t = 0; t < a.n_tokens; ++t) {
      const XqView x = xq_view(a.xq, t, a.n_in);
      float r;
      if (a.wtype == DType::kQ8_0) {
        r = dot_q8_0_ymm(reinterpret_cast<const BlockQ8_0*>(row), x, nb);
      } else if (a.wtype == DType::kQ4_0) {
        dot_q4_0<1>(row, a.w_stride, x, nb, &r);
      } else {
        r = avx2::block_row_dot(a.wtype, row, x.q8, x.d, a.n_in);
      }
      a.out[t * a.out_stride + o] = r;
    }
  }
}

void rows(const RowsTask& a) {
  if (a.packed) {
    avx512::packed_rows(a);
    return;
  }
  if (wants_xq(a.wtype, a.n_tokens, false)) {
    quant_rows(a);
    return;
  }
  if (a.n_tokens < kGemmMinTokens) {
    switch (a.wtype) {
      case DType::kF32:
        seq_rows<LoadF32>(a.w, a.w_stride, a.x, a.n_tokens, a.n_in, a.o_begin, a.o_end, a.out, a.out_stride);
        return;
      case DType::kF16:
        seq_rows<LoadF16>(a.w, a.w_stride, a.x, a.n_tokens, a.n_in, a.o_begin, a.o_end, a.out, a.out_stride);
        return;
      case DType::kBF16:
        seq_rows<LoadBF16>(a.w, a.w_stride, a.x, a.n_tokens, a.n_in, a.o_begin, a.o_end, a.out, a.out_stride);
        return;
      case DType::kQ8_0:
      case DType::kQ4_0:
        break;
      default: {  // the other block types: dequantized row by row into L1
        thread_local std::vector<float> row;
        if (row.size() < static_cast<size_t>(a.n_in)) row.resize(static_cast<size_t>(a.n_in));
        const int nt = static_cast<int>(a.n_tokens);
        for (int64_t o = a.o_begin; o < a.o_end; ++o) {
          avx512::dequant_row(a.wtype, a.w + o * a.w_stride, row.data(), a.n_in);
          kRowDots<LoadF32>[nt - 1](reinterpret_cast<const char*>(row.data()), 0, a.x, a.n_in, a.n_in, a.out + o,
                                    a.out_stride);
        }
        return;
      }
    }
  }
  if (a.wtype == DType::kQ8_0 || a.wtype == DType::kQ4_0) {
    gemm_q8_rows(a);
    return;
  }
  gemm_rows(a);
}

// ---------------------------------------------------------------- conversions
// ggml's q8_0 (d = amax/127 stored as f16, q = x/d rounded), for KV-cache
// rows. Ties round to even here and away from zero in quant.h: a stored value
// can differ by one step at an exact .5, which a cache does not need to avoid.
// NOTE: the scalar reference per row was ~1.5 ms of a 32-sequence step.
void f32_to_q8_0(const float* src, void* dst, int64_t n) {
  char* out = static_cast<char*>(dst);
  for (int64_t b = 0; b < n / 32; ++b, out += 34) {
    const Block8 q = quantize_block(src + b * 32);
    const uint16_t dh = fp32_to_fp16(q.d);
    std::memcpy(out, &dh, 2);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 2), q.lo);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 18), q.hi);
  }
}

void f32_to_f16(const float* s, uint16_t* d, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + i),
                        _mm512_cvtps_ph(_mm512_loadu_ps(s + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  for (; i < n; ++i) d[i] = fp32_to_fp16(s[i]);
}
void f16_to_f32(const uint16_t* s, float* d, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    _mm512_storeu_ps(d + i, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i))));
  }
  for (; i < n; ++i) d[i] = fp16_to_fp32(s[i]);
}
// Round to nearest even with integer ops (VCVTNEPS2BF16 would flush
// denormals and differ from fp32_to_bf16).
void f32_to_bf16(const float* s, uint16_t* d, int64_t n) {
  int64_t i = 0;
  const __m512i bias = _mm512_set1_epi32(0x7fff), one = _mm512_set1_epi32(1);
  const __m512i abs_mask = _mm512_set1_epi32(0x7fffffff), inf = _mm512_set1_epi32(0x7f800000);
  for (; i + 16 <= n; i += 16) {
    const __m512i x = _mm512_loadu_si512(s + i);
    const __m512i rounded = _mm512_srli_epi32(
        _mm512_add_epi32(_mm512_add_epi32(x, bias), _mm512_and_si512(_mm512_srli_epi32(x, 16), one)), 16);
    const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(x, abs_mask), inf);
    const __m512i quiet = _mm512_or_si512(_mm512_srli_epi32(x, 16), _mm512_set1_epi32(0x40));
    const __m512i r = _mm512_mask_mov_epi32(rounded, nan, quiet);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + i), _mm512_cvtepi32_epi16(r));
  }
  for (; i < n; ++i) d[i] = fp32_to_bf16(s[i]);
}
void bf16_to_f32(const uint16_t* s, float* d, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    _mm512_storeu_ps(d + i, LoadBF16::load(reinterpret_cast<const char*>(s), i));
  }
  for (; i < n; ++i) d[i] = bf16_to_fp32(s[i]);
}

// ---------------------------------------------------------------- row ops
inline __mmask16 tail_mask(int64_t left) {
  return left >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << left) - 1);
}

// e^x, about 2 ulp: x = n ln2 + r, |r| <= ln2/2, a degree-6 polynomial for
// e^r (Cephes expf coefficients), then VSCALEFPS for the 2^n (it also gives
// 0 and inf past the f32 range).
inline __m512 exp_ps(__m512 x) {
  x = _mm512_max_ps(_mm512_min_ps(x, _mm512_set1_ps(88.8f)), _mm512_set1_ps(-104.0f));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  return _mm512_scalef_ps(p, n);
}

void rmsnorm_row(float* out, const float* x, const float* w, int64_t n, float eps) {
  __m512 ss = _mm512_setzero_ps();
  for (int64_t i = 0; i < n; i += 16) {
    const __m512 v = _mm512_maskz_loadu_ps(tail_mask(n - i), x + i);
    ss = _mm512_fmadd_ps(v, v, ss);
  }
  const float scale = 1.0f / std::sqrt(_mm512_reduce_add_ps(ss) / static_cast<float>(n) + eps);
  const __m512 s = _mm512_set1_ps(scale);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = tail_mask(n - i);
    _mm512_mask_storeu_ps(
        out + i, m, _mm512_mul_ps(_mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + i), s), _mm512_maskz_loadu_ps(m, w + i)));
  }
}

float exp_shifted(float* x, int64_t n, float scale) {
  __m512 mx = _mm512_set1_ps(-INFINITY);
  for (int64_t i = 0; i < n; i += 16) {
    mx = _mm512_max_ps(mx, _mm512_mask_loadu_ps(_mm512_set1_ps(-INFINITY), tail_mask(n - i), x + i));
  }
  const __m512 m = _mm512_set1_ps(_mm512_reduce_max_ps(mx));
  const __m512 s = _mm512_set1_ps(scale);
  __m512 sum = _mm512_setzero_ps();
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 k = tail_mask(n - i);
    const __m512 e = exp_ps(_mm512_mul_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + i), m), s));
    _mm512_mask_storeu_ps(x + i, k, e);
    sum = _mm512_add_ps(sum, _mm512_maskz_mov_ps(k, e));
  }
  return _mm512_reduce_add_ps(sum);
}

void softmax(float* x, int64_t n) {
  const __m512 inv = _mm512_set1_ps(1.0f / exp_shifted(x, n, 1.0f));
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 k = tail_mask(n - i);
    _mm512_mask_storeu_ps(x + i, k, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, x + i), inv));
  }
}

void swiglu(float* out, const float* gate, const float* up, int64_t n) {
  const __m512 one = _mm512_set1_ps(1.0f);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 k = tail_mask(n - i);
    const __m512 g = _mm512_maskz_loadu_ps(k, gate + i);
    const __m512 silu = _mm512_div_ps(g, _mm512_add_ps(one, exp_ps(_mm512_sub_ps(_mm512_setzero_ps(), g))));
    _mm512_mask_storeu_ps(out + i, k, _mm512_mul_ps(silu, _mm512_maskz_loadu_ps(k, up + i)));
  }
}

float dot(const float* a, const float* b, int64_t n) {
  __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), s0);
    s1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 16), _mm512_loadu_ps(b + i + 16), s1);
  }
  for (; i < n; i += 16) {
    const __mmask16 k = tail_mask(n - i);
    s0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(k, a + i), _mm512_maskz_loadu_ps(k, b + i), s0);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
}

void axpy(float* y, float a, const float* x, int64_t n) {
  const __m512 av = _mm512_set1_ps(a);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 k = tail_mask(n - i);
    _mm512_mask_storeu_ps(y + i, k,
                          _mm512_fmadd_ps(av, _mm512_maskz_loadu_ps(k, x + i), _mm512_maskz_loadu_ps(k, y + i)));
  }
}

// ---------------------------------------------------------------- roofline probes
float read_sum(const float* p, int64_t n, int streams) {
  __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  int64_t i = 0;
  if (streams == 2) {
    const int64_t h = n / 64 * 32;  // each half, a multiple of 32 floats
    const float* q = p + h;
    for (; i < h; i += 32) {
      a0 = _mm512_add_ps(a0, _mm512_loadu_ps(p + i));
      a1 = _mm512_add_ps(a1, _mm512_loadu_ps(p + i + 16));
      a2 = _mm512_add_ps(a2, _mm512_loadu_ps(q + i));
      a3 = _mm512_add_ps(a3, _mm512_loadu_ps(q + i + 16));
    }
    i = 2 * h;
  } else {
    for (; i + 64 <= n; i += 64) {
      a0 = _mm512_add_ps(a0, _mm512_loadu_ps(p + i));
      a1 = _mm512_add_ps(a1, _mm512_loadu_ps(p + i + 16));
      a2 = _mm512_add_ps(a2, _mm512_loadu_ps(p + i + 32));
      a3 = _mm512_add_ps(a3, _mm512_loadu_ps(p + i + 48));
    }
  }
  float s = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
  for (; i < n; ++i) s += p[i];
  return s;
}

double fma_burn(int64_t iters, float* sink) {
  constexpr int kAcc = 12;  // 2 FMA pipes x 4-cycle latency, with margin
  __m512 acc[kAcc];
  for (int j = 0; j < kAcc; ++j) acc[j] = _mm512_set1_ps(1.0f + j * 1e-3f);
  const __m512 m = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-7f);
  for (int64_t i = 0; i < iters; ++i) {
#pragma GCC unroll 12
    for (int j = 0; j < kAcc; ++j) acc[j] = _mm512_fmadd_ps(acc[j], m, c);
  }
  __m512 s = acc[0];
  for (int j = 1; j < kAcc; ++j) s = _mm512_add_ps(s, acc[j]);
  *sink = _mm512_reduce_add_ps(s);
  return 2.0 * 16 * kAcc * static_cast<double>(iters);
}

const IsaKernels kTable = {Isa::kAvx512,
                           wants_xq,
                           xq_bytes,
                           quantize_x,
                           rows,
                           f32_to_f16,
                           f16_to_f32,
                           f32_to_bf16,
                           bf16_to_f32,
                           rmsnorm_row,
                           softmax,
                           exp_shifted,
                           swiglu,
                           dot,
                           axpy,
                           read_sum,
                           fma_burn,
                           avx512::attend,
                           f32_to_q8_0,
                           wants_xt,
                           avx512::gemm_xt_floats,
                           avx512::gemm_pack_xt};

}  // namespace

const IsaKernels& avx512_kernels() { return kTable; }

}  // namespace parallm::cpu
