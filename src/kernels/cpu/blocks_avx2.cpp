// AVX2 integer mat-vec kernels of the block types beyond q8_0 / q4_0 (see
// avx2_blocks.h). Weights are unpacked to bytes in registers: unsigned quants
// (0..31) meet the signed x quants in VPMADDUBSW, and the offsets of the
// affine types (q4_1's m, the K-quants' mins, q5_0's and q3_k's centre) come
// from the sums of the x quants of the same block, so no weight is ever made
// signed. The non-linear iq4 levels are looked up with VPSHUFB and multiplied
// by sign-transfer like q8_0. Every product pair fits VPMADDUBSW's int16
// (at most 2 * 127 * 127).
#include <immintrin.h>

#include <cstring>

#include "kernels/cpu/avx2_blocks.h"

namespace parallm::cpu::avx2 {

namespace {

inline float hsum(__m256 v) {
  const __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 t = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(t, _mm_movehdup_ps(t)));
}

inline float half(uint16_t h) { return _cvtsh_ss(h); }

// int16 lanes: sums of adjacent u8 * s8 products.
inline __m256i pairs(__m256i u, __m256i s) { return _mm256_maddubs_epi16(u, s); }
// int32 lanes: sums of 4 consecutive u8 * s8 products.
inline __m256i quads(__m256i u, __m256i s) { return _mm256_madd_epi16(pairs(u, s), _mm256_set1_epi16(1)); }

inline __m256i load32(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

// 16 bytes of nibbles as 32 bytes: the low nibbles (elements 0-15) in the low
// lane, the high ones (16-31) in the high lane: the order of x's 32-block.
inline __m256i nibbles(const uint8_t* qs) {
  const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m256i both = _mm256_inserti128_si256(_mm256_castsi128_si256(q), _mm_srli_epi16(q, 4), 1);
  return _mm256_and_si256(both, _mm256_set1_epi8(0x0f));
}

// Byte j = 0x10 where bit j of the little-endian 32 bits at p is set.
inline __m256i bit4_bytes(const uint8_t* p) {
  uint32_t bits;
  std::memcpy(&bits, p, 4);
  const __m256i spread = _mm256_shuffle_epi8(
      _mm256_set1_epi32(static_cast<int>(bits)),
      _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
  const __m256i mask = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ull));
  return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(spread, mask), mask), _mm256_set1_epi8(0x10));
}

// The IQ4_NL levels at the nibbles' places (signed bytes).
inline __m256i iq4_levels(__m256i nib) {
  const __m128i t = _mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4nlValues));
  return _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(t), nib);
}

// int32 lanes of sum w*x for signed w (sign moved onto x, like q8_0).
inline __m256i signed_quads(__m256i w, __m256i x) { return quads(_mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w)); }

// A function, not a constant: a namespace-scope __m256i would run AVX2 code
// at start-up on every CPU.
inline __m256i ones8() { return _mm256_set1_epi8(1); }

float dot_q4_1(const BlockQ4_1* w, const int8_t* q, const float* d, int64_t nb) {
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const __m256i x = load32(q + 32 * b);
    const __m256 dot = _mm256_cvtepi32_ps(quads(nibbles(w[b].qs), x));
    const __m256 sum = _mm256_cvtepi32_ps(quads(ones8(), x));
    acc = _mm256_fmadd_ps(dot, _mm256_set1_ps(half(w[b].d) * d[b]), acc);
    acc = _mm256_fmadd_ps(sum, _mm256_set1_ps(half(w[b].m) * d[b]), acc);
  }
  return hsum(acc);
}

float dot_q5_1(const BlockQ5_1* w, const int8_t* q, const float* d, int64_t nb) {
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const __m256i x = load32(q + 32 * b);
    const __m256i u = _mm256_or_si256(nibbles(w[b].qs), bit4_bytes(w[b].qh));
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(quads(u, x)), _mm256_set1_ps(half(w[b].d) * d[b]), acc);
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(quads(ones8(), x)), _mm256_set1_ps(half(w[b].m) * d[b]), acc);
  }
  return hsum(acc);
}

