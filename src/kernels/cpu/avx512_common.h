// Internal: helpers shared by the *_avx512.cpp files (all compiled with the
// same AVX-512 flags, so these inline definitions never leak into code that
// runs on a lesser CPU). Include only from *_avx512.cpp.
#pragma once
#include <immintrin.h>

#include <cstdint>

#include "kernels/cpu/isa_table.h"

namespace parallm::cpu::avx512 {

// 16 consecutive weights of a row starting at element k, as f32.
struct LoadF32 {
  static constexpr int64_t kBytes = 4;  // per element
  static __m512 load(const char* row, int64_t k) { return _mm512_loadu_ps(reinterpret_cast<const float*>(row) + k); }
  static __m512 load_mask(const char* row, int64_t k, __mmask16 m) {
    return _mm512_maskz_loadu_ps(m, reinterpret_cast<const float*>(row) + k);
  }
};
struct LoadF16 {
  static constexpr int64_t kBytes = 2;
  static __m512 load(const char* row, int64_t k) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 2 * k)));
  }
  static __m512 load_mask(const char* row, int64_t k, __mmask16 m) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, row + 2 * k));
  }
};
struct LoadBF16 {
  static constexpr int64_t kBytes = 2;
  static __m512 widen(__m256i h) { return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)); }
  static __m512 load(const char* row, int64_t k) {
    return widen(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 2 * k)));
  }
  static __m512 load_mask(const char* row, int64_t k, __mmask16 m) {
    return widen(_mm256_maskz_loadu_epi16(m, row + 2 * k));
  }
};

// 32 values quantized like ggml's q8_0: d = amax/127, q = x/d rounded to
// nearest even, in int8 (lo: values 0-15, hi: 16-31).
struct Block8 {
  __m128i lo, hi;
  float d;
};
inline Block8 quantize_block(const float* x) {
  const __m512 v0 = _mm512_loadu_ps(x), v1 = _mm512_loadu_ps(x + 16);
  const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
  const float d = amax / 127.0f;
  const __m512 id = _mm512_set1_ps(d != 0.0f ? 1.0f / d : 0.0f);
  return {_mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(v0, id))),
          _mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(v1, id))), d};
}

// dst[k*ldd + i] = lane k of r[i]: 16 rows in registers stored transposed
// (r is overwritten).
inline void transpose16_regs(__m512 r[16], float* dst, int64_t ldd) {
  __m512 t[16];
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  // r[4i+j], 128-bit lane L: column 4L+j of rows 4i..4i+3
  for (int i = 0; i < 4; ++i) {
    r[4 * i + 0] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
    r[4 * i + 1] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0xEE);
    r[4 * i + 2] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
    r[4 * i + 3] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
  }
  for (int j = 0; j < 4; ++j) {
    const __m512 a = _mm512_shuffle_f32x4(r[j], r[4 + j], 0x88);
    const __m512 b = _mm512_shuffle_f32x4(r[j], r[4 + j], 0xDD);
    const __m512 c = _mm512_shuffle_f32x4(r[8 + j], r[12 + j], 0x88);
    const __m512 d = _mm512_shuffle_f32x4(r[8 + j], r[12 + j], 0xDD);
    _mm512_storeu_ps(dst + j * ldd, _mm512_shuffle_f32x4(a, c, 0x88));
    _mm512_storeu_ps(dst + (j + 8) * ldd, _mm512_shuffle_f32x4(a, c, 0xDD));
    _mm512_storeu_ps(dst + (j + 4) * ldd, _mm512_shuffle_f32x4(b, d, 0x88));
    _mm512_storeu_ps(dst + (j + 12) * ldd, _mm512_shuffle_f32x4(b, d, 0xDD));
  }
}

// dst[k*ldd + i] = src[i*lds + k] for a 16 x 16 block.
inline void transpose16(const float* src, int64_t lds, float* dst, int64_t ldd) {
  __m512 r[16];
  for (int i = 0; i < 16; ++i) r[i] = _mm512_loadu_ps(src + i * lds);
  transpose16_regs(r, dst, ldd);
}

