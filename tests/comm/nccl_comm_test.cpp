// The `nccl` backend on real GPUs: skipped cleanly where there is none. Uses as
// many ranks as GPUs (at most 4; NCCL allows one rank per GPU per communicator).
#include "comm/nccl_comm.h"

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <vector>

#include "comm/comm_factory.h"
#include "comm/local_comm.h"

namespace parallm {
namespace {

int gpu_count_or_skip() { return cuda_device_count(); }

TEST(NcclComm, CollectivesMatchReference) {
  int n_gpus = gpu_count_or_skip();
  if (n_gpus == 0) GTEST_SKIP() << "no CUDA device";
  const int n = std::min(n_gpus, 4);
  auto comms = make_communicators(CommBackend::kNccl, n, CommOptions{10.0});
  ASSERT_EQ(static_cast<int>(comms.size()), n);
  run_ranks_or_throw(comms, [&](Communicator& c) {
    ASSERT_EQ(cudaSetDevice(c.rank()), cudaSuccess);
    const size_t count = 1000;
    std::vector<float> host(count);
    for (size_t i = 0; i < count; ++i) host[i] = static_cast<float>(c.rank() * 100 + static_cast<int>(i % 50));
    float* dev = nullptr;
    ASSERT_EQ(cudaMalloc(&dev, count * sizeof(float) * static_cast<size_t>(n)), cudaSuccess);
    cudaMemcpy(dev, host.data(), count * sizeof(float), cudaMemcpyHostToDevice);
    c.all_reduce_sum(dev, count);
    cudaMemcpy(host.data(), dev, count * sizeof(float), cudaMemcpyDeviceToHost);
    for (size_t i = 0; i < count; ++i) {
      float s = 0;
      for (int r = 0; r < n; ++r) s += static_cast<float>(r * 100 + static_cast<int>(i % 50));
      ASSERT_EQ(host[i], s);
    }
    EXPECT_EQ(c.stats().op(CommOp::kAllReduce).bytes_sent, ring_all_reduce_bytes(count, 4, n, c.rank()));
    // all-gather of one int per rank, broadcast, barrier, split
    int* ints = reinterpret_cast<int*>(dev);
    int mine = c.rank() * 7;
    cudaMemcpy(ints + c.rank(), &mine, sizeof(int), cudaMemcpyHostToDevice);
    c.all_gather(ints + c.rank(), ints, sizeof(int));
    std::vector<int> all(static_cast<size_t>(n));
    cudaMemcpy(all.data(), ints, all.size() * sizeof(int), cudaMemcpyDeviceToHost);
    for (int r = 0; r < n; ++r) ASSERT_EQ(all[static_cast<size_t>(r)], r * 7);
    c.barrier();
    auto self = c.split(c.rank(), 0);
    ASSERT_NE(self, nullptr);
    EXPECT_EQ(self->size(), 1);
    self->all_reduce_sum(dev, count);
    cudaFree(dev);
  });
}

TEST(NcclComm, BootstrapOverLocalWorld) {
  if (gpu_count_or_skip() == 0) GTEST_SKIP() << "no CUDA device";
  LocalWorld world(1, 10.0);
  auto host = world.rank(0);
  auto nccl = make_nccl_communicator(*host, 0, 10.0);
  EXPECT_EQ(nccl->size(), 1);
  nccl->barrier();
}

}  // namespace
}  // namespace parallm