// (u - 16) * x = u * x - 16 * x, summed in int32.
float dot_q5_0(const BlockQ5_0* w, const int8_t* q, const float* d, int64_t nb) {
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const __m256i x = load32(q + 32 * b);
    const __m256i u = _mm256_or_si256(nibbles(w[b].qs), bit4_bytes(w[b].qh));
    const __m256i dot = _mm256_sub_epi32(quads(u, x), _mm256_slli_epi32(quads(ones8(), x), 4));
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), _mm256_set1_ps(half(w[b].d) * d[b]), acc);
  }
  return hsum(acc);
}

float dot_iq4_nl(const BlockIQ4_NL* w, const int8_t* q, const float* d, int64_t nb) {
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const __m256i dot = signed_quads(iq4_levels(nibbles(w[b].qs)), load32(q + 32 * b));
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), _mm256_set1_ps(half(w[b].d) * d[b]), acc);
  }
  return hsum(acc);
}

// The 2-bit fields of elements 32g..32g+31 of a Q2_K / Q3_K super-block
// (bits 2*(g%4) of qs[32*(g/4) + l]).
inline __m256i two_bits(const uint8_t* qs, int g) {
  const __m256i v = load32(qs + 32 * (g / 4));
  return _mm256_and_si256(_mm256_srli_epi16(v, 2 * (g % 4)), _mm256_set1_epi8(3));
}

// int16 lanes holding a in the low 128-bit lane, b in the high one: the
// scales of the two 16-weight sub-blocks of a 32-block of x.
inline __m256i two_scales(int a, int b) {
  return _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_set1_epi16(static_cast<int16_t>(a))),
                                 _mm_set1_epi16(static_cast<int16_t>(b)), 1);
}

// w = d * sc * u - dmin * m per 16 weights: d * sum(sc u x) - dmin * sum(m x).
float dot_q2_k(const BlockQ2_K* w, const int8_t* q, const float* d, int64_t nb) {
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b, q += kQK_K, d += 8) {
    const float dw = half(w[b].d), mw = half(w[b].dmin);
    const uint8_t* s = w[b].scales;
    for (int g = 0; g < 8; ++g) {
      const __m256i x = load32(q + 32 * g);
      const __m256i sc = two_scales(s[2 * g] & 0xf, s[2 * g + 1] & 0xf);
      const __m256i mn = two_scales(s[2 * g] >> 4, s[2 * g + 1] >> 4);
      const __m256i dot = _mm256_madd_epi16(pairs(two_bits(w[b].qs, g), x), sc);
      const __m256i sum = _mm256_madd_epi16(pairs(ones8(), x), mn);
      acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), _mm256_set1_ps(dw * d[g]), acc);
      acc = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(sum), _mm256_set1_ps(mw * d[g]), acc);
    }
  }
  return hsum(acc);
}

// w = d * (s - 32) * (u - 4), u = low 2 bits + 4 * the hmask bit.
float dot_q3_k(const BlockQ3_K* w, const int8_t* q, const float* d, int64_t nb) {
  __m256 acc = _mm256_setzero_ps();
  const __m256i hm_bit = _mm256_set1_epi8(4);
  for (int64_t b = 0; b < nb; ++b, q += kQK_K, d += 8) {
    const float dw = half(w[b].d);
    const __m256i hmask = load32(w[b].hmask);
    for (int g = 0; g < 8; ++g) {
      const __m256i x = load32(q + 32 * g);
      const __m256i bit = _mm256_set1_epi8(static_cast<char>(1 << g));
      const __m256i hi = _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(hmask, bit), bit), hm_bit);
      const __m256i u = _mm256_or_si256(two_bits(w[b].qs, g), hi);
      // Pairs of (u - 4) * x in int16: |.| <= 2 * 4 * 127.
      const __m256i centred = _mm256_sub_epi16(pairs(u, x), _mm256_slli_epi16(pairs(ones8(), x), 2));
      const __m256i sc = two_scales(q3_k_scale(w[b].scales, 2 * g) - 32, q3_k_scale(w[b].scales, 2 * g + 1) - 32);
      acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_madd_epi16(centred, sc)), _mm256_set1_ps(dw * d[g]), acc);
    }
  }
  return hsum(acc);
}

