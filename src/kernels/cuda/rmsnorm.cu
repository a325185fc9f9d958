// RMSNorm with the fused residual add: one block of kRowThreads threads per
// token; each thread adds and squares its lane's elements, the block sums the
// lanes in shared memory in math/rmsnorm.h's tree order, each thread scales
// its own elements (so out may alias x).
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/launch_checks.h"
#include "kernels/cuda/math/rmsnorm.h"
#include "kernels/cuda/rmsnorm.h"

namespace parallm::cuda {

namespace {

__global__ void __launch_bounds__(kRowThreads)
    rmsnorm_kernel(float* out, float* x, const float* delta, const float* w, int64_t n_embd, float eps) {
  __shared__ float partial[kRowThreads];
  const int64_t row = static_cast<int64_t>(blockIdx.x) * n_embd;
  const int lane = static_cast<int>(threadIdx.x);
  partial[lane] = rms_residual_lane(x + row, delta != nullptr ? delta + row : nullptr, n_embd, lane, kRowThreads);
  __syncthreads();
  for (int s = kRowThreads / 2; s > 0; s /= 2) {
    if (lane < s) partial[lane] += partial[lane + s];
    __syncthreads();
  }
  rms_apply_lane(out + row, x + row, w, rms_scale(partial[0], n_embd, eps), n_embd, lane, kRowThreads);
}

}  // namespace

void rmsnorm(float* out, float* x, const float* delta, const float* w, int64_t n_tokens, int64_t n_embd, float eps,
             StreamHandle stream) {
  check_rmsnorm_args(n_tokens, n_embd, eps);
  if (n_tokens == 0) return;
  rmsnorm_kernel<<<static_cast<unsigned>(n_tokens), kRowThreads, 0, stream>>>(out, x, delta, w, n_embd, eps);
  check_launch("rmsnorm_kernel");
}

}  // namespace parallm::cuda
