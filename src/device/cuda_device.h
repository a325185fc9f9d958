// The GPUs this process sees: how many, what each is, and which one a host
// thread's CUDA calls go to. No CUDA headers (g++ code includes it).
//
// Indices are the process's (after CUDA_VISIBLE_DEVICES), the N of `cuda:N`.
#pragma once
#include <cstdint>
#include <string>

namespace parallm::cuda {

struct CudaDeviceInfo {
  int index = 0;
  std::string name;  // "NVIDIA H200"
  int cc_major = 0;  // compute capability, 9.0 on Hopper
  int cc_minor = 0;
  int n_sm = 0;
  uint64_t total_bytes = 0;
  uint64_t free_bytes = 0;  // at the time of the query
};

// Visible devices. InputError when no usable driver is loaded; 0 when the
// driver sees no GPU.
int device_count();

// InputError unless cuda:`index` exists ("cuda:3 does not exist: 1 device
// visible (cuda:0)"; no driver and no device are errors of their own).
void require_device(int index);

// Makes cuda:`index` current for the calling thread (after require_device).
void set_current_device(int index);

CudaDeviceInfo query_device(int index);

// The memory budget of cuda:`index` when --device-memory is not given: what
// is free on the GPU now (other processes' share and the CUDA context's
// already taken), for DeviceSetOptions::cuda_memory_bytes.
uint64_t device_memory_budget_bytes(int index);

}  // namespace parallm::cuda