// Q4_K and Q5_K: w = d * sc * u - dmin * m per 32 weights.
template <bool kFive, class Block>
float dot_q45_k(const Block* w, const int8_t* q, const float* d, int64_t nb) {
  __m256 acc = _mm256_setzero_ps();
  const __m256i low4 = _mm256_set1_epi8(0x0f);
  for (int64_t b = 0; b < nb; ++b, q += kQK_K, d += 8) {
    const float dw = half(w[b].d), mw = half(w[b].dmin);
    __m256i qh = _mm256_setzero_si256();
    if constexpr (kFive) qh = load32(w[b].qh);
    for (int j = 0; j < 8; ++j) {
      const __m256i x = load32(q + 32 * j);
      __m256i u = _mm256_and_si256(_mm256_srli_epi16(load32(w[b].qs + 32 * (j / 2)), 4 * (j % 2)), low4);
      if constexpr (kFive) {
        const __m256i bit = _mm256_set1_epi8(static_cast<char>(1 << j));
        u = _mm256_or_si256(
            u, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(qh, bit), bit), _mm256_set1_epi8(0x10)));
      }
      int sc, m;
      q4_k_scale_min(w[b].scales, j, &sc, &m);
      acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(quads(u, x)), _mm256_set1_ps(dw * sc * d[j]), acc);
      acc = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(quads(ones8(), x)), _mm256_set1_ps(mw * m * d[j]), acc);
    }
  }
  return hsum(acc);
}

float dot_iq4_xs(const BlockIQ4_XS* w, const int8_t* q, const float* d, int64_t nb) {
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b, q += kQK_K, d += 8) {
    const float dw = half(w[b].d);
    for (int j = 0; j < 8; ++j) {
      const __m256i dot = signed_quads(iq4_levels(nibbles(w[b].qs + 16 * j)), load32(q + 32 * j));
      const float s = dw * static_cast<float>(iq4_xs_scale(w[b], j) - 32);
      acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), _mm256_set1_ps(s * d[j]), acc);
    }
  }
  return hsum(acc);
}

template <class B>
const B* blocks(const char* row) {
  return reinterpret_cast<const B*>(row);
}

}  // namespace

bool has_block_dot(DType t) {
  switch (t) {
    case DType::kQ4_1:
    case DType::kQ5_0:
    case DType::kQ5_1:
    case DType::kIQ4_NL:
    case DType::kQ2_K:
    case DType::kQ3_K:
    case DType::kQ4_K:
    case DType::kQ5_K:
    case DType::kIQ4_XS:
      return true;
    default:
      return false;
  }
}

float block_row_dot(DType t, const char* row, const int8_t* q, const float* d, int64_t n_in) {
  const int64_t nb = n_in / dtype_block_elems(t);
  switch (t) {
    case DType::kQ4_1:
      return dot_q4_1(blocks<BlockQ4_1>(row), q, d, nb);
    case DType::kQ5_0:
      return dot_q5_0(blocks<BlockQ5_0>(row), q, d, nb);
    case DType::kQ5_1:
      return dot_q5_1(blocks<BlockQ5_1>(row), q, d, nb);
    case DType::kIQ4_NL:
      return dot_iq4_nl(blocks<BlockIQ4_NL>(row), q, d, nb);
    case DType::kQ2_K:
      return dot_q2_k(blocks<BlockQ2_K>(row), q, d, nb);
    case DType::kQ3_K:
      return dot_q3_k(blocks<BlockQ3_K>(row), q, d, nb);
    case DType::kQ4_K:
      return dot_q45_k<false>(blocks<BlockQ4_K>(row), q, d, nb);
    case DType::kQ5_K:
      return dot_q45_k<true>(blocks<BlockQ5_K>(row), q, d, nb);
    case DType::kIQ4_XS:
      return dot_iq4_xs(blocks<BlockIQ4_XS>(row), q, d, nb);
    default:
      return 0.0f;
  }
}

}  // namespace parallm::cpu::avx2
