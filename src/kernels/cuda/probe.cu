// The device probes of probe.h: streaming read bandwidth, cuBLAS bf16 GEMM
// rate and the cost of one kernel launch, each timed with CUDA events on a
// stream of the probe's own.
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdint>

#include "core/device.h"
#include "device/cuda_buffer.h"
#include "device/cuda_device.h"
#include "device/cuda_error.h"
#include "device/cuda_event.h"
#include "device/cuda_stream.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/probe.h"
#include "util/check.h"
#include "util/log.h"

namespace parallm::cuda {

namespace {

constexpr int kReadThreads = 256;
constexpr int kReadUnroll = 4;  // independent 16-byte loads in flight per thread
constexpr uint64_t kMaxReadBytes = uint64_t{4} << 30;
constexpr int kMinRuns = 3, kMaxRuns = 50;
constexpr int kLaunches = 2000;

// Each thread XORs the words it reads into one register; a warp folds its 32
// with shuffles and one lane XORs the result into *sink. The loads feed a
// value that is stored, so the compiler keeps every one of them.
__global__ void __launch_bounds__(kReadThreads)
    read_stream_kernel(const uint4* __restrict__ in, uint64_t n_vec, unsigned* sink) {
  const uint64_t stride = static_cast<uint64_t>(gridDim.x) * blockDim.x;
  uint64_t i = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  unsigned acc = 0;
  // The unrolled body: kReadUnroll loads, each a full stride apart, so that a
  // warp's loads stay coalesced and several are outstanding at once.
  for (; i + (kReadUnroll - 1) * stride < n_vec; i += kReadUnroll * stride) {
    uint4 v[kReadUnroll];
#pragma unroll
    for (int u = 0; u < kReadUnroll; ++u) v[u] = __ldcs(in + i + u * stride);  // streaming: no reuse in L2
#pragma unroll
    for (int u = 0; u < kReadUnroll; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  for (; i < n_vec; i += stride) {
    const uint4 v = __ldcs(in + i);
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  for (int off = 16; off > 0; off /= 2) acc ^= __shfl_xor_sync(0xffffffffu, acc, off);
  if ((threadIdx.x & 31u) == 0) atomicXor(sink, acc);
}

// Values in [-1, 1) from a hash of the index: a GEMM of such data draws the
// power a real one does (zeros or constants make Hopper's GEMM faster).
__global__ void fill_bf16_kernel(__nv_bfloat16* out, uint64_t n, uint32_t seed) {
  const uint64_t stride = static_cast<uint64_t>(gridDim.x) * blockDim.x;
  for (uint64_t i = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    uint32_t h = static_cast<uint32_t>(i) * 0x9e3779b1u ^ static_cast<uint32_t>(i >> 32) ^ seed;
    h ^= h >> 16;
    h *= 0x85ebca6bu;
    h ^= h >> 13;
    h *= 0xc2b2ae35u;
    h ^= h >> 16;
    out[i] = __float2bfloat16(static_cast<float>(h >> 8) * (2.0f / 16777216.0f) - 1.0f);
  }
}

__global__ void empty_kernel() {}

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Best GPU time in ms of `body` (one timed repetition), after one untimed
// warm-up: at least kMinRuns, then more while `budget_s` of wall time lasts.
template <typename Body>
float best_ms(const Stream& stream, double budget_s, Body body) {
  Event start(stream.device_index(), /*timing=*/true), stop(stream.device_index(), /*timing=*/true);
  body();
  stream.synchronize();
  float best = 0;
  const auto t0 = Clock::now();
  for (int run = 0; run < kMaxRuns; ++run) {
    if (run >= kMinRuns && seconds_since(t0) > budget_s) break;
    start.record(stream);
    body();
    stop.record(stream);
    stop.synchronize();
    const float ms = stop.elapsed_ms_since(start);
    if (run == 0 || ms < best) best = ms;
  }
  return best;
}

// A cuBLAS handle bound to one stream, destroyed on every path out.
class CublasHandle {
 public:
  explicit CublasHandle(const Stream& stream) {
    PARALLM_CUBLAS_CHECK(cublasCreate(&handle_));
    const cublasStatus_t status = cublasSetStream(handle_, stream.handle());
    if (status != CUBLAS_STATUS_SUCCESS) {
      cublasDestroy(handle_);
      PARALLM_CUBLAS_CHECK(status);
    }
  }
  ~CublasHandle() { cublasDestroy(handle_); }
  CublasHandle(const CublasHandle&) = delete;
  CublasHandle& operator=(const CublasHandle&) = delete;
  cublasHandle_t get() const { return handle_; }

 private:
  cublasHandle_t handle_ = nullptr;
};

double measure_read(Device& device, const Stream& stream, int n_sm, uint64_t free_bytes, double budget_s) {
  // Far past L2 (50-60 MB on Hopper), so the loads come from HBM; at most a
  // quarter of what is free, so the probe fits beside a loaded model.
  uint64_t bytes = std::min(kMaxReadBytes, free_bytes / 4);
  bytes -= bytes % (sizeof(uint4) * kReadThreads);
  if (bytes < (uint64_t{256} << 20)) {
    throw CapacityError(strfmt("cuda:%d has %s free: the bandwidth probe needs 1 GiB free (a 256 MiB buffer)",
                               stream.device_index(), format_bytes(static_cast<double>(free_bytes)).c_str()));
  }
  DeviceBuffer buf(device, MemoryCategory::kActivations, bytes, "bandwidth probe buffer");
  DeviceBuffer sink(device, MemoryCategory::kActivations, sizeof(unsigned), "bandwidth probe sink");
  // Written once so that the reads see initialized memory (compute-sanitizer's
  // initcheck stays quiet); the value does not matter.
  fill_bytes(buf.data(), 0x5a, bytes, stream.handle());
  fill_bytes(sink.data(), 0, sizeof(unsigned), stream.handle());
  int blocks_per_sm = 0;
  PARALLM_CUDA_CHECK(
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks_per_sm, read_stream_kernel, kReadThreads, 0));
  // One resident wave: every thread streams its share, no tail of late blocks.
  const unsigned blocks = static_cast<unsigned>(std::max(1, blocks_per_sm) * std::max(1, n_sm));
  const uint64_t n_vec = bytes / sizeof(uint4);
  const float ms = best_ms(stream, budget_s, [&] {
    read_stream_kernel<<<blocks, kReadThreads, 0, stream.handle()>>>(buf.as<const uint4>(), n_vec, sink.as<unsigned>());
    check_launch("read_stream_kernel");
  });
  return static_cast<double>(bytes) / (static_cast<double>(ms) * 1e-3) / 1e9;
}

double measure_gemm(Device& device, const Stream& stream, double budget_s) {
  // Three n x n bf16 matrices, 384 MiB (cuBLAS's workspace on top): the read
  // probe already asked for 1 GiB free, and its buffer is gone by now.
  constexpr int64_t n = 8192;
  const uint64_t elems = static_cast<uint64_t>(n) * static_cast<uint64_t>(n);
  const uint64_t bytes = elems * sizeof(__nv_bfloat16);
  DeviceBuffer a(device, MemoryCategory::kActivations, bytes, "GEMM probe A");
  DeviceBuffer b(device, MemoryCategory::kActivations, bytes, "GEMM probe B");
  DeviceBuffer c(device, MemoryCategory::kActivations, bytes, "GEMM probe C");
  fill_bf16_kernel<<<blocks_for(static_cast<int64_t>(elems)), kItemThreads, 0, stream.handle()>>>(a.as<__nv_bfloat16>(),
                                                                                                  elems, 1u);
  check_launch("fill_bf16_kernel");
  fill_bf16_kernel<<<blocks_for(static_cast<int64_t>(elems)), kItemThreads, 0, stream.handle()>>>(b.as<__nv_bfloat16>(),
                                                                                                  elems, 2u);
  check_launch("fill_bf16_kernel");
  CublasHandle handle(stream);
  const float alpha = 1.0f, beta = 0.0f;
  const int dim = static_cast<int>(n);
  // C = A^T B: the layout of a linear layer (weights stored row-major as
  // (out, in), read as column-major transposed), the case the model runs.
  const float ms = best_ms(stream, budget_s, [&] {
    PARALLM_CUBLAS_CHECK(cublasGemmEx(handle.get(), CUBLAS_OP_T, CUBLAS_OP_N, dim, dim, dim, &alpha, a.data(),
                                      CUDA_R_16BF, dim, b.data(), CUDA_R_16BF, dim, &beta, c.data(), CUDA_R_16BF, dim,
                                      CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  });
  const double flops = 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n);
  return flops / (static_cast<double>(ms) * 1e-3) / 1e12;
}

double measure_launch(const Stream& stream, double budget_s) {
  const float ms = best_ms(stream, budget_s, [&] {
    for (int i = 0; i < kLaunches; ++i) empty_kernel<<<1, 1, 0, stream.handle()>>>();
    check_launch("empty_kernel");
  });
  return static_cast<double>(ms) * 1e3 / kLaunches;
}

}  // namespace

DeviceProbes measure_device_probes(int cuda_index, double budget_seconds) {
  require_device(cuda_index);
  const CudaDeviceInfo info = query_device(cuda_index);
  Stream stream(cuda_index);
  // The probe's own ledger: it charges what it allocates like any CUDA
  // buffer, against what the GPU had free when it started.
  Device device(DeviceId{DeviceId::Kind::kCuda, cuda_index}, std::max<uint64_t>(info.free_bytes, 1), 1);
  const double budget = std::max(0.0, budget_seconds);
  DeviceProbes p;
  p.device_name = info.name;
  p.read_gb_per_s = measure_read(device, stream, info.n_sm, info.free_bytes, 0.4 * budget);
  p.gemm_tflops_bf16 = measure_gemm(device, stream, 0.4 * budget);
  p.launch_us = measure_launch(stream, 0.2 * budget);
  stream.synchronize();
  return p;
}

}  // namespace parallm::cuda
