// Argmax per row: one block of kRowThreads threads per row, each scans its
// lane, the block meets in shared memory in math/argmax.h's tree order.
#include "kernels/cuda/argmax.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/launch_checks.h"
#include "kernels/cuda/math/argmax.h"

namespace parallm::cuda {

namespace {

__global__ void __launch_bounds__(kRowThreads) argmax_rows_kernel(int32_t* out, const float* x, int64_t n_vocab) {
  __shared__ ArgmaxItem partial[kRowThreads];
  const int64_t row = blockIdx.x;
  const int lane = static_cast<int>(threadIdx.x);
  partial[lane] = argmax_lane(x + row * n_vocab, n_vocab, lane, kRowThreads);
  __syncthreads();
  for (int s = kRowThreads / 2; s > 0; s /= 2) {
    if (lane < s) partial[lane] = argmax_better(partial[lane], partial[lane + s]);
    __syncthreads();
  }
  if (lane == 0) out[row] = partial[0].index < 0 ? 0 : partial[0].index;
}

}  // namespace

void argmax_rows(int32_t* out, const float* x, int64_t n_rows, int64_t n_vocab, StreamHandle stream) {
  check_argmax_args(n_rows, n_vocab);
  if (n_rows == 0) return;
  argmax_rows_kernel<<<static_cast<unsigned>(n_rows), kRowThreads, 0, stream>>>(out, x, n_vocab);
  check_launch("argmax_rows_kernel");
}

}  // namespace parallm::cuda
