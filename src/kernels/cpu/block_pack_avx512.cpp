// Kernels for the block-packed types (layout in block_pack.h), any batch
// size: one 16-row group against up to kXTile tokens. Per chunk of 32
// weights a row the group's 8 quant registers are built once (a shift and a
// mask per bit plane, a VPSHUFB for the iq4 codebook), then each token's
// 4-byte pieces of x are broadcast into VPDPBUSD against them; lane j
// accumulates row j.
//
// Per sub-block s of a chunk, token t (x = d_x * q_x, ggml's q8_0 per 32):
//   a_s   = sum u * q_x - offset * sum q_x            (exact, int32)
//   acc  += float(a_s) * (d * sc_s) * d_x
//   acc  -= (dmin * m_s) * (d_x * sum q_x)            (K types with a min)
//   acc  += m * (d_x * sum q_x)                       (q4_1, q5_1)
// with sum q_x per sub-block from quantize_x (s16, xs16).
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <utility>

#include "kernels/cpu/avx512_common.h"
#include "kernels/cpu/block_pack.h"
#include "kernels/cpu/packed.h"
#include "util/check.h"

namespace parallm::cpu::avx512 {

namespace {

constexpr int kMaxTokens = static_cast<int>(kXTile);

// Where a tile's x lives: the 32-block c of token t has its quants at
// q + c*q_step + 32t, its scale at d + c*d_step + 4t, its two half sums at
// s + c*s_step + 8t (int32) and xs + c*s_step + 8t (f32).
struct ChunkX {
  const char* q;
  const char* d;
  const char* s;
  const char* xs;
  size_t q_step, d_step, s_step;
};

// v >> r in each 16-bit lane (v << -r for negative r).
template <int R>
inline __m512i shift_right(__m512i v) {
  if constexpr (R > 0) {
    return _mm512_srli_epi16(v, R);
  } else if constexpr (R < 0) {
    return _mm512_slli_epi16(v, -R);
  } else {
    return v;
  }
}

// The iq4 codebook as unsigned bytes (level + 128), in every 128-bit lane.
inline __m512i iq4_lut() {
  alignas(16) static constexpr auto kTable = [] {
    std::array<uint8_t, 16> t{};
    for (int i = 0; i < 16; ++i) t[i] = static_cast<uint8_t>(kIq4nlValues[i] + 128);
    return t;
  }();
  return _mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<const __m128i*>(kTable.data())));
}

// Part K of a chunk: u of weights 4K..4K+3 of every row (block_pack.h).
template <DType T, int K>
inline __m512i part(const __m512i* p0, const __m512i* p1, __m512i lut) {
  constexpr BlockLayout L = block_layout(T);
  constexpr int w0 = L.planes[0], w1 = L.planes[1];
  __m512i u = _mm512_and_si512(shift_right<w0*(K / w0)>(p0[K % w0]), _mm512_set1_epi8((1 << w0) - 1));
  if constexpr (w1 > 0) {
    const __m512i high = shift_right<w1*(K / w1) - w0>(p1[K % w1]);
    u = _mm512_ternarylogic_epi32(u, high, _mm512_set1_epi8(static_cast<char>(((1 << w1) - 1) << w0)), 0xF8);
  }
  if constexpr (L.codebook) u = _mm512_shuffle_epi8(lut, u);
  return u;
}

template <DType T, int... K>
inline void load_parts(const uint8_t* chunk, __m512i u[8], std::integer_sequence<int, K...>) {
  constexpr BlockLayout L = block_layout(T);
  constexpr int w0 = L.planes[0], w1 = L.planes[1];
  __m512i p0[w0], p1[w1 > 0 ? w1 : 1];
  for (int v = 0; v < w0; ++v) p0[v] = _mm512_loadu_si512(chunk + 64 * v);
  for (int v = 0; v < w1; ++v) p1[v] = _mm512_loadu_si512(chunk + 64 * (w0 + v));
  const __m512i lut = L.codebook ? iq4_lut() : _mm512_setzero_si512();
  ((u[K] = part<T, K>(p0, p1, lut)), ...);
}

