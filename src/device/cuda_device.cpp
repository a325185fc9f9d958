// Device discovery and selection (see cuda_device.h).
#include "device/cuda_device.h"

#include <cuda_runtime_api.h>

#include <cstdlib>

#include "device/cuda_error.h"
#include "device/cuda_messages.h"
#include "util/check.h"

namespace parallm::cuda {

int device_count() {
  int n = 0;
  const cudaError_t status = cudaGetDeviceCount(&n);
  // NOTE: the runtime reports "no GPU" as an error; to callers it is a count.
  if (status == cudaErrorNoDevice) {
    (void)cudaGetLastError();
    return 0;
  }
  PARALLM_CUDA_CHECK(status);
  return n;
}

void require_device(int index) {
  const int n = device_count();
  if (index < 0 || index >= n) throw InputError(missing_device_message(index, n, std::getenv("CUDA_VISIBLE_DEVICES")));
}

void set_current_device(int index) {
  require_device(index);
  PARALLM_CUDA_CHECK(cudaSetDevice(index));
}

CudaDeviceInfo query_device(int index) {
  require_device(index);
  cudaDeviceProp prop{};
  PARALLM_CUDA_CHECK(cudaGetDeviceProperties(&prop, index));
  CudaDeviceInfo info;
  info.index = index;
  info.name = prop.name;
  info.cc_major = prop.major;
  info.cc_minor = prop.minor;
  info.n_sm = prop.multiProcessorCount;
  // NOTE: free memory is a per-context query: the device is made current for
  // it (creating its primary context the first time) and the caller's device
  // restored.
  int saved = 0;
  PARALLM_CUDA_CHECK(cudaGetDevice(&saved));
  PARALLM_CUDA_CHECK(cudaSetDevice(index));
  size_t free_bytes = 0, total_bytes = 0;
  PARALLM_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  PARALLM_CUDA_CHECK(cudaSetDevice(saved));
  info.total_bytes = total_bytes;
  info.free_bytes = free_bytes;
  return info;
}

uint64_t device_memory_budget_bytes(int index) { return query_device(index).free_bytes; }

}  // namespace parallm::cuda
