// AVX2 kernels for the block-packed types (layout in block_pack.h), any
// batch size: one 16-row group against up to kMaxTokens tokens, the group
// taken as two halves of 8 rows (the low and high 32 bytes of each 64-byte
// plane vector). The same integer form as block_pack_avx512.cpp, without
// VPDPBUSD:
//   a_s = sum u * q_x - offset * sum q_x   (exact, int32)
// where a VPMADDUBSW multiplies the unsigned u by x's signed bytes into
// 16-bit pair sums, a few parts' pairs are added in 16 bits while no sum can
// overflow (kGroup), and one VPMADDWD against ones widens them to the row's
// int32 lane. The iq4 codebook levels are signed (-127..113), so their
// products take the usual sign trick (|u| times x with u's sign) and no
// offset.
//
// Why: on AVX2-only CPUs (Haswell, Zen 1-3) these types decoded one GGUF row
// at a time (blocks_avx2.cpp) and prefilled through f32 panels dequantized
// per call; the packed rows need no per-call unpacking and no horizontal
// sums (docs/PERFORMANCE.md, "AVX2").
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <utility>

#include "kernels/cpu/avx2_blocks.h"
#include "kernels/cpu/block_pack.h"
#include "kernels/cpu/packed.h"

namespace parallm::cpu::avx2 {

namespace {

// Tokens a tile: x values and 2 halves' accumulators per token stay in the
// 16 registers with the 8 parts' weights up to about here.
constexpr int kMaxTokens = 4;

// v >> r in each 16-bit lane (v << -r for negative r).
template <int R>
inline __m256i shift_right(__m256i v) {
  if constexpr (R > 0) {
    return _mm256_srli_epi16(v, R);
  } else if constexpr (R < 0) {
    return _mm256_slli_epi16(v, -R);
  } else {
    return v;
  }
}

// How many parts' VPMADDUBSW pair sums may be added in 16 bits: a pair is at
// most 2 * u_max * 127, and the group stays inside one sub-block (parts 0-3
// and 4-7 when the sub-blocks hold 16 weights).
template <DType T>
constexpr int group_parts() {
  constexpr BlockLayout L = block_layout(T);
  if (L.codebook) return 1;  // |u| <= 127: one pair may reach 32,258
  const int u_max = (1 << (L.planes[0] + L.planes[1])) - 1;
  const int fit = 32767 / (2 * u_max * 127);
  const int cap = L.sub == 16 ? 4 : 8;
  return fit < cap ? fit : cap;
}

// The iq4 codebook as signed bytes, in both 128-bit lanes.
inline __m256i iq4_lut() {
  const __m128i t = _mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4nlValues));
  return _mm256_broadcastsi128_si256(t);
}

// Part K of a chunk for one half: u of weights 4K..4K+3 of its 8 rows
// (block_pack.h); for the codebook types, the signed level.
template <DType T, int K>
inline __m256i part(const __m256i* p0, const __m256i* p1, __m256i lut) {
  constexpr BlockLayout L = block_layout(T);
  constexpr int w0 = L.planes[0], w1 = L.planes[1];
  __m256i u = _mm256_and_si256(shift_right<w0*(K / w0)>(p0[K % w0]), _mm256_set1_epi8((1 << w0) - 1));
  if constexpr (w1 > 0) {
    const __m256i high = shift_right<w1*(K / w1) - w0>(p1[K % w1]);
    u = _mm256_or_si256(u, _mm256_and_si256(high, _mm256_set1_epi8(static_cast<char>(((1 << w1) - 1) << w0))));
  }
  if constexpr (L.codebook) u = _mm256_shuffle_epi8(lut, u);
  return u;
}

template <DType T, int... K>
inline void load_parts(const uint8_t* chunk, int half, __m256i u[8], std::integer_sequence<int, K...>) {
  constexpr BlockLayout L = block_layout(T);
  constexpr int w0 = L.planes[0], w1 = L.planes[1];
  __m256i p0[w0], p1[w1 > 0 ? w1 : 1];
  const uint8_t* base = chunk + 32 * half;
  for (int v = 0; v < w0; ++v) p0[v] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(base + 64 * v));
  for (int v = 0; v < w1; ++v) p1[v] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(base + 64 * (w0 + v)));
  const __m256i lut = L.codebook ? iq4_lut() : _mm256_setzero_si256();
  ((u[K] = part<T, K>(p0, p1, lut)), ...);
}

// 16-bit pair sums of part k: u * x, or |u| * (x with u's sign).
template <DType T>
inline __m256i pairs(__m256i u, __m256i x) {
  if constexpr (block_layout(T).codebook) {
    return _mm256_maddubs_epi16(_mm256_sign_epi8(u, u), _mm256_sign_epi8(x, u));
  } else {
    return _mm256_maddubs_epi16(u, x);
  }
}