template <DType T, int NT>
void tile(const uint8_t* g, int64_t n_super, ChunkX x, float* out, int64_t ldo, __mmask16 rows) {
  constexpr BlockLayout L = block_layout(T);
  constexpr int kSubs = 32 / L.sub;  // sub-blocks per chunk: 1 or 2
  constexpr size_t kRec = L.record_bytes();
  // A lone token streams the weights once: each chunk requests its share of
  // the record kPrefetchAhead bytes ahead (isa_table.h).
  constexpr int kLines = static_cast<int>((kRec + 63) / 64), kLinesPerChunk = (kLines + L.chunks() - 1) / L.chunks();
  __m512 acc[NT];
  for (int t = 0; t < NT; ++t) acc[t] = _mm512_setzero_ps();
  for (int64_t sb = 0; sb < n_super; ++sb) {
    const uint8_t* rec = g + sb * kRec;
    const __m512 dv = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(rec)));
    __m512 dm = _mm512_setzero_ps();
    if constexpr (L.min != BlockMin::kNone) {
      dm = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(rec + L.dmin_offset())));
    }
    for (int c = 0; c < L.chunks(); ++c, x.q += x.q_step, x.d += x.d_step, x.s += x.s_step, x.xs += x.s_step) {
      if constexpr (NT == 1) {
        const char* ahead = reinterpret_cast<const char*>(rec) + kPrefetchAhead + 64 * kLinesPerChunk * c;
#pragma GCC unroll 8
        for (int i = 0; i < kLinesPerChunk; ++i) _mm_prefetch(ahead + 64 * i, _MM_HINT_T0);
      }
      __m512i u[8];
      load_parts<T>(rec + L.header_bytes() + c * L.chunk_bytes(), u, std::make_integer_sequence<int, 8>());
      // The sub-blocks' weight scales d * sc and mins dmin * m, all rows.
      __m512 D[kSubs], M[kSubs];
#pragma GCC unroll 2
      for (int h = 0; h < kSubs; ++h) {
        D[h] = dv, M[h] = dm;
        if constexpr (L.int_scales) {
          const int sub = c * kSubs + h;
          const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(rec + L.sc_offset() + 16 * sub));
          __m512i sc = L.combined ? _mm512_cvtepu8_epi32(raw) : _mm512_cvtepi8_epi32(raw);
          if constexpr (L.combined) {
            M[h] = _mm512_mul_ps(dm, _mm512_cvtepi32_ps(_mm512_srli_epi32(sc, 4)));
            sc = _mm512_and_si512(sc, _mm512_set1_epi32(0xf));
          } else if constexpr (L.separate_m()) {
            const __m128i m = _mm_loadu_si128(reinterpret_cast<const __m128i*>(rec + L.m_offset() + 16 * sub));
            M[h] = _mm512_mul_ps(dm, _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(m)));
          }
          D[h] = _mm512_mul_ps(dv, _mm512_cvtepi32_ps(sc));
        }
      }
