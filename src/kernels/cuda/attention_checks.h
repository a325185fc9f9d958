// Preconditions of kv_write and paged_attention (kv_cache.h, attention.h),
// checked on the host before any item runs; the CUDA launchers and the
// emulated ones call the same checks (as launch_checks.h's). A cache dtype
// the kernels do not read is an InputError naming it; a caller's broken
// shape is a PARALLM_CHECK.
#pragma once
#include <cstdint>
#include <string>

#include "core/dtype.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/kv_cache.h"
#include "kernels/cuda/math/attention.h"
#include "kernels/cuda/math/kv_cache.h"
#include "util/check.h"

namespace parallm::cuda {

// The cache's type and geometry, for `op` ("kv_write", "paged_attention").
inline void check_kv_cache(const char* op, const PagedKv& kv) {
  if (!kv_dtype_ok(kv.dtype)) {
    throw InputError(std::string("CUDA ") + op + ": a " + dtype_name(kv.dtype) +
                     " KV cache is not supported (f32, f16, bf16, q8_0)");
  }
  if (kv.dtype == DType::kQ8_0 && kv.head_dim % kQK8_0 != 0) {
    throw InputError(std::string("CUDA ") + op + ": a q8_0 KV cache needs head_dim a multiple of 32, got " +
                     std::to_string(kv.head_dim));
  }
  PARALLM_CHECK(kv.k != nullptr && kv.v != nullptr && kv.block_size > 0 && kv.n_kv_head > 0 && kv.head_dim > 0);
}

inline void check_kv_write_args(const PagedKv& kv, const float* k, const float* v, int64_t n_tokens) {
  check_kv_cache("kv_write", kv);
  PARALLM_CHECK(n_tokens >= 0);
  // One pool for keys and values (MLA's latent) takes one set of rows.
  PARALLM_CHECK(kv.v != kv.k || v == k);
}

inline void check_paged_attention_args(const PagedKv& kv, int64_t max_blocks_per_seq, int64_t n_tokens, int64_t n_head,
                                       AttendLimits limits) {
  check_kv_cache("paged_attention", kv);
  PARALLM_CHECK_MSG(kv.head_dim % 2 == 0 && kv.head_dim <= kAttnMaxHeadDim,
                    "CUDA paged_attention: head_dim must be even and at most " + std::to_string(kAttnMaxHeadDim) +
                        ", got " + std::to_string(kv.head_dim));
  PARALLM_CHECK_MSG(n_head > 0 && n_head % kv.n_kv_head == 0, "CUDA paged_attention: n_head " + std::to_string(n_head) +
                                                                  " is not a multiple of n_kv_head " +
                                                                  std::to_string(kv.n_kv_head));
  // One block per (token, head): a grid's x dimension is at most 2^31 - 1.
  PARALLM_CHECK(n_tokens >= 0 && n_tokens * n_head <= INT32_MAX && max_blocks_per_seq > 0);
  PARALLM_CHECK(limits.window >= 0 && limits.softcap >= 0.0f);
  // The kernels load keys 4 bytes at a time (f32 values 8): each chunk starts
  // so aligned when the pools do and, for q8_0, block_size * head_dim / 32 is
  // even (a chunk is 34 bytes per 32 values of each row).
  const auto aligned = [&](const void* p) { return reinterpret_cast<uintptr_t>(p) % 8 == 0; };
  PARALLM_CHECK_MSG(aligned(kv.k) && aligned(kv.v), "CUDA paged_attention: KV pools must be 8-byte aligned");
  PARALLM_CHECK_MSG(kv.dtype != DType::kQ8_0 || kv.block_size * (kv.head_dim / kQK8_0) % 2 == 0,
                    "CUDA paged_attention: a q8_0 cache needs block_size * head_dim / 32 even, got block_size " +
                        std::to_string(kv.block_size));
}

}  // namespace parallm::cuda
