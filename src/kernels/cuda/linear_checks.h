// Preconditions of the linear, dequantization and MoE launchers, shared by the
// CUDA launchers (linear.cu, moe.cu) and the emulated ones, as
// launch_checks.h: a weight type the kernels cannot read is an InputError
// naming it (it comes from a model file); a broken shape is a PARALLM_CHECK.
#pragma once
#include <cstdint>
#include <string>

#include "core/dtype.h"
#include "kernels/cuda/linear.h"
#include "kernels/cuda/math/linear.h"
#include "kernels/cuda/math/moe.h"
#include "util/check.h"

namespace parallm::cuda {

inline void check_linear_args(DType w_dtype, int64_t n_tokens, int64_t n_out, int64_t n_in) {
  if (!linear_math_dtype(w_dtype)) {
    throw InputError(std::string("CUDA linear: ") + dtype_name(w_dtype) +
                     " weights are not supported (f32, f16, bf16, q8_0; other types are converted to f16 at upload "
                     "with dequantize_rows_f16)");
  }
  if (w_dtype == DType::kQ8_0 && n_in % kQK8_0 != 0) {
    throw InputError("CUDA linear: q8_0 weights need n_in a multiple of 32, got " + std::to_string(n_in));
  }
  // cuBLAS takes int dimensions.
  PARALLM_CHECK(n_tokens >= 0 && n_tokens <= INT32_MAX && n_out >= 0 && n_out <= INT32_MAX && n_in > 0 &&
                n_in <= INT32_MAX);
}

inline void check_dequantize_args(DType src_dtype, int64_t n_rows, int64_t n_cols) {
  if (!dequant_f16_dtype_supported(src_dtype)) {
    throw InputError(std::string("CUDA dequantize to f16: ") + dtype_name(src_dtype) +
                     " is not supported (f32, f16, bf16, q8_0, q4_0, q4_k, q6_k)");
  }
  const int64_t block = dtype_block_elems(src_dtype);
  if (n_cols % block != 0) {
    throw InputError(std::string("CUDA dequantize to f16: ") + dtype_name(src_dtype) + " rows need a multiple of " +
                     std::to_string(block) + " values, got " + std::to_string(n_cols));
  }
  PARALLM_CHECK(n_rows >= 0 && n_cols > 0);
}

inline void check_moe_topk_args(int64_t n_tokens, int64_t n_expert, int64_t k) {
  PARALLM_CHECK_MSG(n_expert > 0 && n_expert <= kMoeMaxExperts && k >= 1 && k <= n_expert,
                    "moe_topk: need 1 <= k <= n_expert <= 256, got k " + std::to_string(k) + ", n_expert " +
                        std::to_string(n_expert));
  PARALLM_CHECK(n_tokens >= 0);
}

inline void check_rows_args(int64_t n_rows, int64_t n_embd) { PARALLM_CHECK(n_rows >= 0 && n_embd > 0); }

}  // namespace parallm::cuda