// out[t*ldo + r] = c[r*ldc + t] for r < n_rows, t < n_tokens: a GEMM panel's
// [row][token] results into the [token][row] output, 16 x 16 at a time.
inline void store_transposed(const float* c, int64_t ldc, int64_t n_rows, int64_t n_tokens, float* out, int64_t ldo) {
  int64_t r0 = 0;
  for (; r0 + 16 <= n_rows; r0 += 16) {
    int64_t t0 = 0;
    for (; t0 + 16 <= n_tokens; t0 += 16) transpose16(c + r0 * ldc + t0, ldc, out + t0 * ldo + r0, ldo);
    for (int64_t t = t0; t < n_tokens; ++t) {
      for (int64_t r = r0; r < r0 + 16; ++r) out[t * ldo + r] = c[r * ldc + t];
    }
  }
  for (int64_t t = 0; t < n_tokens; ++t) {
    for (int64_t r = r0; r < n_rows; ++r) out[t * ldo + r] = c[r * ldc + t];
  }
}

// One weight row of any dtype to f32: y [n] (gemm_avx512.cpp).
void dequant_row(DType t, const char* row, float* y, int64_t n);

// Paged attention for one task (attention_avx512.cpp).
void attend(const AttendTask& task);

// GEMM over f32 panels for any weight dtype (gemm_avx512.cpp).
void gemm_rows(const RowsTask& task);
// x^T for gemm_rows (IsaKernels::xt_floats / pack_xt).
size_t gemm_xt_floats(int64_t n_tokens, int64_t n_in);
void gemm_pack_xt(const float* x, float* xt, int64_t n_tokens, int64_t n_in, int64_t t_begin, int64_t t_end);
// Integer (VNNI) GEMM for q8_0 and q4_0 weights (gemm_q8_avx512.cpp).
void gemm_q8_rows(const RowsTask& task);

// x quantized per 32-block like ggml's q8_0 (quantize_x in isa_avx512.cpp,
// which documents the layout), one token's view.
struct XqView {
  const int8_t* q8;     // [n_in] natural order
  const int8_t* q4;     // [n_in] regrouped for the GGUF q4_0 kernel
  const float* d;       // [nb] block scales
  const int32_t* corr;  // [nb*4] q4_0 nibble corrections
  const int32_t* c4;    // [nb] -8 * (sum of the block's 32 q)
  const int32_t* c8;    // [nb] -128 * (sum of the block's 32 q)
  const int32_t* s16;   // [nb*2] sums of each block's q 0-15 and 16-31
  const float* xs16;    // [nb*2] the same sums times the block's d
};
inline size_t xq_token_bytes(int64_t n_in) {
  const int64_t nb = n_in / 32;
  return static_cast<size_t>(2 * n_in + nb * 4 + nb * 16 + nb * 8 + nb * 16);
}
inline XqView xq_view(const void* xq, int64_t t, int64_t n_in) {
  const char* base = static_cast<const char*>(xq) + t * xq_token_bytes(n_in);
  const int64_t nb = n_in / 32;
  return {reinterpret_cast<const int8_t*>(base),
          reinterpret_cast<const int8_t*>(base + n_in),
          reinterpret_cast<const float*>(base + 2 * n_in),
          reinterpret_cast<const int32_t*>(base + 2 * n_in + nb * 4),
          reinterpret_cast<const int32_t*>(base + 2 * n_in + nb * 20),
          reinterpret_cast<const int32_t*>(base + 2 * n_in + nb * 24),
          reinterpret_cast<const int32_t*>(base + 2 * n_in + nb * 28),
          reinterpret_cast<const float*>(base + 2 * n_in + nb * 36)};
}

// Batches (n_tokens >= 2) also get x in token tiles, for the packed kernels:
// tile i holds tokens kXTile*i.. (the last one partly filled), and for each
// block b one record of kXTileRecord bytes:
//   q[kXTile][32] int8, d[kXTile] f32, c4[kXTile] int32, c8[kXTile] int32,
//   s16[kXTile][2] int32, xs16[kXTile][2] f32 (the view's fields of the same names)
// so a kernel walks one pointer per block and reaches every field of every
// token at a constant offset (with a view per token, the tile's pointers
// did not fit in the general registers and spilled every block).
constexpr int64_t kXTile = 8;
constexpr size_t kXTileRecord = kXTile * (32 + 12 + 16);
inline size_t xq_tiles_offset(int64_t n_tokens, int64_t n_in) {
  return (static_cast<size_t>(n_tokens) * xq_token_bytes(n_in) + 63) / 64 * 64;
}
inline size_t xq_tile_bytes(int64_t n_in) { return static_cast<size_t>(n_in / 32) * kXTileRecord; }

// Packed q8_0 / q4_0 matrices (packed.h) for any batch, x in task.xq
// (packed_avx512.cpp); the other block types' (block_pack.h) go on to
// block_packed_rows (block_pack_avx512.cpp).
void packed_rows(const RowsTask& task);
void block_packed_rows(const RowsTask& task);

}  // namespace parallm::cpu::avx512
