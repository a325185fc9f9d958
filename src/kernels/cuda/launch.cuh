// Launch helpers shared by the .cu files (nvcc only; not part of the API).
#pragma once
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>

#include "device/cuda_error.h"

namespace parallm::cuda {

constexpr int kItemThreads = 256;  // threads per block of the element-wise kernels

// Blocks for `items` one-per-thread items; kernels loop grid-stride, so the
// cap only bounds the grid.
inline unsigned blocks_for(int64_t items) {
  const int64_t blocks = (items + kItemThreads - 1) / kItemThreads;
  return static_cast<unsigned>(std::min<int64_t>(blocks, int64_t{1} << 20));
}

// A bad launch (grid, shared memory, an image for the wrong architecture)
// fails at the launch; a fault inside the kernel surfaces at the stream's
// next synchronization.
inline void check_launch(const char* kernel) {
  cuda::check_launch_status(static_cast<int>(cudaGetLastError()), kernel);
}

}  // namespace parallm::cuda
