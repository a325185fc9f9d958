// Kernels for packed q8_0 / q4_0 matrices (layout in packed.h), any batch
// size. A tile is one 16-row group against up to kTileTokens tokens (a lone
// token, or a group left over), or for batches a pair of groups against up to
// kPairTokens tokens. Per block the groups' quants are loaded once into
// registers (q4_0: split into low and high nibbles), then each token's 4-byte
// pieces of x are broadcast into VPDPBUSD against them; lane j accumulates row
// j, so a tile's result is already 16 consecutive outputs of each token.
//
// Integer dot per block and row: q4_0 stores nibbles n = q + 8 and q8_0
// stores q + 128 as unsigned bytes (VPDPBUSD's unsigned operand), x is the
// signed one, and the accumulator starts at -8 (or -128) times the sum of the
// block's x quants, which cancels the offset exactly. Then
//   acc[row] += float(dot) * d_w[row] * d_x.
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <utility>

#include "kernels/cpu/avx512_common.h"
#include "kernels/cpu/packed.h"

namespace parallm::cpu::avx512 {

namespace {

constexpr int kTileTokens = static_cast<int>(kXTile);

// Where a tile's x lives: block b of token t has its quants at
// q + b*step + 32t, its scale at d + b*step + 4t and its correction at
// c + b*step + 4t (bytes). Batches use the token tiles of quantize_x; a
// single token uses its own view (step 32 for q, 4 for d and c: given as
// separate steps).
struct TileX {
  const char* q;
  const char* d;
  const char* c;
  size_t q_step, dc_step;
};

// VPDPBUSD against x's 4 bytes at x4, broadcast to every lane.
// NOTE: g++ emits a separate VPBROADCASTD (a load) here. Folding it into the
// instruction (EVEX embedded broadcast, by inline asm) measured ~10% slower
// in the kernel lab (prefill-128 and 32-token batches): the asm statements
// kept the compiler from scheduling the chains and spilled accumulators.
inline int32_t load_i32(const char* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
inline float load_f32(const char* p) {
  float v;
  std::memcpy(&v, p, 4);
  return v;
}
inline __m512i dpbusd_bcast(__m512i acc, __m512i w, const char* x4) {
  return _mm512_dpbusd_epi32(acc, w, _mm512_set1_epi32(load_i32(x4)));
}

// The 8 quant registers of one block of the group: parts 0-3 then (q4_0)
// the high nibbles of parts 0-3, or (q8_0) parts 4-7. Part k multiplies x
// bytes 4k..4k+3 (q4_0's high nibbles: 16+4k..).
template <bool Q4>
inline void load_block(const uint8_t* p, __m512i w[8]) {
  if constexpr (Q4) {
    const __m512i low4 = _mm512_set1_epi8(0x0f);
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) {
      const __m512i raw = _mm512_loadu_si512(p + 64 * k);
      w[k] = _mm512_and_si512(raw, low4);
      w[4 + k] = _mm512_and_si512(_mm512_srli_epi16(raw, 4), low4);
    }
  } else {
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) w[k] = _mm512_loadu_si512(p + 64 * k);
  }
}

// Offset in a token's 32 x bytes that quant register k multiplies.
template <bool Q4>
constexpr int x_offset(int k) {
  return Q4 && k >= 4 ? 16 + 4 * (k - 4) : 4 * k;
}

template <bool Q4, int T>
void tile(const uint8_t* g, int64_t nb, const TileX& x, float* out, int64_t ldo, __mmask16 rows) {
  constexpr size_t kBlockBytes = Q4 ? 288 : 544, kScales = Q4 ? 256 : 512;
  __m512 acc[T];
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  const char *q = x.q, *d = x.d, *c = x.c;
  for (int64_t b = 0; b < nb; ++b, g += kBlockBytes, q += x.q_step, d += x.dc_step, c += x.dc_step) {
    if constexpr (T == 1) {
      // A lone token streams the weights once: request them kPrefetchAhead
      // bytes ahead, past the 4 KB pages where the hardware prefetchers stop.
      // NOTE: on an Ice Lake host the kernel lab's decode/q4_0-packed read
      // 13-20 GB/s without, 20-27 with (probe ~23); q8_0 was unchanged.
#pragma GCC unroll 9
      for (size_t i = 0; i < kBlockBytes; i += 64) {
        _mm_prefetch(reinterpret_cast<const char*>(g) + kPrefetchAhead + i, _MM_HINT_T0);
      }
    }
    __m512i w[8];
    load_block<Q4>(g, w);
    const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(g + kScales)));
    // Chains of VPDPBUSD, one per token (two for a lone token), advanced
    // side by side so that their latencies overlap.
    constexpr int kChains = T == 1 ? 2 : T;
    __m512i sum[kChains];
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) sum[t] = _mm512_set1_epi32(load_i32(c + 4 * t));
    if constexpr (T == 1) sum[1] = _mm512_setzero_si512();
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) {
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        __m512i& s = sum[T == 1 ? k % 2 : t];
        s = dpbusd_bcast(s, w[k], q + 32 * t + x_offset<Q4>(k));
      }
    }
    if constexpr (T == 1) sum[0] = _mm512_add_epi32(sum[0], sum[1]);
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const __m512 dx = _mm512_set1_ps(load_f32(d + 4 * t));
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum[t]), _mm512_mul_ps(dw, dx), acc[t]);
    }
  }
  for (int t = 0; t < T; ++t) _mm512_mask_storeu_ps(out + t * ldo, rows, acc[t]);
}

