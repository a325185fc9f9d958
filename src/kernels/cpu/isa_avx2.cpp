// AVX2 + FMA + F16C kernel table (flags per file in src/kernels/CMakeLists.txt),
// the same structure as isa_avx512.cpp with 8-lane vectors and 16 registers:
//  - decode: one weight row at a time, widened in registers;
//  - GEMM: dot_tile<R, T, Load> (4 rows x 3 tokens: 12 accumulators) over f32
//    panels (simpler than the AVX-512 GEMM; a fallback level);
//  - q8_0 / q4_0 mat-vec with x quantized to 8 bits and VPMADDUBSW (no VNNI
//    needed, so Zen 1-3 and Haswell run it), and the same for the other
//    block types but q6_k (blocks_avx2.cpp);
//  - the block types packed at load (block_pack.h: q4_1 .. iq4_xs, q2_k ..
//    q6_k) at any batch size, with the same 8-bit x (block_pack_avx2.cpp);
//  - KV-cache row conversions and the roofline probes.
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <utility>
#include <vector>

#include "kernels/cpu/avx2_blocks.h"
#include "kernels/cpu/block_pack.h"
#include "kernels/cpu/isa_table.h"
#include "kernels/cpu/quant.h"

namespace parallm::cpu {

namespace {

inline float hsum(__m256 v) {
  const __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 t = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(t, _mm_movehdup_ps(t)));
}

// 8 consecutive weights of a row from element k, as f32; scalar() for tails.
struct LoadF32 {
  static constexpr int64_t kBytes = 4;
  static __m256 load(const char* row, int64_t k) { return _mm256_loadu_ps(reinterpret_cast<const float*>(row) + k); }
  static float scalar(const char* row, int64_t k) {
    float v;
    std::memcpy(&v, row + 4 * k, 4);  // rows need not be 4-byte aligned
    return v;
  }
};
struct LoadF16 {
  static constexpr int64_t kBytes = 2;
  static __m256 load(const char* row, int64_t k) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * k)));
  }
  static float scalar(const char* row, int64_t k) {
    uint16_t v;
    std::memcpy(&v, row + 2 * k, 2);
    return fp16_to_fp32(v);
  }
};
struct LoadBF16 {
  static constexpr int64_t kBytes = 2;
  static __m256 load(const char* row, int64_t k) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * k));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
  static float scalar(const char* row, int64_t k) {
    uint16_t v;
    std::memcpy(&v, row + 2 * k, 2);
    return bf16_to_fp32(v);
  }
};

// out[t*ldo + r] = sum_k W[r][k] * x[t*ldx + k] for r < R, t < T, k < n.
template <int R, int T, class L>
void dot_tile(const char* w, size_t w_stride, const float* x, int64_t ldx, int64_t n, float* out, int64_t ldo) {
  __m256 acc[R][T];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();
  }
  int64_t k = 0;
  for (; k + 8 <= n; k += 8) {
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m256 wv = L::load(w + r * w_stride, k);
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) acc[r][t] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x + t * ldx + k), acc[r][t]);
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int t = 0; t < T; ++t) {
      float s = hsum(acc[r][t]);
      for (int64_t kk = k; kk < n; ++kk) s += L::scalar(w + r * w_stride, kk) * x[t * ldx + kk];
      out[t * ldo + r] = s;
    }
  }
}

constexpr int kTileR = 4;
constexpr int kTileT = 3;

using TileFn = void (*)(const char*, size_t, const float*, int64_t, int64_t, float*, int64_t);

template <class L, int R, int... Ts>
constexpr std::array<TileFn, sizeof...(Ts)> tile_row(std::integer_sequence<int, Ts...>) {
  return {&dot_tile<R, Ts + 1, L>...};
}
template <class L, int... Rs>
constexpr std::array<std::array<TileFn, kTileT>, sizeof...(Rs)> tile_table(std::integer_sequence<int, Rs...>) {
  return {tile_row<L, Rs + 1>(std::make_integer_sequence<int, kTileT>())...};
}
template <class L>
constexpr auto kTiles = tile_table<L>(std::make_integer_sequence<int, kTileR>());