// The int32 sums of parts [P0, P0 + N) of one token, x bytes 4k.. at q.
template <DType T, int P0, int N>
inline __m256i dot_parts(const __m256i u[8], const int8_t* q) {
  constexpr int G = group_parts<T>();
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i sum = _mm256_setzero_si256();
#pragma GCC unroll 8
  for (int g = P0; g < P0 + N; g += G) {
    __m256i p = pairs<T>(u[g], _mm256_set1_epi32(load_as<int32_t>(q + 4 * g)));
    for (int k = g + 1; k < g + G && k < P0 + N; ++k)  // G = 1: no loop (so no unroll pragma)
      p = _mm256_add_epi16(p, pairs<T>(u[k], _mm256_set1_epi32(load_as<int32_t>(q + 4 * k))));
    sum = _mm256_add_epi32(sum, _mm256_madd_epi16(p, ones));
  }
  return sum;
}

// One token's x (isa_avx2.cpp's quantize_x): q per 32-block, its scale, and
// the int and scaled sums of each half block.
struct TokenX {
  const int8_t* q;
  const float* d;
  const int32_t* s16;
  const float* xs16;
};

template <DType T, int NT>
void tile(const uint8_t* g, int64_t n_super, const TokenX* xs, float* out, int64_t ldo, int n_rows) {
  constexpr BlockLayout L = block_layout(T);
  constexpr int kSubs = 32 / L.sub;  // sub-blocks per chunk: 1 or 2
  constexpr int kOffset = L.codebook ? 0 : L.offset;
  constexpr size_t kRec = L.record_bytes();
  constexpr int kLines = static_cast<int>((kRec + 63) / 64), kLinesPerChunk = (kLines + L.chunks() - 1) / L.chunks();
  __m256 acc[2][NT];
  for (int h = 0; h < 2; ++h) {
    for (int t = 0; t < NT; ++t) acc[h][t] = _mm256_setzero_ps();
  }
  for (int64_t sb = 0; sb < n_super; ++sb) {
    const uint8_t* rec = g + sb * kRec;
    for (int c = 0; c < L.chunks(); ++c) {
      if constexpr (NT == 1) {  // a lone token streams the weights (isa_table.h)
        const char* ahead = reinterpret_cast<const char*>(rec) + kPrefetchAhead + 64 * kLinesPerChunk * c;
#pragma GCC unroll 8
        for (int i = 0; i < kLinesPerChunk; ++i) _mm_prefetch(ahead + 64 * i, _MM_HINT_T0);
      }
      const int64_t xb = sb * L.chunks() + c;  // x's 32-block
#pragma GCC unroll 2
      for (int h = 0; h < 2; ++h) {
        __m256i u[8];
        load_parts<T>(rec + L.header_bytes() + c * L.chunk_bytes(), h, u, std::make_integer_sequence<int, 8>());
        const __m256 dv = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(rec + 16 * h)));
        __m256 dm = _mm256_setzero_ps();
        if constexpr (L.min != BlockMin::kNone) {
          dm = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(rec + L.dmin_offset() + 16 * h)));
        }
        // The sub-blocks' weight scales d * sc and mins dmin * m, 8 rows.
        __m256 D[kSubs], M[kSubs];
#pragma GCC unroll 2
        for (int s = 0; s < kSubs; ++s) {
          D[s] = dv, M[s] = dm;
          if constexpr (L.int_scales) {
            const int sub = c * kSubs + s;
            const __m128i raw =
                _mm_loadl_epi64(reinterpret_cast<const __m128i*>(rec + L.sc_offset() + 16 * sub + 8 * h));
            __m256i sc = L.combined ? _mm256_cvtepu8_epi32(raw) : _mm256_cvtepi8_epi32(raw);
            if constexpr (L.combined) {
              M[s] = _mm256_mul_ps(dm, _mm256_cvtepi32_ps(_mm256_srli_epi32(sc, 4)));
              sc = _mm256_and_si256(sc, _mm256_set1_epi32(0xf));
            } else if constexpr (L.separate_m()) {
              const __m128i m =
                  _mm_loadl_epi64(reinterpret_cast<const __m128i*>(rec + L.m_offset() + 16 * sub + 8 * h));
              M[s] = _mm256_mul_ps(dm, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(m)));
            }
            D[s] = _mm256_mul_ps(dv, _mm256_cvtepi32_ps(sc));
          }
        }
