// The `nccl` backend on real GPUs: skipped cleanly where there is none. Uses as
// many ranks as GPUs (at most 4; NCCL allows one rank per GPU per communicator).
#include "comm/nccl_comm.h"

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <string>
#include <thread>
#include <vector>

#include "comm/comm_factory.h"
#include "comm/local_comm.h"
#include "comm/stream_collectives.h"
#include "util/check.h"
#include "util/log.h"

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

// The message of the exception in `e`, or "" when e is null or not a std::exception.
std::string what_of(const std::exception_ptr& e) {
  if (e == nullptr) return "";
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& ex) {
    return ex.what();
  }
  return "";
}

// Rank r of the NCCL communicator is rank r of its bootstrap, here a split() of a local
// world in reverse order (bootstrap rank b = world rank n-1-b), the way the engine
// builds one communicator per tp / ep group. Two stream all-reduces and the copies
// around them are queued on the caller's stream with no wait; wait_stream() then sees
// the chain through. Pinned host memory: a copy into pageable memory would wait on
// the host itself and hide whether wait_stream() waits.
TEST(NcclComm, StreamAllReduceOverSplitBootstrap) {
  const int n_gpus = gpu_count_or_skip();
  if (n_gpus == 0) GTEST_SKIP() << "no CUDA device";
  const int n = std::min(n_gpus, 4);
  LocalWorld world(n, 10.0);
  auto hosts = world.take_all();
  run_ranks_or_throw(hosts, [&](Communicator& host) {
    auto group = host.split(0, n - 1 - host.rank());
    ASSERT_NE(group, nullptr);
    const int b = group->rank();
    ASSERT_EQ(b, n - 1 - host.rank());
    // Each rank on its own GPU (the world rank); the group's order differs from it.
    auto nccl = make_nccl_communicator(*group, host.rank(), 10.0);
    ASSERT_EQ(nccl->rank(), b);
    ASSERT_EQ(nccl->size(), n);
    auto* sc = dynamic_cast<StreamCollectives*>(nccl.get());
    ASSERT_NE(sc, nullptr);

    ASSERT_EQ(cudaSetDevice(host.rank()), cudaSuccess);
    cudaStream_t stream = nullptr;
    ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
    const size_t count = 4099;  // not a multiple of n: uneven ring chunks
    float* pinned = nullptr;
    float* dev = nullptr;
    ASSERT_EQ(cudaMallocHost(&pinned, count * sizeof(float)), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&dev, count * sizeof(float)), cudaSuccess);
    auto value = [](int rank, size_t i) { return static_cast<float>((rank + 1) * 100 + static_cast<int>(i % 50)); };
    for (size_t i = 0; i < count; ++i) pinned[i] = value(b, i);
    ASSERT_EQ(cudaMemcpyAsync(dev, pinned, count * sizeof(float), cudaMemcpyHostToDevice, stream), cudaSuccess);
    sc->all_reduce_sum_on_stream(dev, count, stream);
    sc->all_reduce_sum_on_stream(dev, count, stream);  // n * the sum
    ASSERT_EQ(cudaMemcpyAsync(pinned, dev, count * sizeof(float), cudaMemcpyDeviceToHost, stream), cudaSuccess);
    sc->wait_stream(stream);
    for (size_t i = 0; i < count; ++i) {
      float sum = 0;
      for (int r = 0; r < n; ++r) sum += value(r, i);
      ASSERT_EQ(pinned[i], static_cast<float>(n) * sum) << "element " << i;
    }
    const CommOpStats& st = nccl->stats().op(CommOp::kAllReduce);
    EXPECT_EQ(st.calls, 2u);
    EXPECT_EQ(st.bytes_sent, 2 * ring_all_reduce_bytes(count, sizeof(float), n, b));
    // The synchronous calls still work after the stream ones have been waited for.
    nccl->barrier();
    cudaFree(dev);
    cudaFreeHost(pinned);
    cudaStreamDestroy(stream);
  });
}