template <class L>
void direct_rows(const char* w, size_t w_stride, const float* x, int64_t n_tokens, int64_t n_in, int64_t o_begin,
                 int64_t o_end, float* out, int64_t ldo) {
  for (int64_t t0 = 0; t0 < n_tokens; t0 += kTileT) {
    const int nt = static_cast<int>(std::min<int64_t>(kTileT, n_tokens - t0));
    for (int64_t o = o_begin; o < o_end; o += kTileR) {
      const int nr = static_cast<int>(std::min<int64_t>(kTileR, o_end - o));
      kTiles<L>[nr - 1][nt - 1](w + o * w_stride, w_stride, x + t0 * n_in, n_in, n_in, out + t0 * ldo + o, ldo);
    }
  }
}

// Decode: one weight row at a time (see the NOTE in isa_avx512.cpp: row
// tiles interleave streams and halve the bandwidth); a single token gets 4
// accumulators to cover FMA latency.
template <class L>
float row_dot1(const char* row, const float* x, int64_t n) {
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  int64_t k = 0;
  for (; k + 32 <= n; k += 32) {
    // NOTE: on the Ice Lake host with this level forced, the kernel lab's
    // decode/f16 read 14.7-16.5 GB/s without this prefetch, 18.9-20.7 with.
#pragma GCC unroll 2
    for (int64_t b = 0; b < 32 * L::kBytes; b += 64)
      _mm_prefetch(row + L::kBytes * k + kPrefetchAhead + b, _MM_HINT_T0);
    a0 = _mm256_fmadd_ps(L::load(row, k), _mm256_loadu_ps(x + k), a0);
    a1 = _mm256_fmadd_ps(L::load(row, k + 8), _mm256_loadu_ps(x + k + 8), a1);
    a2 = _mm256_fmadd_ps(L::load(row, k + 16), _mm256_loadu_ps(x + k + 16), a2);
    a3 = _mm256_fmadd_ps(L::load(row, k + 24), _mm256_loadu_ps(x + k + 24), a3);
  }
  for (; k + 8 <= n; k += 8) a0 = _mm256_fmadd_ps(L::load(row, k), _mm256_loadu_ps(x + k), a0);
  float s = hsum(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
  for (; k < n; ++k) s += L::scalar(row, k) * x[k];
  return s;
}

template <class L>
void seq_rows(const char* w, size_t w_stride, const float* x, int64_t n_tokens, int64_t n_in, int64_t o_begin,
              int64_t o_end, float* out, int64_t ldo) {
  if (n_tokens == 1) {
    for (int64_t o = o_begin; o < o_end; ++o) out[o] = row_dot1<L>(w + o * w_stride, x, n_in);
    return;
  }
  for (int64_t t0 = 0; t0 < n_tokens; t0 += kTileT) {
    const int nt = static_cast<int>(std::min<int64_t>(kTileT, n_tokens - t0));
    for (int64_t o = o_begin; o < o_end; ++o) {
      kTiles<L>[0][nt - 1](w + o * w_stride, w_stride, x + t0 * n_in, n_in, n_in, out + t0 * ldo + o, ldo);
    }
  }
}

void dequant_row(DType t, const char* row, float* y, int64_t n) {
  switch (t) {
    case DType::kF16: {
      int64_t k = 0;
      for (; k + 8 <= n; k += 8) _mm256_storeu_ps(y + k, LoadF16::load(row, k));
      for (; k < n; ++k) y[k] = LoadF16::scalar(row, k);
      return;
    }
    case DType::kBF16: {
      int64_t k = 0;
      for (; k + 8 <= n; k += 8) _mm256_storeu_ps(y + k, LoadBF16::load(row, k));
      for (; k < n; ++k) y[k] = LoadBF16::scalar(row, k);
      return;
    }
    case DType::kQ8_0: {
      const auto* b = reinterpret_cast<const BlockQ8_0*>(row);
      for (int64_t i = 0; i < n / kQK8_0; ++i) {
        const __m256 d = _mm256_set1_ps(_cvtsh_ss(b[i].d));
        for (int j = 0; j < 4; ++j) {
          const __m128i q = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(b[i].qs + 8 * j));
          _mm256_storeu_ps(y + 32 * i + 8 * j, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q))));
        }
      }
      return;
    }
    default:
      dequantize_row(t, row, y, n);
      return;
  }
}

constexpr int64_t kPanelRows = 32;
constexpr int64_t kPanelMinTokens = kTileT + 1;
constexpr int64_t kQuantGemmMinTokens = 8;

