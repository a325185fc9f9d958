// The CUDA device runtime (src/device): errors a user can act on, ledger
// charges of device and pinned buffers, streams and events. The first test
// runs where there is no device (it checks that absence is a clear
// InputError, never a crash); the others need one and skip without it.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/device.h"
#include "device/cuda_buffer.h"
#include "device/cuda_device.h"
#include "device/cuda_error.h"
#include "device/cuda_event.h"
#include "device/cuda_stream.h"
#include "gpu_env.h"
#include "util/check.h"

namespace parallm::cuda {
namespace {

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

std::unique_ptr<Device> cuda_device(int index, uint64_t budget_bytes) {
  return std::make_unique<Device>(DeviceId{DeviceId::Kind::kCuda, index}, budget_bytes, 1);
}

TEST(CudaRuntime, WithoutADeviceEveryEntryIsAnInputError) {
  if (test::gpu_missing_reason().empty())
    GTEST_SKIP() << "a CUDA device is present: this case is for machines without one";
  if (test::gpu_expected()) FAIL() << "PARALLM_EXPECT_GPU=1 but " << test::gpu_missing_reason();
  const std::string why = test::gpu_missing_reason();
  // No driver says which and what to do; a driver with no GPU says "no CUDA device visible".
  EXPECT_TRUE(contains(why, "--devices cpu:0") || contains(why, "no CUDA device") ||
              why == "the driver reports no device")
      << why;
  EXPECT_THROW(require_device(0), InputError);
  EXPECT_THROW(Stream(0), InputError);
  EXPECT_THROW(Event(0), InputError);
  auto device = cuda_device(0, uint64_t{1} << 30);
  EXPECT_THROW(DeviceBuffer(*device, MemoryCategory::kWeights, 4096, "w"), InputError);
  EXPECT_EQ(device->memory().used_bytes(), 0u) << "a failed allocation stays charged";
}

TEST(CudaRuntime, ABadIndexNamesTheVisibleDevices) {
  PARALLM_REQUIRE_GPU();
  const int n = device_count();
  try {
    require_device(n);
    FAIL() << "cuda:" << n << " accepted";
  } catch (const InputError& e) {
    const std::string want = "cuda:" + std::to_string(n) + " does not exist: " + std::to_string(n) +
                             (n == 1 ? " device visible" : " devices visible");
    EXPECT_TRUE(contains(e.what(), want)) << e.what();
  }
  EXPECT_THROW(Stream(n + 3), InputError);
  const CudaDeviceInfo info = query_device(0);
  EXPECT_GT(info.total_bytes, 0u);
  EXPECT_LE(info.free_bytes, info.total_bytes);
  EXPECT_GT(info.n_sm, 0);
}

TEST(CudaRuntime, BuffersChargeTheLedgerAndCopiesRoundTrip) {
  PARALLM_REQUIRE_GPU();
  auto device = cuda_device(0, uint64_t{1} << 30);
  Stream stream(0);
  {
    DeviceBuffer buf(*device, MemoryCategory::kKvCache, 1 << 20, "kv");
    PinnedBuffer staging(*device, MemoryCategory::kCommBuffers, 1 << 20, "staging");
    EXPECT_EQ(device->memory().used_bytes(MemoryCategory::kKvCache), 1u << 20);
    EXPECT_EQ(device->memory().used_bytes(MemoryCategory::kCommBuffers), 1u << 20);
    for (size_t i = 0; i < (1u << 20); ++i) staging.as<uint8_t>()[i] = static_cast<uint8_t>(i * 7);
    copy_to_device(buf.data(), staging.data(), buf.bytes(), stream.handle());
    std::vector<uint8_t> back(1 << 20);
    copy_to_host(back.data(), buf.data(), buf.bytes(), stream.handle());
    stream.synchronize();
    EXPECT_EQ(0, std::memcmp(back.data(), staging.data(), back.size()));
    DeviceBuffer moved = std::move(buf);
    EXPECT_EQ(buf.data(), nullptr);
    EXPECT_EQ(device->memory().used_bytes(MemoryCategory::kKvCache), 1u << 20);
  }
  EXPECT_EQ(device->memory().used_bytes(), 0u);
}

TEST(CudaRuntime, OverTheBudgetAllocatesNothing) {
  PARALLM_REQUIRE_GPU();
  auto device = cuda_device(0, 1 << 20);
  EXPECT_THROW(DeviceBuffer(*device, MemoryCategory::kWeights, 2 << 20, "blk.0.attn_q"), CapacityError);
  EXPECT_EQ(device->memory().used_bytes(), 0u);
}

TEST(CudaRuntime, OutOfGpuMemoryGivesNeededFreeAndAdvice) {
  PARALLM_REQUIRE_GPU();
  const CudaDeviceInfo info = query_device(0);
  auto device = cuda_device(0, uint64_t{1} << 52);  // a budget the GPU cannot back
  try {
    DeviceBuffer too_big(*device, MemoryCategory::kWeights, info.total_bytes + (uint64_t{1} << 30), "output.weight");
    FAIL() << "an allocation larger than the GPU succeeded";
  } catch (const CapacityError& e) {
    EXPECT_TRUE(contains(e.what(), "cuda:0 is out of memory: output.weight needs")) << e.what();
    EXPECT_TRUE(contains(e.what(), "free of")) << e.what();
    EXPECT_TRUE(contains(e.what(), "--tp")) << e.what();
  }
  EXPECT_EQ(device->memory().used_bytes(), 0u);
  // The context is still usable afterwards.
  DeviceBuffer small(*device, MemoryCategory::kWeights, 4096, "small");
  EXPECT_NE(small.data(), nullptr);
}

TEST(CudaRuntime, EventsOrderStreamsAndTime) {
  PARALLM_REQUIRE_GPU();
  auto device = cuda_device(0, uint64_t{1} << 30);
  Stream a(0), b(0);
  Event start(0, true), done(0, true);
  DeviceBuffer buf(*device, MemoryCategory::kActivations, 64 << 20, "scratch");
  start.record(a);
  fill_bytes(buf.data(), 0x5a, buf.bytes(), a.handle());
  done.record(a);
  done.make_wait(b);  // b's copy sees a's fill
  std::vector<uint8_t> back(4096);
  copy_to_host(back.data(), buf.as<uint8_t>() + buf.bytes() - back.size(), back.size(), b.handle());
  b.synchronize();
  EXPECT_TRUE(done.ready());
  for (uint8_t v : back) ASSERT_EQ(v, 0x5a);
  EXPECT_GE(done.elapsed_ms_since(start), 0.0f);
}

TEST(CudaRuntime, AFailedCallIsACudaErrorNamingTheCall) {
  PARALLM_REQUIRE_GPU();
  Stream stream(0);
  // NOTE: a null destination fails in the call itself; a wild device address
  // would fault on the device, and such errors stick to the context for the
  // rest of the process.
  std::vector<uint8_t> host(16);
  try {
    copy_to_device(nullptr, host.data(), host.size(), stream.handle());
    stream.synchronize();
    FAIL() << "a copy to a null pointer succeeded";
  } catch (const CudaError& e) {
    EXPECT_TRUE(contains(e.what(), "CUDA call failed: cudaMemcpyAsync(")) << e.what();
    EXPECT_TRUE(contains(e.what(), "src/device/cuda_buffer.cpp:")) << e.what();
  }
  // The stream is still usable.
  stream.synchronize();
}

}  // namespace
}  // namespace parallm::cuda
