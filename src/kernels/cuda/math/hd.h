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

}  // namespace parallm::cuda
