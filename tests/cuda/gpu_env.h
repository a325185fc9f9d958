// Whether the CUDA-device tests have a device. Without one they skip with
// "skipped: no CUDA device" (ctest counts them as skipped), unless
// PARALLM_EXPECT_GPU=1 says this machine has one: then its absence is a
// failure, so a GPU runner with a broken driver cannot pass by skipping.
#pragma once
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "device/cuda_device.h"
#include "util/check.h"

namespace parallm::cuda::test {

// Empty when a device is visible, else why not.
inline std::string gpu_missing_reason() {
  try {
    return device_count() > 0 ? "" : "the driver reports no device";
  } catch (const InputError& e) {
    return e.what();
  }
}

inline bool gpu_expected() {
  const char* v = std::getenv("PARALLM_EXPECT_GPU");
  return v != nullptr && std::string(v) == "1";
}

}  // namespace parallm::cuda::test

#define PARALLM_REQUIRE_GPU()                                                                               \
  do {                                                                                                      \
    const std::string parallm_missing_ = ::parallm::cuda::test::gpu_missing_reason();                       \
    if (!parallm_missing_.empty()) {                                                                        \
      if (::parallm::cuda::test::gpu_expected()) FAIL() << "PARALLM_EXPECT_GPU=1 but " << parallm_missing_; \
      GTEST_SKIP() << "skipped: no CUDA device (" << parallm_missing_ << ")";                               \
    }                                                                                                       \
  } while (0)
