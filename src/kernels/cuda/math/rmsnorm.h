// Per-lane math of RMSNorm with the fused residual add:
//   x += delta (when delta is given); out = x / sqrt(mean(x^2) + eps) * w
// over rows of n_embd. A row is split over kRowThreads lanes (hd.h): each lane
// adds its elements' delta and sums their squares, the lanes' sums meet in
// rms_tree_sum's order, then each lane scales its elements.
#pragma once
#include "kernels/cuda/math/hd.h"

namespace parallm::cuda {

// Lane `lane` of `lanes`: x[i] += delta[i] (delta may be null) for its
// elements i = lane, lane + lanes, ..., and their sum of squares.
PARALLM_HD inline float rms_residual_lane(float* x, const float* delta, int64_t n_embd, int lane, int lanes) {
  float sum = 0.0f;
  for (int64_t i = lane; i < n_embd; i += lanes) {
    const float v = delta != nullptr ? x[i] + delta[i] : x[i];
    if (delta != nullptr) x[i] = v;
    sum += v * v;
  }
  return sum;
}

// Halving tree over partial[0..lanes) (lanes a power of two), the order of
// the CUDA kernel's shared-memory reduction: step s adds partial[j + s] into
// partial[j] for j < s. Returns partial[0].
PARALLM_HD inline float rms_tree_sum(float* partial, int lanes) {
  for (int s = lanes / 2; s > 0; s /= 2) {
    for (int j = 0; j < s; ++j) partial[j] += partial[j + s];
  }
  return partial[0];
}

PARALLM_HD inline float rms_scale(float sum_squares, int64_t n_embd, float eps) {
  return 1.0f / sqrtf(sum_squares / static_cast<float>(n_embd) + eps);
}

// out[i] = x[i] * scale * w[i] for the lane's elements (out may alias x: each
// lane reads and writes only its own).
PARALLM_HD inline void rms_apply_lane(float* out, const float* x, const float* w, float scale, int64_t n_embd, int lane,
                                      int lanes) {
  for (int64_t i = lane; i < n_embd; i += lanes) out[i] = x[i] * scale * w[i];
}

}  // namespace parallm::cuda
