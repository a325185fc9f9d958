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
  static __m512 load(const char* row, int64_t k) {
    return _mm512_loadu_ps(reinterpret_cast<const float*>(row) + k);
  }
  static __m512 load_mask(const char* row, int64_t k, __mmask16 m) {
    return _mm512_maskz_loadu_ps(m, reinterpret_cast<const float*>(row) + k);
  }
};
struct LoadF16 {
  static __m512 load(const char* row, int64_t k) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 2 * k)));
  }
  static __m512 load_mask(const char* row, int64_t k, __mmask16 m) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, row + 2 * k));
  }
};
struct LoadBF16 {
  static __m512 widen(__m256i h) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
  static __m512 load(const char* row, int64_t k) {
    return widen(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 2 * k)));
  }
  static __m512 load_mask(const char* row, int64_t k, __mmask16 m) {
    return widen(_mm256_maskz_loadu_epi16(m, row + 2 * k));
  }
};

// One weight row of any dtype to f32: y [n] (gemm_avx512.cpp).
void dequant_row(DType t, const char* row, float* y, int64_t n);

// GEMM over f32 panels for any weight dtype (gemm_avx512.cpp).
void gemm_rows(const RowsTask& task);

}  // namespace parallm::cpu::avx512
