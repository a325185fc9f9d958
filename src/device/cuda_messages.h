// The texts of the CUDA backend's user-facing errors: what went wrong, the
// numbers behind it, and what to do. Pure formatting with no CUDA headers, so
// the CPU build compiles and tests them (tests/cuda/cuda_messages_test.cpp);
// cuda_error.cpp, cuda_device.cpp and cuda_buffer.cpp throw them.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace parallm::cuda {

// cudaGetDeviceCount failed: no driver, or one older than the runtime.
// `error` is the runtime's "name: text"; versions as cudaDriverGetVersion /
// cudaRuntimeGetVersion report them (driver 0 = none loaded).
std::string no_driver_message(std::string_view error, int driver_version, int runtime_version);

// cuda:`index` was asked for and `n_visible` devices exist (0 included);
// `visible_devices` is $CUDA_VISIBLE_DEVICES or nullptr when unset.
// "cuda:3 does not exist: 1 device visible (cuda:0)".
std::string missing_device_message(int index, int n_visible, const char* visible_devices);

// An allocation the ledger allowed failed on the GPU itself (other processes,
// fragmentation, the CUDA context's own share): `what` needed `needed_bytes`,
// the GPU had `free_bytes` of `total_bytes` free. needed_bytes 0: the size is
// not known (an allocation inside CUDA or cuBLAS).
std::string out_of_memory_message(std::string_view device_name, std::string_view what, uint64_t needed_bytes,
                                  uint64_t free_bytes, uint64_t total_bytes);

// "CUDA version 12.4" from the runtime's 12040-style number.
std::string cuda_version_string(int version);

}  // namespace parallm::cuda