void panel_rows(const RowsTask& a) {
  const int64_t ld = ((a.n_in + 7) / 8) * 8 + 16;
  thread_local std::vector<float> panel;
  if (panel.size() < static_cast<size_t>(kPanelRows * ld)) panel.resize(kPanelRows * ld);
  for (int64_t p0 = a.o_begin; p0 < a.o_end; p0 += kPanelRows) {
    const int64_t p1 = std::min(a.o_end, p0 + kPanelRows);
    for (int64_t o = p0; o < p1; ++o) dequant_row(a.wtype, a.w + o * a.w_stride, panel.data() + (o - p0) * ld, a.n_in);
    direct_rows<LoadF32>(reinterpret_cast<const char*>(panel.data()), ld * sizeof(float), a.x, a.n_tokens, a.n_in, 0,
                         p1 - p0, a.out + p0, a.out_stride);
  }
}

// Decode of the block types without an integer kernel (q6_k): one row at a
// time dequantized into an L1 buffer, then the f32 row kernel per token.
// NOTE: the panel path dequantized 32 rows (n_in = 2048: 256 KB) for each
// lone token.
void block_rows(const RowsTask& a) {
  thread_local std::vector<float> row;
  if (row.size() < static_cast<size_t>(a.n_in)) row.resize(static_cast<size_t>(a.n_in));
  const char* r = reinterpret_cast<const char*>(row.data());
  for (int64_t o = a.o_begin; o < a.o_end; ++o) {
    dequant_row(a.wtype, a.w + o * a.w_stride, row.data(), a.n_in);
    for (int64_t t = 0; t < a.n_tokens; ++t)
      a.out[t * a.out_stride + o] = row_dot1<LoadF32>(r, a.x + t * a.n_in, a.n_in);
  }
}

// x quantized per 32-block like ggml's q8_0, per token (avx2_blocks.h's
// XqLayout): int8 q[n_in] | float d[nb] | int32 corr[nb*8] (corr = -8 *
// sum of each 4 consecutive q: q4_0's nibble offset) | int32 s16[nb*2] |
// float xs16[nb*2] (the sums of each block's q 0-15 and 16-31, and those
// times d: the block-packed kernels' offsets and mins).
avx2::XqLayout xq_layout(int64_t n_in) {
  const size_t nb = static_cast<size_t>(n_in / 32), d = static_cast<size_t>(n_in), corr = d + nb * 4;
  const size_t s16 = corr + nb * 32, xs16 = s16 + nb * 8;
  return {xs16 + nb * 8, d, s16, xs16};
}
size_t xq_bytes(int64_t n_tokens, int64_t n_in) { return xq_layout(n_in).token_bytes * n_tokens + 64; }

void quantize_x(const float* x, void* xq, int64_t /*n_tokens*/, int64_t n_in, int64_t t_begin, int64_t t_end) {
  const int64_t nb = n_in / 32;
  const avx2::XqLayout xl = xq_layout(n_in);
  const __m256 sign = _mm256_set1_ps(-0.0f);
  for (int64_t t = t_begin; t < t_end; ++t) {
    char* base = static_cast<char*>(xq) + t * xl.token_bytes;
    int8_t* q = reinterpret_cast<int8_t*>(base);
    float* d = reinterpret_cast<float*>(base + xl.d_offset);
    int32_t* corr = reinterpret_cast<int32_t*>(base + xl.d_offset + nb * 4);
    int32_t* s16 = reinterpret_cast<int32_t*>(base + xl.s16_offset);
    float* xs16 = reinterpret_cast<float*>(base + xl.xs16_offset);
    const float* xt = x + t * n_in;
    for (int64_t b = 0; b < nb; ++b) {
      __m256 v[4];
      __m256 m = _mm256_setzero_ps();
      for (int j = 0; j < 4; ++j) {
        v[j] = _mm256_loadu_ps(xt + b * 32 + 8 * j);
        m = _mm256_max_ps(m, _mm256_andnot_ps(sign, v[j]));
      }
      __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
      m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
      m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
      const float db = _mm_cvtss_f32(m4) / 127.0f;
      const __m256 id = _mm256_set1_ps(db != 0.0f ? 1.0f / db : 0.0f);
      d[b] = db;
      int32_t half[2] = {0, 0};
      for (int j = 0; j < 4; ++j) {
        alignas(32) int32_t qi[8];
        _mm256_store_si256(reinterpret_cast<__m256i*>(qi), _mm256_cvtps_epi32(_mm256_mul_ps(v[j], id)));
        int32_t sum = 0;
        for (int l = 0; l < 8; ++l) {
          qi[l] = std::clamp(qi[l], -127, 127);
          q[b * 32 + 8 * j + l] = static_cast<int8_t>(qi[l]);
          sum += qi[l];
        }
        half[j / 2] += sum;
        corr[b * 8 + 2 * j] = -8 * (qi[0] + qi[1] + qi[2] + qi[3]);
        corr[b * 8 + 2 * j + 1] = -8 * (qi[4] + qi[5] + qi[6] + qi[7]);
      }
      s16[2 * b] = half[0], s16[2 * b + 1] = half[1];
      xs16[2 * b] = db * static_cast<float>(half[0]), xs16[2 * b + 1] = db * static_cast<float>(half[1]);
    }
  }
}

