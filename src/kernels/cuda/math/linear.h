// Per-lane math of the linear layers (kernels/cuda/linear.h) and the per-element
// dequantization to f16 used at weight upload.
//
// Mat-vec: an output row o is one warp of kLinearLanes lanes. The row's
// elements are cut into chunks (linear_chunk_elems: 16 bytes of f32 / f16 /
// bf16 weights, one 32-weight q8_0 block); lane j takes chunks j, j + 32, ...
// and, for every token of the batch, accumulates w * x with fmaf in element
// order. The lanes' sums then meet in linear_tree_sum's halving order (the
// kernel's __shfl_down_sync steps). fmaf is explicit so that g++ (which does
// not contract a * b + c under -std=c++20) and nvcc (which does) compute the
// same roundings: the emulated device equals the GPU bit for bit here.
// Each weight is decoded once per chunk and used for all the batch's tokens,
// so the weight row is read once per call.
//
// Weights are widened exactly as cpu::dequantize_row does (q8_0: d * q in
// f32); x is used in f32. NOTE: the CPU's AVX2 / AVX-512 decode kernels round
// x through 8-bit blocks (ggml's q8_0) to use integer dot products; that is a
// CPU speed device, not the layer's definition (the scalar kernels and
// batches of 8+ tokens use f32 x). A GPU mat-vec is bound by the weights'
// bandwidth, so it keeps x in f32, the more accurate product.
//
// Dequantization: dequant_f16_element gives element i of a row of any of f32,
// f16, bf16, q8_0, q4_0, q4_k, q6_k as the f16 bits of
// fp32_to_fp16(cpu::dequantize_row(...)[i]): the same f32 operations in the
// same order (mul_rn / dq_sub_rn keep nvcc from fusing q4_k's d*sc*q - dmin*m),
// then f32_to_f16_bits, core/dtype.cpp's round-to-nearest-even.
#pragma once
#include "core/dtype.h"
#include "kernels/cuda/linear.h"
#include "kernels/cuda/math/embedding.h"
#include "kernels/cuda/math/hd.h"

// Full unrolling of fixed-trip loops on the device (acc[] and the chunk's
// weights stay in registers); nothing for g++, which knows no such pragma.
#ifndef PARALLM_UNROLL
#if defined(__CUDA_ARCH__)
#define PARALLM_UNROLL _Pragma("unroll")
#else
#define PARALLM_UNROLL
#endif
#endif

namespace parallm::cuda {

// Lanes per output row (one warp) and rows per block of the mat-vec kernel.
constexpr int kLinearLanes = 32;
constexpr int kLinearRowsPerBlock = 8;

PARALLM_HD inline bool linear_math_dtype(DType t) {
  return t == DType::kF32 || t == DType::kF16 || t == DType::kBF16 || t == DType::kQ8_0;
}

// Elements per lane chunk: 16 bytes of weights for the float types (one
// vector load on the device when aligned), one block for q8_0.
PARALLM_HD inline int linear_chunk_elems(DType t) {
  switch (t) {
    case DType::kF32:
      return 4;
    case DType::kF16:
    case DType::kBF16:
      return 8;
    default:
      return kQK8_0;
  }
}

PARALLM_HD inline float dq_sub_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fsub_rn(a, b);
#else
  return a - b;
#endif
}

// acc[tk] += w * x[tk * n_in + i] for the batch's n_tok tokens (n_tok <=
// kMatVecMaxTokens; a fixed bound so that the device keeps acc in registers).
PARALLM_HD inline void linear_accumulate(float* acc, float w, const float* x, int64_t n_in, int64_t i, int n_tok) {
  PARALLM_UNROLL
  for (int tk = 0; tk < static_cast<int>(kMatVecMaxTokens); ++tk) {
    if (tk < n_tok) acc[tk] = fmaf(w, x[tk * n_in + i], acc[tk]);
  }
}

