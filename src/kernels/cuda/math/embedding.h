// Per-element math of embedding rows: element i of a table row, widened to
// f32. Tables: f32, f16, bf16, q8_0 (core/dtype.h's layouts, as GGUF stores
// them); w = d * q for q8_0, the same product as cpu::dequantize_row.
#pragma once
#include "core/dtype.h"
#include "kernels/cuda/math/hd.h"

namespace parallm::cuda {

PARALLM_HD inline bool embedding_dtype_supported(DType t) {
  return t == DType::kF32 || t == DType::kF16 || t == DType::kBF16 || t == DType::kQ8_0;
}

// row: one table row of `t`; i < the row's element count.
PARALLM_HD inline float row_element(DType t, const void* row, int64_t i) {
  switch (t) {
    case DType::kF32:
      return static_cast<const float*>(row)[i];
    case DType::kF16:
      return f16_to_f32(static_cast<const uint16_t*>(row)[i]);
    case DType::kBF16:
      return bf16_to_f32(static_cast<const uint16_t*>(row)[i]);
    case DType::kQ8_0: {
      const BlockQ8_0& b = static_cast<const BlockQ8_0*>(row)[i / kQK8_0];
      return f16_to_f32(b.d) * static_cast<float>(b.qs[i % kQK8_0]);
    }
    default:
      return NAN;  // the launchers reject other types before any item runs
  }
}

// Bytes of a table row of n_embd elements (n_embd a multiple of 32 for q8_0).
PARALLM_HD inline int64_t embedding_row_bytes(DType t, int64_t n_embd) {
  switch (t) {
    case DType::kF32:
      return n_embd * 4;
    case DType::kF16:
    case DType::kBF16:
      return n_embd * 2;
    case DType::kQ8_0:
      return n_embd / kQK8_0 * static_cast<int64_t>(sizeof(BlockQ8_0));
    default:
      return 0;
  }
}

// Element i of token `token`'s row, NaN for an id outside [0, n_vocab): a
// kernel cannot throw, and callers check ids on the host first (the batch's
// tokens come from there), so a NaN row only shows a caller's bug.
PARALLM_HD inline float embedding_element(DType t, const void* table, int32_t token, int64_t n_embd, int64_t n_vocab,
                                          int64_t i) {
  if (token < 0 || token >= n_vocab) return NAN;
  const auto* row = static_cast<const unsigned char*>(table) + token * embedding_row_bytes(t, n_embd);
  return row_element(t, row, i);
}

}  // namespace parallm::cuda
