// The CUDA backend's user-facing error texts (device/cuda_messages.h), which
// the CPU build compiles: each names what went wrong, the numbers and a fix.
#include "device/cuda_messages.h"

#include <gtest/gtest.h>

namespace parallm::cuda {
namespace {

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(CudaMessages, MissingDeviceSaysHowManyAreVisible) {
  EXPECT_EQ(missing_device_message(3, 1, nullptr), "cuda:3 does not exist: 1 device visible (cuda:0)");
  EXPECT_EQ(missing_device_message(8, 4, nullptr), "cuda:8 does not exist: 4 devices visible (cuda:0 to cuda:3)");
  EXPECT_EQ(missing_device_message(0, 0, nullptr), "cuda:0 does not exist: no CUDA device visible");
  EXPECT_EQ(missing_device_message(2, 2, "1,3"),
            "cuda:2 does not exist: 2 devices visible (cuda:0 to cuda:1) (CUDA_VISIBLE_DEVICES=1,3)");
}

TEST(CudaMessages, NoDriverNamesVersionsAndTheWayOut) {
  const std::string m = no_driver_message("cudaErrorInsufficientDriver: CUDA driver version is insufficient", 0, 13000);
  EXPECT_TRUE(contains(m, "cudaErrorInsufficientDriver")) << m;
  EXPECT_TRUE(contains(m, "no CUDA driver")) << m;
  EXPECT_TRUE(contains(m, "CUDA 13.0")) << m;
  EXPECT_TRUE(contains(m, "--devices cpu:0")) << m;
  const std::string old = no_driver_message("cudaErrorInsufficientDriver: x", 12040, 13000);
  EXPECT_TRUE(contains(old, "CUDA driver 12.4")) << old;
  EXPECT_EQ(cuda_version_string(12080), "12.8");
  EXPECT_EQ(cuda_version_string(0), "none");
}

TEST(CudaMessages, OutOfMemoryGivesNeededFreeAndAdvice) {
  const std::string m =
      out_of_memory_message("cuda:1", "blk.0.ffn_up shard", uint64_t{3} << 30, uint64_t{1} << 29, uint64_t{80} << 30);
  EXPECT_TRUE(contains(m, "cuda:1 is out of memory")) << m;
  EXPECT_TRUE(contains(m, "blk.0.ffn_up shard needs 3.00 GiB")) << m;
  EXPECT_TRUE(contains(m, "512.00 MiB free of 80.00 GiB")) << m;
  EXPECT_TRUE(contains(m, "--device-memory")) << m;
  EXPECT_TRUE(contains(m, "--tp")) << m;
  const std::string unknown = out_of_memory_message("cuda:0", "cublasCreate(&handle)", 0, 1 << 20, uint64_t{1} << 34);
  EXPECT_TRUE(contains(unknown,
                       "cuda:0 is out of memory: cublasCreate(&handle) could not allocate, the GPU has 1.00 MiB "
                       "free of 16.00 GiB"))
      << unknown;
}

}  // namespace
}  // namespace parallm::cuda