// NCCL refuses two ranks of one communicator on one GPU; parallm says so first, on
// every rank alike (no rank is left waiting in the bootstrap).
TEST(NcclComm, TwoRanksOnOneGpuAreAnInputError) {
  if (gpu_count_or_skip() == 0) GTEST_SKIP() << "no CUDA device";
  LocalWorld world(2, 10.0);
  auto hosts = world.take_all();
  auto errors = run_ranks(hosts, [](Communicator& host) { make_nccl_communicator(host, 0, 10.0); });
  for (const auto& e : errors) {
    ASSERT_NE(e, nullptr);
    EXPECT_THROW(std::rethrow_exception(e), InputError);
    EXPECT_NE(what_of(e).find("--comm nccl needs one GPU per rank; ranks 0 and 1 are both on cuda:0"),
              std::string::npos)
        << what_of(e);
  }
}

// A device missing on one rank is refused on every rank, naming that rank; runs
// without a GPU too (there every index is missing, so rank 0 is named).
TEST(NcclComm, MissingDeviceOnOneRankIsAnInputErrorOnAll) {
  const int n_gpus = gpu_count_or_skip();
  LocalWorld world(2, 10.0);
  auto hosts = world.take_all();
  auto errors =
      run_ranks(hosts, [&](Communicator& host) { make_nccl_communicator(host, host.rank() == 0 ? 0 : n_gpus, 10.0); });
  const std::string expected = n_gpus > 0
                                   ? strfmt("rank 1: cuda:%d requested but %d CUDA device(s) found", n_gpus, n_gpus)
                                   : std::string("rank 0: cuda:0 requested but 0 CUDA device(s) found");
  for (const auto& e : errors) {
    ASSERT_NE(e, nullptr);
    EXPECT_THROW(std::rethrow_exception(e), InputError);
    EXPECT_NE(what_of(e).find(expected), std::string::npos) << what_of(e);
  }
}

// wait_stream() on a stream that does not finish within the timeout aborts the
// communicator and throws CommError instead of hanging; later calls throw too. The
// stall is a host callback sleeping on the stream (one GPU is enough); a dead peer
// in a queued all-reduce looks the same to the polling loop.
TEST(NcclComm, WaitStreamTimesOutAndBreaksTheCommunicator) {
  if (gpu_count_or_skip() == 0) GTEST_SKIP() << "no CUDA device";
  LocalWorld world(1, 10.0);
  auto host = world.rank(0);
  // Init gets the usual timeout (a first NCCL init may take a second); the wait a short one.
  auto nccl = make_nccl_communicator(*host, 0, 10.0);
  nccl->set_timeout_s(0.5);
  auto* sc = dynamic_cast<StreamCollectives*>(nccl.get());
  ASSERT_NE(sc, nullptr);
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  auto sleep_2s = [](void*) { std::this_thread::sleep_for(std::chrono::seconds(2)); };
  ASSERT_EQ(cudaLaunchHostFunc(stream, sleep_2s, nullptr), cudaSuccess);
  const auto start = std::chrono::steady_clock::now();
  try {
    sc->wait_stream(stream);
    ADD_FAILURE() << "wait_stream returned on a stalled stream";
  } catch (const CommError& e) {
    EXPECT_NE(std::string(e.what()).find("wait_stream: no progress within 0.5 s"), std::string::npos) << e.what();
  }
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 1.9);
  float* dev = nullptr;
  ASSERT_EQ(cudaMalloc(&dev, sizeof(float)), cudaSuccess);
  EXPECT_THROW(sc->all_reduce_sum_on_stream(dev, 1, stream), CommError);
  EXPECT_THROW(nccl->barrier(), CommError);
  cudaStreamSynchronize(stream);
  cudaFree(dev);
  cudaStreamDestroy(stream);
}

}  // namespace
}  // namespace parallm
