// Kernels for packed q8_0 / q4_0 matrices (layout in packed.h), any batch
// size: a tile is one 16-row group against up to kTileTokens tokens. Per
// block the group's quants are loaded once into registers (q4_0: split into
// low and high nibbles), then each token's 4-byte pieces of x are broadcast
// into VPDPBUSD against them; lane j accumulates row j, so the tile's result
// is already 16 consecutive outputs of each token.
//
// Integer dot per block and row: q4_0 stores nibbles n = q + 8 and q8_0
// stores q + 128 as unsigned bytes (VPDPBUSD's unsigned operand), x is the
// signed one, and the accumulator starts at -8 (or -128) times the sum of the
// block's x quants, which cancels the offset exactly. Then
//   acc[row] += float(dot) * d_w[row] * d_x.
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <utility>

#include "kernels/cpu/avx512_common.h"
#include "kernels/cpu/packed.h"

namespace parallm::cpu::avx512 {

namespace {

// Tokens per tile: T float accumulators + 8 quant registers + temporaries
// stay within the 32 zmm registers.
constexpr int kTileTokens = 8;

struct TileX {
  const char* base;  // the tile's first token in quantize_x's layout
  int64_t n_in;
};

template <int T>
void q4_tile(const uint8_t* g, int64_t nb, const TileX& x, float* out, int64_t ldo, __mmask16 rows) {
  XqView xv[T];
  for (int t = 0; t < T; ++t) xv[t] = xq_view(x.base, t, x.n_in);
  __m512 acc[T];
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  const __m512i low4 = _mm512_set1_epi8(0x0f);
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* p = g + b * 288;
    __m512i w[8];
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) {
      const __m512i raw = _mm512_loadu_si512(p + 64 * k);
      w[k] = _mm512_and_si512(raw, low4);
      w[4 + k] = _mm512_and_si512(_mm512_srli_epi16(raw, 4), low4);
    }
    const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 256)));
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const auto* xb = reinterpret_cast<const int32_t*>(xv[t].q8 + b * 32);
      // Two chains: VPDPBUSD's latency would otherwise bound a lone token.
      __m512i s0 = _mm512_set1_epi32(xv[t].c4[b]), s1 = _mm512_setzero_si512();
#pragma GCC unroll 4
      for (int k = 0; k < 4; ++k) {
        s0 = _mm512_dpbusd_epi32(s0, w[k], _mm512_set1_epi32(xb[k]));
        s1 = _mm512_dpbusd_epi32(s1, w[4 + k], _mm512_set1_epi32(xb[4 + k]));
      }
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(s0, s1)),
                               _mm512_mul_ps(dw, _mm512_set1_ps(xv[t].d[b])), acc[t]);
    }
  }
  for (int t = 0; t < T; ++t) _mm512_mask_storeu_ps(out + t * ldo, rows, acc[t]);
}

template <int T>
void q8_tile(const uint8_t* g, int64_t nb, const TileX& x, float* out, int64_t ldo, __mmask16 rows) {
  XqView xv[T];
  for (int t = 0; t < T; ++t) xv[t] = xq_view(x.base, t, x.n_in);
  __m512 acc[T];
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* p = g + b * 544;
    __m512i w[8];
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) w[k] = _mm512_loadu_si512(p + 64 * k);
    const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 512)));
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const auto* xb = reinterpret_cast<const int32_t*>(xv[t].q8 + b * 32);
      __m512i s0 = _mm512_set1_epi32(xv[t].c8[b]), s1 = _mm512_setzero_si512();
#pragma GCC unroll 4
      for (int k = 0; k < 8; k += 2) {
        s0 = _mm512_dpbusd_epi32(s0, w[k], _mm512_set1_epi32(xb[k]));
        s1 = _mm512_dpbusd_epi32(s1, w[k + 1], _mm512_set1_epi32(xb[k + 1]));
      }
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(s0, s1)),
                               _mm512_mul_ps(dw, _mm512_set1_ps(xv[t].d[b])), acc[t]);
    }
  }
  for (int t = 0; t < T; ++t) _mm512_mask_storeu_ps(out + t * ldo, rows, acc[t]);
}

using TileFn = void (*)(const uint8_t*, int64_t, const TileX&, float*, int64_t, __mmask16);

template <int... Ts>
constexpr std::array<TileFn, sizeof...(Ts)> q4_tiles(std::integer_sequence<int, Ts...>) {
  return {&q4_tile<Ts + 1>...};
}
template <int... Ts>
constexpr std::array<TileFn, sizeof...(Ts)> q8_tiles(std::integer_sequence<int, Ts...>) {
  return {&q8_tile<Ts + 1>...};
}
constexpr auto kQ4Tiles = q4_tiles(std::make_integer_sequence<int, kTileTokens>());
constexpr auto kQ8Tiles = q8_tiles(std::make_integer_sequence<int, kTileTokens>());

}  // namespace

void packed_rows(const RowsTask& a) {
  const int64_t nb = a.n_in / 32;
  const auto& tiles = a.wtype == DType::kQ4_0 ? kQ4Tiles : kQ8Tiles;
  const size_t stride = xq_token_bytes(a.n_in);
  // Group-major: a group's quants (nb blocks, 7-18 KB here) stay in L1/L2
  // while every token tile passes over them.
  for (int64_t r0 = a.o_begin; r0 < a.o_end; r0 += kPackRows) {
    const auto* g = reinterpret_cast<const uint8_t*>(a.w) + (r0 / kPackRows) * a.w_stride;
    const int64_t n_rows = std::min<int64_t>(kPackRows, a.o_end - r0);
    const auto rows = static_cast<__mmask16>((1u << n_rows) - 1);
    for (int64_t t0 = 0; t0 < a.n_tokens; t0 += kTileTokens) {
      const int64_t n_t = std::min<int64_t>(kTileTokens, a.n_tokens - t0);
      const TileX x{static_cast<const char*>(a.xq) + t0 * stride, a.n_in};
      tiles[n_t - 1](g, nb, x, a.out + t0 * a.out_stride + r0, a.out_stride, rows);
    }
  }
}

}  // namespace parallm::cpu::avx512
