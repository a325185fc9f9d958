// The one error path of the CUDA backend. Every CUDA runtime, cuBLAS and NCCL
// call goes through a PARALLM_*_CHECK macro; a failure becomes
//  - InputError when the user can act on it: no (or too old a) driver, no
//    device, a device index that does not exist (cuda_messages.h's texts);
//  - CapacityError when the GPU is out of memory (needed, free, advice);
//  - CudaError otherwise (a kernel fault, a lost device, a broken call):
//    the call as written, the library's error name and text, file and line.
// No CUDA headers here: the status arrives as an int (cudaError_t,
// cublasStatus_t and ncclResult_t all use 0 for success), so g++-only code
// can include this header.
#pragma once
#include <stdexcept>
#include <string>

namespace parallm::cuda {

class CudaError : public std::runtime_error {
 public:
  explicit CudaError(const std::string& message) : std::runtime_error(message) {}
};

[[noreturn]] void cuda_failed(int status, const char* call, const char* file, int line);
[[noreturn]] void cublas_failed(int status, const char* call, const char* file, int line);
[[noreturn]] void nccl_failed(int status, const char* call, const char* file, int line);

// The status of a kernel launch (cudaGetLastError() right after it), with the
// kernel's name in the message.
inline void check_launch_status(int status, const char* kernel) {
  if (status != 0) cuda_failed(status, kernel, "kernel launch", 0);
}

}  // namespace parallm::cuda

#define PARALLM_CUDA_CHECK(call)                                                                        \
  do {                                                                                                  \
    const int parallm_status_ = static_cast<int>(call);                                                 \
    if (parallm_status_ != 0) ::parallm::cuda::cuda_failed(parallm_status_, #call, __FILE__, __LINE__); \
  } while (0)

#define PARALLM_CUBLAS_CHECK(call)                                                                        \
  do {                                                                                                    \
    const int parallm_status_ = static_cast<int>(call);                                                   \
    if (parallm_status_ != 0) ::parallm::cuda::cublas_failed(parallm_status_, #call, __FILE__, __LINE__); \
  } while (0)

#define PARALLM_NCCL_CHECK(call)                                                                        \
  do {                                                                                                  \
    const int parallm_status_ = static_cast<int>(call);                                                 \
    if (parallm_status_ != 0) ::parallm::cuda::nccl_failed(parallm_status_, #call, __FILE__, __LINE__); \
  } while (0)
