// Matrix multiplication against weight matrices of any dtype: y = x W^T.
// n_tokens = 1 is decode (mat-vec, memory-bound); larger batches run a
// register-blocked GEMM over f32 panels converted once per panel.
// One ThreadPool::run (one barrier) per call; matmul_multi shares it across
// several matrices that read the same input (fused QKV, gate+up).
//
// Accuracy against "dequantize W to f32, multiply in f64" (tests/kernels):
//   f32/f16/bf16 weights: f32 accumulation, relative error ~1e-6 * sqrt(n_in).
//   q8_0/q4_0 weights, n_tokens below kGemmMinTokens on AVX2/AVX-512, and
//   packed matrices of every block type on AVX-512 (packed.h): x is
//   quantized to 8 bits per 32-block (like ggml's q8_0) for integer dot
//   products; the result differs from the f32 reference by up to about
//   0.5% of sum_i |W[o,i] x[i]| (documented in docs/kernels.md).
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/dtype.h"
#include "util/thread_pool.h"

namespace parallm::cpu {

// out: [n_tokens, n_out]; x: [n_tokens, n_in];
// W: n_out rows of n_in elements of wtype, row o at (const char*)w + o*w_row_stride_bytes,
// w_row_stride_bytes >= dtype_row_bytes(wtype, n_in) (a column slice of a wider matrix is fine).
// out must not alias x.
void matmul(float* out, const void* w, DType wtype, size_t w_row_stride_bytes, const float* x, int64_t n_tokens,
            int64_t n_in, int64_t n_out, ThreadPool& pool);

struct MatmulTarget {
  float* out;  // [n_tokens, n_out]
  const void* w;
  DType wtype;
  size_t w_row_stride_bytes;  // packed: bytes of one 16-row group
  int64_t n_out;
  bool packed = false;  // w in the layout of packed.h (pack_rows)
};

// Several matrices sharing the input x: [n_tokens, n_in], in one parallel region.
void matmul_multi(const MatmulTarget* targets, int n_targets, const float* x, int64_t n_tokens, int64_t n_in,
                  ThreadPool& pool);

}  // namespace parallm::cpu