#pragma GCC unroll 4
        for (int t = 0; t < NT; ++t) {
          const int8_t* q = xs[t].q + 32 * xb;
          const int32_t s0 = xs[t].s16[2 * xb], s1 = xs[t].s16[2 * xb + 1];
          const float xs0 = xs[t].xs16[2 * xb], xs1 = xs[t].xs16[2 * xb + 1];
          __m256 y;
          if constexpr (kSubs == 2) {
            const __m256i a0 = _mm256_sub_epi32(dot_parts<T, 0, 4>(u, q), _mm256_set1_epi32(kOffset * s0));
            const __m256i a1 = _mm256_sub_epi32(dot_parts<T, 4, 4>(u, q), _mm256_set1_epi32(kOffset * s1));
            y = _mm256_fmadd_ps(_mm256_cvtepi32_ps(a1), D[1], _mm256_mul_ps(_mm256_cvtepi32_ps(a0), D[0]));
          } else {
            const __m256i a = _mm256_sub_epi32(dot_parts<T, 0, 8>(u, q), _mm256_set1_epi32(kOffset * (s0 + s1)));
            y = _mm256_mul_ps(_mm256_cvtepi32_ps(a), D[0]);
          }
          __m256 r = _mm256_fmadd_ps(y, _mm256_set1_ps(xs[t].d[xb]), acc[h][t]);
          if constexpr (L.min == BlockMin::kSub && kSubs == 2) {
            r = _mm256_fnmadd_ps(M[0], _mm256_set1_ps(xs0), r);
            r = _mm256_fnmadd_ps(M[1], _mm256_set1_ps(xs1), r);
          } else if constexpr (L.min == BlockMin::kSub) {
            r = _mm256_fnmadd_ps(M[0], _mm256_set1_ps(xs0 + xs1), r);
          } else if constexpr (L.min == BlockMin::kAdd) {
            r = _mm256_fmadd_ps(M[0], _mm256_set1_ps(xs0 + xs1), r);
          }
          acc[h][t] = r;
        }
      }
    }
  }
  for (int t = 0; t < NT; ++t) {
    if (n_rows == kPackRows) {
      _mm256_storeu_ps(out + t * ldo, acc[0][t]);
      _mm256_storeu_ps(out + t * ldo + 8, acc[1][t]);
    } else {  // the matrix's last group: its padding rows are not stored
      alignas(32) float row[16];
      _mm256_store_ps(row, acc[0][t]);
      _mm256_store_ps(row + 8, acc[1][t]);
      std::memcpy(out + t * ldo, row, sizeof(float) * static_cast<size_t>(n_rows));
    }
  }
}

using TileFn = void (*)(const uint8_t*, int64_t, const TokenX*, float*, int64_t, int);

template <DType T, int... Ts>
constexpr std::array<TileFn, sizeof...(Ts)> tiles(std::integer_sequence<int, Ts...>) {
  return {&tile<T, Ts + 1>...};
}
template <DType T>
constexpr auto kTiles = tiles<T>(std::make_integer_sequence<int, kMaxTokens>());

const std::array<TileFn, kMaxTokens>& tiles_of(DType t) {
  return visit_block_type(
      t, [](auto type) -> const std::array<TileFn, kMaxTokens>& { return kTiles<decltype(type)::value>; });
}

}  // namespace

void block_packed_rows(const RowsTask& a, const XqLayout& xl) {
  const BlockLayout L = block_layout(a.wtype);
  const auto& fns = tiles_of(a.wtype);
  const int64_t n_super = a.n_in / L.super;
  // Group-major: a group's records (a few KB) stay in L1/L2 while every
  // token tile passes over them.
  for (int64_t r0 = a.o_begin; r0 < a.o_end; r0 += kPackRows) {
    const auto* g = reinterpret_cast<const uint8_t*>(a.w) + (r0 / kPackRows) * a.w_stride;
    const int n_rows = static_cast<int>(std::min<int64_t>(kPackRows, a.o_end - r0));
    for (int64_t t0 = 0; t0 < a.n_tokens; t0 += kMaxTokens) {
      const int n_t = static_cast<int>(std::min<int64_t>(kMaxTokens, a.n_tokens - t0));
      TokenX xs[kMaxTokens];
      for (int i = 0; i < n_t; ++i) {
        const char* base = static_cast<const char*>(a.xq) + (t0 + i) * xl.token_bytes;
        xs[i] = {reinterpret_cast<const int8_t*>(base), reinterpret_cast<const float*>(base + xl.d_offset),
                 reinterpret_cast<const int32_t*>(base + xl.s16_offset),
                 reinterpret_cast<const float*>(base + xl.xs16_offset)};
      }
      fns[n_t - 1](g, n_super, xs, a.out + t0 * a.out_stride + r0, a.out_stride, n_rows);
    }
  }
}

}  // namespace parallm::cpu::avx2