bool wants_xq(DType t, int64_t n_tokens, bool packed) {
  // Packed block types run block_pack_avx2.cpp at any batch size; packed
  // q8_0 / q4_0 (an AVX-512 layout) run packed_rows_portable on f32 x.
  if (packed) return block_packable(t);
  return (t == DType::kQ8_0 || t == DType::kQ4_0 || avx2::has_block_dot(t)) && n_tokens < kQuantGemmMinTokens;
}

// int32 lanes of sum over pairs of u8*s8 products (4 bytes per lane).
inline __m256i dot_u8s8(__m256i u, __m256i s) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}

float dot_q8_0(const BlockQ8_0* w, const int8_t* q, const float* d, int64_t nb) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  int64_t b = 0;
  for (; b + 2 <= nb; b += 2) {
    for (int j = 0; j < 2; ++j) {
      const __m256i wv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[b + j].qs));
      const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + (b + j) * 32));
      const __m256i dot = dot_u8s8(_mm256_sign_epi8(wv, wv), _mm256_sign_epi8(xv, wv));
      const __m256 s = _mm256_set1_ps(_cvtsh_ss(w[b + j].d) * d[b + j]);
      if (j == 0) {
        acc0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), s, acc0);
      } else {
        acc1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), s, acc1);
      }
    }
  }
  for (; b < nb; ++b) {
    const __m256i wv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[b].qs));
    const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + b * 32));
    const __m256i dot = dot_u8s8(_mm256_sign_epi8(wv, wv), _mm256_sign_epi8(xv, wv));
    acc0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), _mm256_set1_ps(_cvtsh_ss(w[b].d) * d[b]), acc0);
  }
  return hsum(_mm256_add_ps(acc0, acc1));
}

float dot_q4_0(const BlockQ4_0* w, const int8_t* q, const float* d, const int32_t* corr, int64_t nb) {
  __m256 acc = _mm256_setzero_ps();
  const __m256i low4 = _mm256_set1_epi8(0x0f);
  for (int64_t b = 0; b < nb; ++b) {
    const __m128i qq = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w[b].qs));
    const __m256i both = _mm256_inserti128_si256(_mm256_castsi128_si256(qq), _mm_srli_epi16(qq, 4), 1);
    const __m256i wv = _mm256_and_si256(both, low4);
    const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + b * 32));
    const __m256i dot =
        _mm256_add_epi32(dot_u8s8(wv, xv), _mm256_loadu_si256(reinterpret_cast<const __m256i*>(corr + b * 8)));
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), _mm256_set1_ps(_cvtsh_ss(w[b].d) * d[b]), acc);
  }
  return hsum(acc);
}

void quant_rows(const RowsTask& a) {
  const int64_t nb = a.n_in / 32;
  const size_t tb = xq_layout(a.n_in).token_bytes;
  const size_t row_bytes = dtype_row_bytes(a.wtype, a.n_in);
  for (int64_t o = a.o_begin; o < a.o_end; ++o) {
    const char* row = a.w + o * a.w_stride;
    // The rows kPrefetchAhead bytes on (see isa_table.h). NOTE: on the Ice
    // Lake host with this level forced, the kernel lab's decode/q8_0 read
    // 13.8-15.4 GB/s without, 19.5-20.7 with; q4_0 11.0-12.5 -> 14.5-16.3.
    for (size_t b = 0; b < row_bytes; b += 64) _mm_prefetch(row + kPrefetchAhead + b, _MM_HINT_T0);
    for (int64_t t = 0; t < a.n_tokens; ++t) {
      const char* base = static_cast<const char*>(a.xq) + t * tb;
      const int8_t* q = reinterpret_cast<const int8_t*>(base);
      const float* d = reinterpret_cast<const float*>(base + a.n_in);
      float r;
      if (a.wtype == DType::kQ8_0) {
        r = dot_q8_0(reinterpret_cast<const BlockQ8_0*>(row), q, d, nb);
      } else if (a.wtype == DType::kQ4_0) {
        r = dot_q4_0(reinterpret_cast<const BlockQ4_0*>(row), q, d,
                     reinterpret_cast<const int32_t*>(base + a.n_in + nb * 4), nb);
      } else {
        r = avx2::block_row_dot(a.wtype, row, q, d, a.n_in);
      }
      a.out[t * a.out_stride + o] = r;
    }
  }
}