// Two groups (32 rows) against up to kPairTokens tokens: each broadcast of x
// feeds both groups' quants, one instruction fewer per multiply-add than
// tile(). Half a block at a time (4 quant registers per group) keeps 2T
// sums, 2T accumulators and 8 quant registers within the 32.
constexpr int kPairTokens = 4;

// Lines of the next pair's quants that a tile pulls into L2, spread evenly
// over its blocks so that the requests trickle out between the multiply-adds.
struct L2Feed {
  const char* next;
  int64_t lines;
};

template <bool Q4, int T>
void pair_tile(const uint8_t* g0, const uint8_t* g1, int64_t nb, const TileX& x, float* out, int64_t ldo,
               __mmask16 rows1, L2Feed feed) {
  constexpr size_t kBlockBytes = Q4 ? 288 : 544, kScales = Q4 ? 256 : 512;
  const __m512i low4 = _mm512_set1_epi8(0x0f);
  __m512 acc0[T], acc1[T];
  for (int t = 0; t < T; ++t) acc0[t] = acc1[t] = _mm512_setzero_ps();
  const char *q = x.q, *d = x.d, *c = x.c;
  int64_t credit = 0;
  for (int64_t b = 0; b < nb;
       ++b, g0 += kBlockBytes, g1 += kBlockBytes, q += x.q_step, d += x.dc_step, c += x.dc_step) {
    for (credit += feed.lines; credit >= nb; credit -= nb, feed.next += 64) _mm_prefetch(feed.next, _MM_HINT_T1);
    __m512i s0[T], s1[T];
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) s0[t] = s1[t] = _mm512_set1_epi32(load_i32(c + 4 * t));
#pragma GCC unroll 2
    for (int half = 0; half < 2; ++half) {
      __m512i w0[4], w1[4];
#pragma GCC unroll 4
      for (int k = 0; k < 4; ++k) {
        if constexpr (Q4) {
          const __m512i r0 = _mm512_loadu_si512(g0 + 64 * k), r1 = _mm512_loadu_si512(g1 + 64 * k);
          w0[k] = _mm512_and_si512(half == 0 ? r0 : _mm512_srli_epi16(r0, 4), low4);
          w1[k] = _mm512_and_si512(half == 0 ? r1 : _mm512_srli_epi16(r1, 4), low4);
        } else {
          w0[k] = _mm512_loadu_si512(g0 + 64 * (4 * half + k));
          w1[k] = _mm512_loadu_si512(g1 + 64 * (4 * half + k));
        }
      }
#pragma GCC unroll 4
      for (int k = 0; k < 4; ++k) {
#pragma GCC unroll 4
        for (int t = 0; t < T; ++t) {
          const __m512i xb = _mm512_set1_epi32(load_i32(q + 32 * t + x_offset<Q4>(4 * half + k)));
          s0[t] = _mm512_dpbusd_epi32(s0[t], w0[k], xb);
          s1[t] = _mm512_dpbusd_epi32(s1[t], w1[k], xb);
        }
      }
    }
    const __m512 dw0 = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(g0 + kScales)));
    const __m512 dw1 = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(g1 + kScales)));
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
      const __m512 dx = _mm512_set1_ps(load_f32(d + 4 * t));
      acc0[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s0[t]), _mm512_mul_ps(dw0, dx), acc0[t]);
      acc1[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s1[t]), _mm512_mul_ps(dw1, dx), acc1[t]);
    }
  }
  for (int t = 0; t < T; ++t) {
    _mm512_storeu_ps(out + t * ldo, acc0[t]);
    _mm512_mask_storeu_ps(out + t * ldo + kPackRows, rows1, acc1[t]);
  }
}

using TileFn = void (*)(const uint8_t*, int64_t, const TileX&, float*, int64_t, __mmask16);
using PairFn = void (*)(const uint8_t*, const uint8_t*, int64_t, const TileX&, float*, int64_t, __mmask16, L2Feed);

template <bool Q4, int... Ts>
constexpr std::array<PairFn, sizeof...(Ts)> pairs(std::integer_sequence<int, Ts...>) {
  return {&pair_tile<Q4, Ts + 1>...};
}
constexpr auto kQ4Pairs = pairs<true>(std::make_integer_sequence<int, kPairTokens>());
constexpr auto kQ8Pairs = pairs<false>(std::make_integer_sequence<int, kPairTokens>());

