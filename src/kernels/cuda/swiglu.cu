// SwiGLU: one thread per element, grid-stride (math/swiglu.h).
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/math/swiglu.h"
#include "kernels/cuda/swiglu.h"
#include "util/check.h"

namespace parallm::cuda {

namespace {

__global__ void swiglu_kernel(float* out, const float* gate, const float* up, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    out[i] = swiglu_item(gate[i], up[i]);
  }
}

}  // namespace

void swiglu(float* out, const float* gate, const float* up, int64_t n, StreamHandle stream) {
  PARALLM_CHECK(n >= 0);
  if (n == 0) return;
  swiglu_kernel<<<blocks_for(n), kItemThreads, 0, stream>>>(out, gate, up, n);
  check_launch("swiglu_kernel");
}

}  // namespace parallm::cuda