void rows(const RowsTask& a) {
  if (a.packed) {
    if (block_packable(a.wtype)) {
      avx2::block_packed_rows(a, xq_layout(a.n_in));
    } else {
      packed_rows_portable(a);
    }
    return;
  }
  if (wants_xq(a.wtype, a.n_tokens, false)) {
    quant_rows(a);
    return;
  }
  if (a.n_tokens < kPanelMinTokens) {
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
      default:
        block_rows(a);
        return;
    }
  }
  panel_rows(a);
}

void f32_to_f16(const float* s, uint16_t* d, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(s + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  for (; i < n; ++i) d[i] = fp32_to_fp16(s[i]);
}
void f16_to_f32(const uint16_t* s, float* d, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(d + i, LoadF16::load(reinterpret_cast<const char*>(s), i));
  for (; i < n; ++i) d[i] = fp16_to_fp32(s[i]);
}
void f32_to_bf16(const float* s, uint16_t* d, int64_t n) {
  int64_t i = 0;
  const __m256i bias = _mm256_set1_epi32(0x7fff), one = _mm256_set1_epi32(1);
  const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff), inf = _mm256_set1_epi32(0x7f800000);
  for (; i + 8 <= n; i += 8) {
    const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i));
    const __m256i rounded = _mm256_srli_epi32(
        _mm256_add_epi32(_mm256_add_epi32(x, bias), _mm256_and_si256(_mm256_srli_epi32(x, 16), one)), 16);
    const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(x, abs_mask), inf);
    const __m256i quiet = _mm256_or_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(0x40));
    const __m256i r = _mm256_blendv_epi8(rounded, quiet, nan);
    // 32 -> 16 bits: values fit in 16 unsigned bits, packus keeps them.
    const __m256i packed = _mm256_packus_epi32(r, r);
    const __m256i ordered = _mm256_permute4x64_epi64(packed, 0x08);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i), _mm256_castsi256_si128(ordered));
  }
  for (; i < n; ++i) d[i] = fp32_to_bf16(s[i]);
}
void bf16_to_f32(const uint16_t* s, float* d, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(d + i, LoadBF16::load(reinterpret_cast<const char*>(s), i));
  for (; i < n; ++i) d[i] = bf16_to_fp32(s[i]);
}

// e^x, about 2 ulp on [-87, 88] (Cephes expf polynomial, see isa_avx512.cpp);
// clamped there, so far-negative inputs give ~1e-38 instead of 0.
inline __m256 exp_ps(__m256 x) {
  x = _mm256_max_ps(_mm256_min_ps(x, _mm256_set1_ps(88.3f)), _mm256_set1_ps(-87.3f));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

void rmsnorm_row(float* out, const float* x, const float* w, int64_t n, float eps) {
  __m256 ss = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    ss = _mm256_fmadd_ps(v, v, ss);
  }
  float sum = hsum(ss);
  for (int64_t j = i; j < n; ++j) sum += x[j] * x[j];
  const float scale = 1.0f / std::sqrt(sum / static_cast<float>(n) + eps);
  const __m256 s = _mm256_set1_ps(scale);
  for (i = 0; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), s), _mm256_loadu_ps(w + i)));
  }
  for (; i < n; ++i) out[i] = x[i] * scale * w[i];
}

// Tails go through an 8-float buffer so that the vector exp serves them too.
float exp_shifted(float* x, int64_t n, float scale) {
  float mx = -INFINITY;
  for (int64_t i = 0; i < n; ++i) mx = std::max(mx, x[i]);
  const __m256 m = _mm256_set1_ps(mx), s = _mm256_set1_ps(scale);
  __m256 sum = _mm256_setzero_ps();
  float tail_sum = 0.0f;
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 e = exp_ps(_mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), m), s));
    _mm256_storeu_ps(x + i, e);
    sum = _mm256_add_ps(sum, e);
  }
  if (i < n) {
    alignas(32) float buf[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int64_t j = i; j < n; ++j) buf[j - i] = (x[j] - mx) * scale;
    _mm256_store_ps(buf, exp_ps(_mm256_load_ps(buf)));
    for (int64_t j = i; j < n; ++j) {
      x[j] = buf[j - i];
      tail_sum += buf[j - i];
    }
  }
  return hsum(sum) + tail_sum;
}

