// The fixture of the CUDA-device kernel tests: cuda:0 with a ledger as large
// as the GPU, a stream, device copies of host vectors, and outputs poisoned
// with 0xff bytes (NaN as f32, -1 as int32) so an element a kernel forgets to
// write fails the comparison. Skips without a device (gpu_env.h).
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "core/device.h"
#include "device/cuda_buffer.h"
#include "device/cuda_stream.h"
#include "gpu_env.h"

namespace parallm::cuda::test {

class GpuFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    PARALLM_REQUIRE_GPU();
    device_ = std::make_unique<Device>(DeviceId{DeviceId::Kind::kCuda, 0}, uint64_t{1} << 50, 1);
    stream_ = std::make_unique<Stream>(0);
  }

  // At least one element, so an empty input is still a valid pointer.
  template <typename T>
  DeviceBuffer upload(const std::vector<T>& host) {
    DeviceBuffer b(*device_, MemoryCategory::kActivations, std::max<size_t>(1, host.size()) * sizeof(T), "test input");
    copy_to_device(b.data(), host.data(), host.size() * sizeof(T), stream_->handle());
    return b;
  }

  template <typename T>
  DeviceBuffer poisoned(size_t n) {
    DeviceBuffer b(*device_, MemoryCategory::kActivations, n * sizeof(T), "test output");
    fill_bytes(b.data(), 0xff, b.bytes(), stream_->handle());
    return b;
  }

  template <typename T>
  std::vector<T> download(const DeviceBuffer& b) {
    std::vector<T> host(b.bytes() / sizeof(T));
    copy_to_host(host.data(), b.data(), b.bytes(), stream_->handle());
    stream_->synchronize();
    return host;
  }

  std::unique_ptr<Device> device_;
  std::unique_ptr<Stream> stream_;
};

}  // namespace parallm::cuda::test