#pragma GCC unroll 8
      for (int t = 0; t < NT; ++t) {
        const char* q = x.q + 32 * t;
        const int32_t s0 = load_as<int32_t>(x.s + 8 * t), s1 = load_as<int32_t>(x.s + 8 * t + 4);
        // Two chains (the sub-blocks' halves, or even and odd parts) whose
        // latencies overlap; the offset's correction starts the first.
        __m512i a0, a1;
        if constexpr (kSubs == 2) {
          a0 = _mm512_set1_epi32(-L.offset * s0), a1 = _mm512_set1_epi32(-L.offset * s1);
        } else {
          a0 = _mm512_set1_epi32(-L.offset * (s0 + s1)), a1 = _mm512_setzero_si512();
        }
#pragma GCC unroll 8
        for (int k = 0; k < 8; ++k) {
          __m512i& a = (kSubs == 2 ? k < 4 : k % 2 == 0) ? a0 : a1;
          a = _mm512_dpbusd_epi32(a, u[k], _mm512_set1_epi32(load_as<int32_t>(q + 4 * k)));
        }
        __m512 y;
        if constexpr (kSubs == 2) {
          y = _mm512_fmadd_ps(_mm512_cvtepi32_ps(a1), D[1], _mm512_mul_ps(_mm512_cvtepi32_ps(a0), D[0]));
        } else {
          y = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(a0, a1)), D[0]);
        }
        acc[t] = _mm512_fmadd_ps(y, _mm512_set1_ps(load_as<float>(x.d + 4 * t)), acc[t]);
        const float xs0 = load_as<float>(x.xs + 8 * t), xs1 = load_as<float>(x.xs + 8 * t + 4);
        if constexpr (L.min == BlockMin::kSub && kSubs == 2) {
          acc[t] = _mm512_fnmadd_ps(M[0], _mm512_set1_ps(xs0), acc[t]);
          acc[t] = _mm512_fnmadd_ps(M[1], _mm512_set1_ps(xs1), acc[t]);
        } else if constexpr (L.min == BlockMin::kSub) {
          acc[t] = _mm512_fnmadd_ps(M[0], _mm512_set1_ps(xs0 + xs1), acc[t]);
        } else if constexpr (L.min == BlockMin::kAdd) {
          acc[t] = _mm512_fmadd_ps(M[0], _mm512_set1_ps(xs0 + xs1), acc[t]);
        }
      }
    }
  }
  for (int t = 0; t < NT; ++t) _mm512_mask_storeu_ps(out + t * ldo, rows, acc[t]);
}

using TileFn = void (*)(const uint8_t*, int64_t, ChunkX, float*, int64_t, __mmask16);

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

void block_packed_rows(const RowsTask& a) {
  const BlockLayout L = block_layout(a.wtype);
  const auto& fns = tiles_of(a.wtype);
  const int64_t n_super = a.n_in / L.super;
  auto mask = [](int64_t n_rows) { return static_cast<__mmask16>((1u << std::min<int64_t>(kPackRows, n_rows)) - 1); };
  const char* tile_base = static_cast<const char*>(a.xq) + xq_tiles_offset(a.n_tokens, a.n_in);
  // Group-major: a group's record (a few KB) stays in L1/L2 while every
  // token tile passes over it.
  for (int64_t r0 = a.o_begin; r0 < a.o_end; r0 += kPackRows) {
    const auto* g = reinterpret_cast<const uint8_t*>(a.w) + (r0 / kPackRows) * a.w_stride;
    if (a.n_tokens == 1) {
      const XqView v = xq_view(a.xq, 0, a.n_in);
      const ChunkX x{reinterpret_cast<const char*>(v.q8),
                     reinterpret_cast<const char*>(v.d),
                     reinterpret_cast<const char*>(v.s16),
                     reinterpret_cast<const char*>(v.xs16),
                     32,
                     4,
                     8};
      fns[0](g, n_super, x, a.out + r0, a.out_stride, mask(a.o_end - r0));
      continue;
    }
    for (int64_t t0 = 0; t0 < a.n_tokens; t0 += kMaxTokens) {
      const int64_t n_t = std::min<int64_t>(kMaxTokens, a.n_tokens - t0);
      const char* rec = tile_base + static_cast<size_t>(t0 / kMaxTokens) * xq_tile_bytes(a.n_in);
      const ChunkX x{rec,          rec + kXTile * 32, rec + kXTile * 44, rec + kXTile * 52,
                     kXTileRecord, kXTileRecord,      kXTileRecord};
      fns[n_t - 1](g, n_super, x, a.out + t0 * a.out_stride + r0, a.out_stride, mask(a.o_end - r0));
    }
  }
}

}  // namespace parallm::cpu::avx512
