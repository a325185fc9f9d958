// Emulated linear layers and dequantization to f16 (kernels/cuda/linear.h).
//   Mat-vec (n_tokens <= kMatVecMaxTokens, and q8_0 at any batch size in
//   token chunks of kMatVecMaxTokens): per output row the kernel's 32 lanes
//   in turn, each lane's fmaf sums (math/linear.h), then the same halving
//   tree, then the bias: bit-identical to the GPU's mat-vec.
//   GEMM (f32 / f16 / bf16, n_tokens > kMatVecMaxTokens): cuBLAS's semantics,
//   not its order: x rounded to the weight dtype (f16 / bf16; f32 as is),
//   products accumulated in f32 by fmaf in element order, then the bias.
//   cuBLAS blocks and splits k its own way, so the GPU agrees with this to
//   f32 rounding of an n_in-term sum (~1e-6 relative), not bit for bit.
#include "kernels/cuda/math/linear.h"

#include <algorithm>
#include <type_traits>
#include <vector>

#include "kernels/cuda/emulated/launchers.h"
#include "kernels/cuda/linear.h"
#include "kernels/cuda/linear_checks.h"

namespace parallm::cuda::emulated {

static_assert(std::is_same_v<decltype(&linear), decltype(&cuda::linear)>);
static_assert(std::is_same_v<decltype(&dequantize_rows_f16), decltype(&cuda::dequantize_rows_f16)>);

namespace {

// out [n_tok, n_out] (row stride n_out) for one token chunk x [n_tok, n_in].
void matvec_chunk(float* out, const unsigned char* w, int64_t row_bytes, DType t, const float* bias, const float* x,
                  int n_tok, int64_t n_out, int64_t n_in) {
  float partial[kMatVecMaxTokens][kLinearLanes];
  float acc[kMatVecMaxTokens];
  for (int64_t o = 0; o < n_out; ++o) {
    for (int lane = 0; lane < kLinearLanes; ++lane) {
      linear_lane_dots(acc, t, w + o * row_bytes, x, n_in, n_tok, lane, kLinearLanes);
      for (int tk = 0; tk < n_tok; ++tk) partial[tk][lane] = acc[tk];
    }
    for (int tk = 0; tk < n_tok; ++tk) {
      const float s = linear_tree_sum(partial[tk], kLinearLanes);
      out[tk * n_out + o] = bias != nullptr ? s + bias[o] : s;
    }
  }
}

// The GEMM's semantics for f32 / f16 / bf16 weights (see the file comment).
void gemm(float* out, const unsigned char* w, int64_t row_bytes, DType t, const float* bias, const float* x,
          int64_t n_tokens, int64_t n_out, int64_t n_in) {
  std::vector<float> xr(static_cast<size_t>(n_tokens * n_in)), wrow(static_cast<size_t>(n_in));
  for (size_t i = 0; i < xr.size(); ++i) {
    if (t == DType::kF16) {
      xr[i] = f16_to_f32(f32_to_f16_bits(x[i]));
    } else if (t == DType::kBF16) {
      xr[i] = bf16_to_f32(f32_to_bf16_bits(x[i]));
    } else {
      xr[i] = x[i];
    }
  }
  for (int64_t o = 0; o < n_out; ++o) {
    for (int64_t i = 0; i < n_in; ++i) wrow[i] = row_element(t, w + o * row_bytes, i);
    for (int64_t tk = 0; tk < n_tokens; ++tk) {
      const float* xt = xr.data() + tk * n_in;
      float s = 0.0f;
      for (int64_t i = 0; i < n_in; ++i) s = fmaf(wrow[i], xt[i], s);
      out[tk * n_out + o] = bias != nullptr ? s + bias[o] : s;
    }
  }
}

}  // namespace

void linear(float* out, const void* w, DType w_dtype, const float* bias, const float* x, int64_t n_tokens,
            int64_t n_out, int64_t n_in, StreamHandle /*stream*/) {
  check_linear_args(w_dtype, n_tokens, n_out, n_in);
  if (n_tokens == 0 || n_out == 0) return;
  const auto* wb = static_cast<const unsigned char*>(w);
  const int64_t row_bytes = embedding_row_bytes(w_dtype, n_in);
  if (n_tokens > kMatVecMaxTokens && w_dtype != DType::kQ8_0) {
    gemm(out, wb, row_bytes, w_dtype, bias, x, n_tokens, n_out, n_in);
    return;
  }
  for (int64_t t0 = 0; t0 < n_tokens; t0 += kMatVecMaxTokens) {
    const int n_tok = static_cast<int>(std::min(kMatVecMaxTokens, n_tokens - t0));
    matvec_chunk(out + t0 * n_out, wb, row_bytes, w_dtype, bias, x + t0 * n_in, n_tok, n_out, n_in);
  }
}

void dequantize_rows_f16(uint16_t* out, const void* src, DType src_dtype, int64_t n_rows, int64_t n_cols,
                         StreamHandle /*stream*/) {
  check_dequantize_args(src_dtype, n_rows, n_cols);
  const auto* s = static_cast<const unsigned char*>(src);
  const auto row_bytes = static_cast<int64_t>(dtype_row_bytes(src_dtype, n_cols));
  for (int64_t r = 0; r < n_rows; ++r) {
    for (int64_t i = 0; i < n_cols; ++i) out[r * n_cols + i] = dequant_f16_element(src_dtype, s + r * row_bytes, i);
  }
}

}  // namespace parallm::cuda::emulated
