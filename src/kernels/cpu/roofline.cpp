// Roofline probes (see roofline.h). The loops themselves are per ISA
// (isa_table.h: read_sum, fma_burn); this file owns buffers, threads, timing.
#include "kernels/cpu/roofline.h"

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>

#include "kernels/cpu/isa_table.h"
#include "util/check.h"

namespace parallm::cpu {

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

double measure_memory_bandwidth_gb_per_s(ThreadPool& pool) {
  constexpr size_t kBytes = size_t{512} << 20;  // 16x a 32 MB L3
  // NOTE: 24 passes (~0.25 s): on a shared host 8 passes caught a busy
  // moment and read 33 instead of ~60 GB/s; best-of-more finds a quiet one.
  // Pass 0 is not counted: part of the buffer is still in L3 from the
  // initializing writes (a 256 MiB probe read 74 instead of ~56 on it).
  constexpr int kPasses = 24;
  const int64_t n = static_cast<int64_t>(kBytes / sizeof(float));
  void* mem = mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  PARALLM_CHECK_MSG(mem != MAP_FAILED, "cannot allocate the bandwidth probe buffer");
  auto* buf = static_cast<float*>(mem);
  const IsaKernels& k = active_kernels();
  // Each thread touches (and so owns, first-touch NUMA) the slice it reads.
  const int64_t grain = 4096;
  pool.run([&](int ti, int nt) {
    int64_t b, e;
    ThreadPool::split(n, grain, ti, nt, &b, &e);
    for (int64_t i = b; i < e; ++i) buf[i] = static_cast<float>(i & 7);
  });
  std::atomic<float> sink{0};
  double best = 0;
  for (int pass = 0; pass < kPasses; ++pass) {
    const double t0 = now_s();
    pool.run([&](int ti, int nt) {
      int64_t b, e;
      ThreadPool::split(n, grain, ti, nt, &b, &e);
      const float s = k.read_sum(buf + b, e - b);
      float cur = sink.load(std::memory_order_relaxed);
      while (!sink.compare_exchange_weak(cur, cur + s)) {
      }
    });
    const double dt = now_s() - t0;
    if (pass > 0) best = std::max(best, static_cast<double>(kBytes) / dt / 1e9);
  }
  munmap(mem, kBytes);
  PARALLM_CHECK(sink.load() != -1.0f);  // keeps the sums alive
  return best;
}

double measure_fma_peak_gflops(ThreadPool& pool) {
  const IsaKernels& k = active_kernels();
  float sink = 0;
  // Calibrate: iterations for about 50 ms on one thread.
  int64_t iters = 1 << 16;
  for (;;) {
    const double t0 = now_s();
    k.fma_burn(iters, &sink);
    const double dt = now_s() - t0;
    if (dt > 0.01) {
      iters = static_cast<int64_t>(static_cast<double>(iters) * 0.05 / dt) + 1;
      break;
    }
    iters *= 4;
  }
  double best = 0;
  for (int pass = 0; pass < 5; ++pass) {
    std::atomic<double> flops{0};
    const double t0 = now_s();
    pool.run([&](int, int) {
      float s = 0;
      const double f = k.fma_burn(iters, &s);
      double cur = flops.load();
      while (!flops.compare_exchange_weak(cur, cur + f + (s == -1.0f ? 1 : 0))) {
      }
    });
    const double dt = now_s() - t0;
    best = std::max(best, flops.load() / dt / 1e9);
  }
  return best;
}

}  // namespace parallm::cpu
