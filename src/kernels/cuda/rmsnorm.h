// RMSNorm with the fused residual add on a CUDA device (per-lane math:
// math/rmsnorm.h). One block of kRowThreads threads per token.
#pragma once
#include <cstdint>

#include "device/stream_handle.h"

namespace parallm::cuda {

// out, x, delta: [n_tokens, n_embd]; w: [n_embd].
// x += delta (skipped when delta is null), then out = x / sqrt(mean(x^2) + eps) * w.
// x is the residual stream, updated in place; out may alias x.
void rmsnorm(float* out, float* x, const float* delta, const float* w, int64_t n_tokens, int64_t n_embd, float eps,
             StreamHandle stream);

}  // namespace parallm::cuda