// Eight 16-bit weights from p (count <= 8 of them valid); one 16-byte load on
// the device when p is aligned (same values either way).
PARALLM_HD inline void load_u16x8(uint16_t* out, const uint16_t* p, int count) {
#if defined(__CUDA_ARCH__)
  if (count == 8 && (reinterpret_cast<uintptr_t>(p) & 15) == 0) {
    const uint4 v = __ldg(reinterpret_cast<const uint4*>(p));
    const uint32_t words[4] = {v.x, v.y, v.z, v.w};
    PARALLM_UNROLL
    for (int j = 0; j < 4; ++j) {
      out[2 * j] = static_cast<uint16_t>(words[j] & 0xffffu);
      out[2 * j + 1] = static_cast<uint16_t>(words[j] >> 16);
    }
    return;
  }
#endif
  PARALLM_UNROLL
  for (int j = 0; j < 8; ++j) {
    if (j < count) out[j] = p[j];
  }
}

// Lane `lane` of `lanes` of one output row: acc[tk] (n_tok of them, set here)
// = the sum over the lane's chunks of w[i] * x[tk, i], in element order.
// w_row: one weight row of n_in elements of t (f32 / f16 / bf16 / q8_0;
// n_in a multiple of 32 for q8_0); x: [n_tok, n_in].
PARALLM_HD inline void linear_lane_dots(float* acc, DType t, const void* w_row, const float* x, int64_t n_in, int n_tok,
                                        int lane, int lanes) {
  PARALLM_UNROLL
  for (int tk = 0; tk < static_cast<int>(kMatVecMaxTokens); ++tk) acc[tk] = 0.0f;
  const int64_t g = linear_chunk_elems(t);
  const int64_t n_chunks = (n_in + g - 1) / g;
  switch (t) {
    case DType::kF32: {
      const auto* w = static_cast<const float*>(w_row);
      for (int64_t c = lane; c < n_chunks; c += lanes) {
        const int64_t i0 = c * g;
        const int count = static_cast<int>(n_in - i0 < g ? n_in - i0 : g);
        for (int j = 0; j < count; ++j) linear_accumulate(acc, w[i0 + j], x, n_in, i0 + j, n_tok);
      }
      return;
    }
    case DType::kF16:
    case DType::kBF16: {
      const bool half = t == DType::kF16;
      const auto* w = static_cast<const uint16_t*>(w_row);
      for (int64_t c = lane; c < n_chunks; c += lanes) {
        const int64_t i0 = c * g;
        const int count = static_cast<int>(n_in - i0 < g ? n_in - i0 : g);
        uint16_t bits[8];
        load_u16x8(bits, w + i0, count);
        // Fixed trip count: the device keeps bits[] in registers.
        PARALLM_UNROLL
        for (int j = 0; j < 8; ++j) {
          if (j >= count) break;
          const float wj = half ? f16_to_f32(bits[j]) : bf16_to_f32(bits[j]);
          linear_accumulate(acc, wj, x, n_in, i0 + j, n_tok);
        }
      }
      return;
    }
    case DType::kQ8_0: {
      const auto* blocks = static_cast<const BlockQ8_0*>(w_row);
      for (int64_t c = lane; c < n_chunks; c += lanes) {
        const BlockQ8_0& b = blocks[c];
        const float d = f16_to_f32(b.d);
        const int64_t i0 = c * kQK8_0;
        for (int j = 0; j < kQK8_0; ++j) {
          linear_accumulate(acc, mul_rn(d, static_cast<float>(b.qs[j])), x, n_in, i0 + j, n_tok);
        }
      }
      return;
    }
    default:
      // The launchers reject other types before any lane runs.
      PARALLM_UNROLL
      for (int tk = 0; tk < static_cast<int>(kMatVecMaxTokens); ++tk) acc[tk] = NAN;
      return;
  }
}

// Halving tree over partial[0..lanes) (lanes a power of two): step s adds
// partial[j + s] into partial[j] for j < s, the order of the kernel's
// __shfl_down_sync(v, s) steps. Returns partial[0].
PARALLM_HD inline float linear_tree_sum(float* partial, int lanes) {
  for (int s = lanes / 2; s > 0; s /= 2) {
    for (int j = 0; j < s; ++j) partial[j] += partial[j + s];
  }
  return partial[0];
}

// ---------------------------------------------------------------- dequantization