void softmax(float* x, int64_t n) {
  const float inv = 1.0f / exp_shifted(x, n, 1.0f);
  const __m256 iv = _mm256_set1_ps(inv);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), iv));
  for (; i < n; ++i) x[i] *= inv;
}

void swiglu(float* out, const float* gate, const float* up, int64_t n) {
  const __m256 one = _mm256_set1_ps(1.0f);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 g = _mm256_loadu_ps(gate + i);
    const __m256 silu = _mm256_div_ps(g, _mm256_add_ps(one, exp_ps(_mm256_sub_ps(_mm256_setzero_ps(), g))));
    _mm256_storeu_ps(out + i, _mm256_mul_ps(silu, _mm256_loadu_ps(up + i)));
  }
  if (i < n) {
    alignas(32) float g[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int64_t j = i; j < n; ++j) g[j - i] = gate[j];
    alignas(32) float e[8];
    _mm256_store_ps(e, exp_ps(_mm256_sub_ps(_mm256_setzero_ps(), _mm256_load_ps(g))));
    for (int64_t j = i; j < n; ++j) out[j] = g[j - i] / (1.0f + e[j - i]) * up[j];
  }
}

float dot(const float* a, const float* b, int64_t n) {
  __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
    s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), s1);
  }
  for (; i + 8 <= n; i += 8) s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
  float s = hsum(_mm256_add_ps(s0, s1));
  for (; i < n; ++i) s += a[i] * b[i];
  return s;
}

void axpy(float* y, float a, const float* x, int64_t n) {
  const __m256 av = _mm256_set1_ps(a);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(y + i, _mm256_fmadd_ps(av, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
  }
  for (; i < n; ++i) y[i] += a * x[i];
}

float read_sum(const float* p, int64_t n, int streams) {
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  int64_t i = 0;
  if (streams == 2) {
    const int64_t h = n / 32 * 16;  // each half, a multiple of 16 floats
    const float* q = p + h;
    for (; i < h; i += 16) {
      a0 = _mm256_add_ps(a0, _mm256_loadu_ps(p + i));
      a1 = _mm256_add_ps(a1, _mm256_loadu_ps(p + i + 8));
      a2 = _mm256_add_ps(a2, _mm256_loadu_ps(q + i));
      a3 = _mm256_add_ps(a3, _mm256_loadu_ps(q + i + 8));
    }
    i = 2 * h;
  } else {
    for (; i + 32 <= n; i += 32) {
      a0 = _mm256_add_ps(a0, _mm256_loadu_ps(p + i));
      a1 = _mm256_add_ps(a1, _mm256_loadu_ps(p + i + 8));
      a2 = _mm256_add_ps(a2, _mm256_loadu_ps(p + i + 16));
      a3 = _mm256_add_ps(a3, _mm256_loadu_ps(p + i + 24));
    }
  }
  float s = hsum(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
  for (; i < n; ++i) s += p[i];
  return s;
}

double fma_burn(int64_t iters, float* sink) {
  constexpr int kAcc = 10;
  __m256 acc[kAcc];
  for (int j = 0; j < kAcc; ++j) acc[j] = _mm256_set1_ps(1.0f + j * 1e-3f);
  const __m256 m = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-7f);
  for (int64_t i = 0; i < iters; ++i) {
#pragma GCC unroll 10
    for (int j = 0; j < kAcc; ++j) acc[j] = _mm256_fmadd_ps(acc[j], m, c);
  }
  __m256 s = acc[0];
  for (int j = 1; j < kAcc; ++j) s = _mm256_add_ps(s, acc[j]);
  *sink = hsum(s);
  return 2.0 * 8 * kAcc * static_cast<double>(iters);
}

const IsaKernels kTable = {Isa::kAvx2, wants_xq,    xq_bytes,    quantize_x,  rows,     f32_to_f16,
                           f16_to_f32, f32_to_bf16, bf16_to_f32, rmsnorm_row, softmax,  exp_shifted,
                           swiglu,     dot,         axpy,        read_sum,    fma_burn, nullptr,
                           nullptr,    nullptr,     nullptr,     nullptr};

}  // namespace

const IsaKernels& avx2_kernels() { return kTable; }

}  // namespace parallm::cpu
