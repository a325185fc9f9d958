// Linear layers on a CUDA device: out = x W^T (+ bias) with W in the
// model's weight dtype. Small batches (decode) run mat-vec kernels that
// read each weight row once for all of the batch's tokens; larger ones run
// a cuBLAS / cuBLASLt GEMM (f32 weights: SGEMM in full f32, no TF32; f16 /
// bf16: the activations converted to the weight dtype, f32 accumulation).
// Quantized types the mat-vec kernels do not read (q4_0, q4_k, q6_k) are
// dequantized to f16 at upload (dequantize_rows) and then run as f16.
// Per-row math: math/linear.h.
#pragma once
#include <cstdint>

#include "core/dtype.h"
#include "device/stream_handle.h"

namespace parallm::cuda {

// Batches of at most this many tokens take the mat-vec path.
constexpr int64_t kMatVecMaxTokens = 8;

// Whether linear() reads weights of dtype t directly (f32, f16, bf16, q8_0).
inline bool linear_dtype_supported(DType t) {
  return t == DType::kF32 || t == DType::kF16 || t == DType::kBF16 || t == DType::kQ8_0;
}

// out [n_tokens, n_out] = x [n_tokens, n_in] W^T (+ bias [n_out], null for
// none). W is [n_out, n_in] row-major in w_dtype, row o at
// w + o * dtype_row_bytes(w_dtype, n_in) (no packing). An unsupported
// w_dtype, or q8_0 with n_in not a multiple of 32, is an InputError.
// out must not alias x.
void linear(float* out, const void* w, DType w_dtype, const float* bias, const float* x, int64_t n_tokens,
            int64_t n_out, int64_t n_in, StreamHandle stream);

// out [n_rows, n_cols] in f16 (IEEE half bits, uint16_t) = the rows of src
// [n_rows, n_cols] in src_dtype (any dtype cpu::dequantize_row reads:
// f32, f16, bf16, q8_0, q4_0, q4_k, q6_k), dequantized then rounded to
// f16 nearest-even. Used once, at weight upload.
void dequantize_rows_f16(uint16_t* out, const void* src, DType src_dtype, int64_t n_rows, int64_t n_cols,
                         StreamHandle stream);

}  // namespace parallm::cuda