PARALLM_HD inline bool dequant_f16_dtype_supported(DType t) {
  return t == DType::kF32 || t == DType::kF16 || t == DType::kBF16 || t == DType::kQ8_0 || t == DType::kQ4_0 ||
         t == DType::kQ4_K || t == DType::kQ6_K;
}

// The 6-bit scale and min of sub-block j (0..7) of a Q4_K block: core/dtype.h's
// q4_k_scale_min (host-only there).
PARALLM_HD inline void q4_k_scale_min_hd(const uint8_t* scales, int j, int* sc, int* m) {
  if (j < 4) {
    *sc = scales[j] & 63;
    *m = scales[j + 4] & 63;
  } else {
    *sc = (scales[j + 4] & 0xf) | ((scales[j - 4] >> 6) << 4);
    *m = (scales[j + 4] >> 4) | ((scales[j] >> 6) << 4);
  }
}

// Element i of a row (row: its first block) of t as f32, the value and the
// operations of cpu::dequantize_row (kernels/cpu/quant.cpp).
PARALLM_HD inline float dequant_element(DType t, const void* row, int64_t i) {
  switch (t) {
    case DType::kF32:
    case DType::kF16:
    case DType::kBF16:
      return row_element(t, row, i);
    case DType::kQ8_0: {
      const BlockQ8_0& b = static_cast<const BlockQ8_0*>(row)[i / kQK8_0];
      return mul_rn(f16_to_f32(b.d), static_cast<float>(b.qs[i % kQK8_0]));
    }
    case DType::kQ4_0: {
      const BlockQ4_0& b = static_cast<const BlockQ4_0*>(row)[i / kQK4_0];
      const int j = static_cast<int>(i % kQK4_0);
      const int nibble = j < kQK4_0 / 2 ? (b.qs[j] & 0xf) : (b.qs[j - kQK4_0 / 2] >> 4);
      return mul_rn(f16_to_f32(b.d), static_cast<float>(nibble - 8));
    }
    case DType::kQ4_K: {
      // 8 sub-blocks of 32: sub-block j in the low (j even) or high nibbles
      // of qs[(j / 2) * 32 + l].
      const BlockQ4_K& b = static_cast<const BlockQ4_K*>(row)[i / kQK_K];
      const int p = static_cast<int>(i % kQK_K), j = p / 32, l = p % 32;
      int sc, m;
      q4_k_scale_min_hd(b.scales, j, &sc, &m);
      const float ds = mul_rn(f16_to_f32(b.d), static_cast<float>(sc));
      const float dm = mul_rn(f16_to_f32(b.dmin), static_cast<float>(m));
      const int q = (b.qs[(j / 2) * 32 + l] >> ((j % 2) * 4)) & 0xf;
      return dq_sub_rn(mul_rn(ds, static_cast<float>(q)), dm);
    }
    case DType::kQ6_K: {
      // Two halves of 128; in half h, element 32 * k + l (k 0..3, l < 32) has
      // its low 4 bits in nibble k / 2 of ql[64h + l + 32 (k % 2)], its high 2
      // at bits 2k of qh[32h + l], and scale scales[8h + l / 16 + 2k].
      const BlockQ6_K& b = static_cast<const BlockQ6_K*>(row)[i / kQK_K];
      const int p = static_cast<int>(i % kQK_K), h = p / 128, k = (p % 128) / 32, l = p % 32;
      const uint8_t ql = b.ql[h * 64 + l + 32 * (k % 2)];
      const int lo = (k / 2 == 0) ? (ql & 0xf) : (ql >> 4);
      const int hi = (b.qh[h * 32 + l] >> (2 * k)) & 3;
      const int q = (lo | (hi << 4)) - 32;
      const int sc = b.scales[h * 8 + l / 16 + 2 * k];
      return mul_rn(mul_rn(f16_to_f32(b.d), static_cast<float>(sc)), static_cast<float>(q));
    }
    default:
      return NAN;  // the launchers reject other types first
  }
}

PARALLM_HD inline uint16_t dequant_f16_element(DType t, const void* row, int64_t i) {
  return f32_to_f16_bits(dequant_element(t, row, i));
}

}  // namespace parallm::cuda
