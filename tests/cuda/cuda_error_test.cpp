// The error path of CUDA, cuBLAS and NCCL statuses (device/cuda_error.h):
// which exception each kind of failure becomes and what its message names.
// Needs the libraries' headers and error strings, not a device: it runs in
// every CUDA build.
#include "device/cuda_error.h"

#include <cublas_api.h>
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <nccl.h>

#include <string>

#include "util/check.h"

namespace parallm::cuda {
namespace {

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

template <typename E, typename F>
std::string message_of(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("wrong exception: ") + e.what();
  }
  return "no exception";
}

TEST(CudaErrors, AKernelFaultNamesTheCallTheErrorAndTheLine) {
  const std::string m = message_of<CudaError>([] { PARALLM_CUDA_CHECK(cudaErrorLaunchFailure); });
  EXPECT_TRUE(contains(m, "CUDA call failed: cudaErrorLaunchFailure (tests/cuda/cuda_error_test.cpp:")) << m;
  EXPECT_TRUE(contains(m, ": cudaErrorLaunchFailure: ")) << m;
  const std::string launch = message_of<CudaError>([] { check_launch_status(cudaErrorInvalidConfiguration, "k"); });
  EXPECT_TRUE(contains(launch, "k (kernel launch): cudaErrorInvalidConfiguration")) << launch;
  EXPECT_EQ(message_of<CudaError>([] { PARALLM_CUDA_CHECK(cudaSuccess); }), "no exception");
}

TEST(CudaErrors, NoDriverAndNoDeviceAreInputErrors) {
  const std::string driver = message_of<InputError>([] { PARALLM_CUDA_CHECK(cudaErrorInsufficientDriver); });
  EXPECT_TRUE(contains(driver, "no usable CUDA driver (cudaErrorInsufficientDriver")) << driver;
  EXPECT_TRUE(contains(driver, "--devices cpu:0")) << driver;
  const std::string none = message_of<InputError>([] { PARALLM_CUDA_CHECK(cudaErrorNoDevice); });
  EXPECT_TRUE(contains(none, "cuda:0 does not exist: no CUDA device visible")) << none;
  const std::string bad = message_of<InputError>([] { PARALLM_CUDA_CHECK(cudaErrorInvalidDevice); });
  EXPECT_TRUE(contains(bad, "no such CUDA device")) << bad;
}

TEST(CudaErrors, OutOfMemoryIsACapacityError) {
  const std::string m = message_of<CapacityError>([] { PARALLM_CUDA_CHECK(cudaErrorMemoryAllocation); });
  EXPECT_TRUE(contains(m, "is out of memory: cudaErrorMemoryAllocation could not allocate")) << m;
  const std::string blas = message_of<CapacityError>([] { PARALLM_CUBLAS_CHECK(CUBLAS_STATUS_ALLOC_FAILED); });
  EXPECT_TRUE(contains(blas, "is out of memory: CUBLAS_STATUS_ALLOC_FAILED could not allocate")) << blas;
}

TEST(CudaErrors, CublasAndNcclFailuresNameTheLibrary) {
  const std::string blas = message_of<CudaError>([] { PARALLM_CUBLAS_CHECK(CUBLAS_STATUS_EXECUTION_FAILED); });
  EXPECT_TRUE(contains(blas, "cuBLAS call failed: CUBLAS_STATUS_EXECUTION_FAILED (tests/")) << blas;
  const std::string nccl = message_of<CudaError>([] { PARALLM_NCCL_CHECK(ncclUnhandledCudaError); });
  EXPECT_TRUE(contains(nccl, "NCCL call failed: ncclUnhandledCudaError (tests/")) << nccl;
}

}  // namespace
}  // namespace parallm::cuda
