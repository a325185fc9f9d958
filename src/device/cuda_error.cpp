// CUDA, cuBLAS and NCCL failures as parallm's errors (see cuda_error.h).
#include "device/cuda_error.h"

#include <cublas_api.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstdlib>
#include <cstring>

#include "device/cuda_messages.h"
#include "util/check.h"
#include "util/log.h"

namespace parallm::cuda {

namespace {

std::string where(const char* call, const char* file, int line) {
  if (line <= 0) return strfmt("%s (%s)", call, file);
  // The path from the source tree's src/ or tests/ on: the message stays short.
  const char* rel = std::strstr(file, "/src/");
  if (rel == nullptr) rel = std::strstr(file, "/tests/");
  return strfmt("%s (%s:%d)", call, rel != nullptr ? rel + 1 : file, line);
}

}  // namespace

void cuda_failed(int status, const char* call, const char* file, int line) {
  const auto error = static_cast<cudaError_t>(status);
  const std::string text = strfmt("%s: %s", cudaGetErrorName(error), cudaGetErrorString(error));
  switch (error) {
    case cudaErrorInsufficientDriver:
    case cudaErrorNoDevice:
    case cudaErrorSystemDriverMismatch:
    case cudaErrorCompatNotSupportedOnDevice: {
      if (error == cudaErrorNoDevice)
        throw InputError(missing_device_message(0, 0, std::getenv("CUDA_VISIBLE_DEVICES")));
      int driver = 0, runtime = 0;
      (void)cudaDriverGetVersion(&driver);
      (void)cudaRuntimeGetVersion(&runtime);
      throw InputError(no_driver_message(text, driver, runtime));
    }
    case cudaErrorInvalidDevice: {
      int n = 0;
      (void)cudaGetDeviceCount(&n);
      throw InputError(strfmt("%s: no such CUDA device (%d visible)", where(call, file, line).c_str(), n));
    }
    case cudaErrorMemoryAllocation: {
      // Allocations with a name go through DeviceBuffer, which says what; this
      // is the path of a CUDA-internal allocation (a context, a library's
      // workspace).
      size_t free_bytes = 0, total_bytes = 0;
      (void)cudaGetLastError();
      (void)cudaMemGetInfo(&free_bytes, &total_bytes);
      int device = 0;
      (void)cudaGetDevice(&device);
      throw CapacityError(out_of_memory_message(strfmt("cuda:%d", device), call, 0, free_bytes, total_bytes));
    }
    default:
      throw CudaError(strfmt("CUDA call failed: %s: %s", where(call, file, line).c_str(), text.c_str()));
  }
}

void cublas_failed(int status, const char* call, const char* file, int line) {
  const auto s = static_cast<cublasStatus_t>(status);
  if (s == CUBLAS_STATUS_ALLOC_FAILED) {
    size_t free_bytes = 0, total_bytes = 0;
    (void)cudaMemGetInfo(&free_bytes, &total_bytes);
    int device = 0;
    (void)cudaGetDevice(&device);
    throw CapacityError(out_of_memory_message(strfmt("cuda:%d", device), call, 0, free_bytes, total_bytes));
  }
  throw CudaError(strfmt("cuBLAS call failed: %s: %s", where(call, file, line).c_str(), cublasGetStatusString(s)));
}

void nccl_failed(int status, const char* call, const char* file, int line) {
  const auto r = static_cast<ncclResult_t>(status);
  // ncclGetLastError names the failing peer or transport; the result's own
  // string is generic ("unhandled system error").
  const char* detail = ncclGetLastError(nullptr);
  std::string text = ncclGetErrorString(r);
  if (detail != nullptr && *detail != '\0') text += strfmt(" (%s)", detail);
  throw CudaError(strfmt("NCCL call failed: %s: %s", where(call, file, line).c_str(), text.c_str()));
}

}  // namespace parallm::cuda
