// PARALLM_HD marks the per-item math that both the CUDA kernels (nvcc) and the
// CPU build (g++: the emulated device and the tests) compile: one definition of
// each op's arithmetic, so the emulated device computes what a GPU computes and
// the CPU tests check the very code the GPU runs.
// Also the bit-level f16 / bf16 decoders such math needs (no cuda_fp16.h: the
// same integer code on both sides, bit-exact with core/dtype.h's).
#pragma once
#include <math.h>

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define PARALLM_HD __host__ __device__
#else
#define PARALLM_HD
#endif

namespace parallm::cuda {

// Threads per row of the row-wise kernels (RMSNorm, argmax) and lanes of their
// emulation: lane j takes elements j, j + kRowThreads, ... and the lanes'
// results meet in a fixed tree, so both sides add in the same order.
constexpr int kRowThreads = 256;

PARALLM_HD inline float float_from_bits(uint32_t bits) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(bits);
#else
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
#endif
}

// IEEE half -> f32, exact (subnormals included).
PARALLM_HD inline float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  int exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0x1f) return float_from_bits(sign | 0x7f800000u | (mant << 13));
  if (exp == 0) {
    if (mant == 0) return float_from_bits(sign);
    // Subnormal: shift the mantissa up to its leading one.
    exp = 1;
    while ((mant & 0x400u) == 0) {
      mant <<= 1;
      --exp;
    }
    mant &= 0x3ffu;
  }
  return float_from_bits(sign | (static_cast<uint32_t>(exp + 112) << 23) | (mant << 13));
}

PARALLM_HD inline float bf16_to_f32(uint16_t b) { return float_from_bits(static_cast<uint32_t>(b) << 16); }

// The rounding direction, bit-exact with core/dtype.h's converters: the KV
// cache's stores, the GEMM path's activations and the dequantize-to-f16.
PARALLM_HD inline uint32_t bits_of_float(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
#endif
}

// f32 -> IEEE half bits, round to nearest even; NaN becomes the quiet NaN
// sign | 0x7e00, overflow infinity: bit for bit core/dtype.cpp's fp32_to_fp16.
PARALLM_HD inline uint16_t f32_to_f16_bits(float f) {
  const uint32_t x = bits_of_float(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t absx = x & 0x7fffffffu;
  if (absx > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);
  if (absx >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);
  if (absx < 0x38800000u) {  // a subnormal half or zero
    if (absx < 0x33000000u) return static_cast<uint16_t>(sign);
    const uint32_t mant = (absx & 0x7fffffu) | 0x800000u;
    const int shift = 113 - static_cast<int>(absx >> 23) + 13;
    uint32_t half = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1);
    const uint32_t mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1u))) ++half;
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t half = (absx >> 13) - (112u << 10);
  const uint32_t rem = absx & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (half & 1u))) ++half;
  return static_cast<uint16_t>(sign | half);
}

// f32 -> bfloat16 bits, round to nearest even, NaN kept quiet (core/dtype.h's
// fp32_to_bf16).
PARALLM_HD inline uint16_t f32_to_bf16_bits(float f) {
  uint32_t bits = bits_of_float(f);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

// a * b rounded on its own: nvcc would otherwise fuse a product with an add
// that follows it (in another inlined function), which the host does not; the
// emulation and the GPU then round alike.
PARALLM_HD inline float mul_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}

}  // namespace parallm::cuda
