// Preconditions of the kernel launchers, checked on the host before any item
// runs. The CUDA launchers (*.cu) and the emulated ones (emulated/*.cpp) call
// the same checks, so both accept and reject the same calls. Bad data (a table
// type the kernels do not read) is an InputError naming it; a caller's broken
// shape is a PARALLM_CHECK.
#pragma once
#include <cstdint>
#include <string>

#include "core/dtype.h"
#include "kernels/cuda/math/embedding.h"
#include "util/check.h"

namespace parallm::cuda {

// Row-wise kernels launch one block per row: a grid's x dimension is at most
// 2^31 - 1 blocks.
constexpr int64_t kMaxGridRows = INT32_MAX;

inline void check_embedding_args(DType table_dtype, int64_t n_tokens, int64_t n_embd, int64_t n_vocab) {
  if (!embedding_dtype_supported(table_dtype)) {
    throw InputError(std::string("CUDA embedding rows: a ") + dtype_name(table_dtype) +
                     " table is not supported (f32, f16, bf16, q8_0)");
  }
  if (table_dtype == DType::kQ8_0 && n_embd % kQK8_0 != 0) {
    throw InputError("CUDA embedding rows: a q8_0 table needs n_embd a multiple of 32, got " + std::to_string(n_embd));
  }
  PARALLM_CHECK(n_tokens >= 0 && n_tokens <= kMaxGridRows && n_embd > 0 && n_vocab > 0);
}

inline void check_rmsnorm_args(int64_t n_tokens, int64_t n_embd, float eps) {
  PARALLM_CHECK(n_tokens >= 0 && n_tokens <= kMaxGridRows && n_embd > 0 && eps >= 0.0f);
}

inline void check_rope_args(int64_t n_tokens, int64_t n_head, int64_t head_dim) {
  PARALLM_CHECK_MSG(head_dim > 0 && head_dim % 2 == 0, "rope: head_dim must be even, got " + std::to_string(head_dim));
  PARALLM_CHECK(n_tokens >= 0 && n_head >= 0);
}

inline void check_argmax_args(int64_t n_rows, int64_t n_vocab) {
  // NOTE: indices are int32 (token ids), so is the vocabulary.
  PARALLM_CHECK(n_rows >= 0 && n_rows <= kMaxGridRows && n_vocab > 0 && n_vocab <= INT32_MAX);
}

}  // namespace parallm::cuda