template <bool Q4, int... Ts>
constexpr std::array<TileFn, sizeof...(Ts)> tiles(std::integer_sequence<int, Ts...>) {
  return {&tile<Q4, Ts + 1>...};
}
constexpr auto kQ4Tiles = tiles<true>(std::make_integer_sequence<int, kTileTokens>());
constexpr auto kQ8Tiles = tiles<false>(std::make_integer_sequence<int, kTileTokens>());

}  // namespace

void packed_rows(const RowsTask& a) {
  if (a.wtype != DType::kQ4_0 && a.wtype != DType::kQ8_0) {
    block_packed_rows(a);
    return;
  }
  const bool q4 = a.wtype == DType::kQ4_0;
  const int64_t nb = a.n_in / 32;
  const auto& fns = q4 ? kQ4Tiles : kQ8Tiles;
  const size_t cq = q4 ? kXTile * 36 : kXTile * 40;  // c4 or c8 within a tile record
  const char* tiles = static_cast<const char*>(a.xq) + xq_tiles_offset(a.n_tokens, a.n_in);
  const auto& pair_fns = q4 ? kQ4Pairs : kQ8Pairs;
  auto mask = [](int64_t n_rows) { return static_cast<__mmask16>((1u << std::min<int64_t>(kPackRows, n_rows)) - 1); };
  // Group-major: a group's quants (nb blocks, 7-35 KB here) stay in L1/L2
  // while every token tile passes over them. Batches take groups in pairs.
  for (int64_t r0 = a.o_begin; r0 < a.o_end;) {
    const auto* g = reinterpret_cast<const uint8_t*>(a.w) + (r0 / kPackRows) * a.w_stride;
    if (a.n_tokens == 1) {
      const XqView v = xq_view(a.xq, 0, a.n_in);
      const TileX x{reinterpret_cast<const char*>(v.q8), reinterpret_cast<const char*>(v.d),
                    reinterpret_cast<const char*>(q4 ? v.c4 : v.c8), 32, 4};
      fns[0](g, nb, x, a.out + r0, a.out_stride, mask(a.o_end - r0));
      r0 += kPackRows;
      continue;
    }
    if (r0 + kPackRows < a.o_end) {
      // The next pair's quants are pulled into L2 a slice per token tile,
      // so its first tile does not wait on DRAM.
      // NOTE: without this, a 32-token batch streaming from DRAM ran at
      // ~0.78 of the rate with the same weights in L3 (the kernel lab's
      // batch32 against a 2-layer run); with it, +7-9% (q8_0 654 -> 700,
      // q4_0 735 -> 800 GFLOP/s, four alternating runs).
      // NOTE: each slice was first fetched in one burst before its tile; on
      // an Ice Lake host perf then put 13% of a served 32-stream decode step
      // on those prefetch instructions, waiting for miss buffers. Spread over
      // the tile's blocks (L2Feed): batch32/q8_0-packed +3-24% in five of
      // five alternating runs (median +8%), q4_0 within the noise.
      const char* next = reinterpret_cast<const char*>(g + 2 * a.w_stride);
      const int64_t rows_after = a.o_end - r0 - 2 * kPackRows;
      const size_t next_bytes = rows_after <= 0 ? 0 : (rows_after > kPackRows ? 2 : 1) * a.w_stride;
      const int64_t n_tiles = (a.n_tokens + kPairTokens - 1) / kPairTokens;
      const size_t slice = (next_bytes / static_cast<size_t>(n_tiles) + 63) & ~size_t{63};
      size_t fetched = 0;
      for (int64_t t0 = 0; t0 < a.n_tokens; t0 += kPairTokens) {
        const size_t end = std::min(next_bytes, fetched + slice);
        const L2Feed feed{next + fetched, static_cast<int64_t>((end - fetched + 63) / 64)};
        fetched = end;
        const int64_t n_t = std::min<int64_t>(kPairTokens, a.n_tokens - t0), i = t0 % kXTile;
        const char* rec = tiles + static_cast<size_t>(t0 / kXTile) * xq_tile_bytes(a.n_in);
        const TileX x{rec + 32 * i, rec + kXTile * 32 + 4 * i, rec + cq + 4 * i, kXTileRecord, kXTileRecord};
        pair_fns[n_t - 1](g, g + a.w_stride, nb, x, a.out + t0 * a.out_stride + r0, a.out_stride,
                          mask(a.o_end - r0 - kPackRows), feed);
      }
      r0 += 2 * kPackRows;
      continue;
    }
    for (int64_t t0 = 0; t0 < a.n_tokens; t0 += kTileTokens) {
      const int64_t n_t = std::min<int64_t>(kTileTokens, a.n_tokens - t0);
      const char* rec = tiles + static_cast<size_t>(t0 / kTileTokens) * xq_tile_bytes(a.n_in);
      const TileX x{rec, rec + kXTile * 32, rec + cq, kXTileRecord, kXTileRecord};
      fns[n_t - 1](g, nb, x, a.out + t0 * a.out_stride + r0, a.out_stride, mask(a.o_end - r0));
    }
    r0 += kPackRows;
  }
}

}  // namespace parallm::cpu::avx512
