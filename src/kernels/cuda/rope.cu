// RoPE: the cos / sin table with one thread per (token, pair), the rotation
// with one thread per (token, head, pair) (per-item math: math/rope.h).
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/launch_checks.h"
#include "kernels/cuda/math/rope.h"
#include "kernels/cuda/rope.h"

namespace parallm::cuda {

namespace {

__global__ void rope_table_kernel(float* cs, const int32_t* positions, int64_t n_items, int64_t head_dim,
                                  const float* inv_freq) {
  const int64_t half = head_dim / 2;
  for (int64_t item = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; item < n_items;
       item += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t t = item / half, i = item % half;
    rope_cos_sin(positions[t], inv_freq[i], &cs[t * head_dim + i], &cs[t * head_dim + half + i]);
  }
}

__global__ void rope_apply_kernel(float* x, const float* cs, int64_t n_items, int64_t n_head, int64_t head_dim,
                                  RopeStyle style) {
  const int64_t half = head_dim / 2;
  for (int64_t item = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; item < n_items;
       item += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t head = item / half, i = item % half;  // head: token * n_head + h
    rope_rotate_pair(x + head * head_dim, cs + head / n_head * head_dim, style, i, head_dim);
  }
}

}  // namespace

void rope_table(float* cs, const int32_t* positions, int64_t n_tokens, int64_t head_dim, const float* inv_freq,
                StreamHandle stream) {
  check_rope_args(n_tokens, 1, head_dim);
  const int64_t n_items = n_tokens * (head_dim / 2);
  if (n_items == 0) return;
  rope_table_kernel<<<blocks_for(n_items), kItemThreads, 0, stream>>>(cs, positions, n_items, head_dim, inv_freq);
  check_launch("rope_table_kernel");
}

void rope_apply(float* x, const float* cs, int64_t n_tokens, int64_t n_head, int64_t head_dim, RopeStyle style,
                StreamHandle stream) {
  check_rope_args(n_tokens, n_head, head_dim);
  const int64_t n_items = n_tokens * n_head * (head_dim / 2);
  if (n_items == 0) return;
  rope_apply_kernel<<<blocks_for(n_items), kItemThreads, 0, stream>>>(x, cs, n_items, n_head, head_dim, style);
  check_launch("rope_apply_kernel");
}

}  // namespace parallm::cuda
