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

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

}  // namespace

namespace {
constexpr size_t kProbeBytes = size_t{512} << 20;  // 16x a 32 MB L3
constexpr int64_t kProbeGrain = 4096;
}  // namespace

BandwidthProbe::BandwidthProbe(ThreadPool& pool) : pool_(pool) {
  void* mem = mmap(nullptr, kProbeBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  PARALLM_CHECK_MSG(mem != MAP_FAILED, "cannot allocate the bandwidth probe buffer");
  buf_ = static_cast<float*>(mem);
  const int64_t n = static_cast<int64_t>(kProbeBytes / sizeof(float));
  // Each thread touches (and so owns, first-touch NUMA) the slice it reads.
  pool_.run([&](int ti, int nt) {
    int64_t b, e;
    ThreadPool::split(n, kProbeGrain, ti, nt, &b, &e);
    std::fill(buf_ + b, buf_ + e, 1.0f);
  });
  // NOTE: the first pass is not counted: part of the buffer is still in L3
  // from the initializing writes (a 256 MiB probe read 74 instead of ~56 on it).
  pass(1);
}

BandwidthProbe::~BandwidthProbe() {
  munmap(buf_, kProbeBytes);
  PARALLM_CHECK(sink_ != -1.0f);  // keeps the sums alive
}

double BandwidthProbe::pass(int streams) {
  const IsaKernels& k = active_kernels();
  const int64_t n = static_cast<int64_t>(kProbeBytes / sizeof(float));
  std::atomic<float> sum{0};
  const double t0 = now_s();
  pool_.run([&](int ti, int nt) {
    int64_t b, e;
    ThreadPool::split(n, kProbeGrain, ti, nt, &b, &e);
    const float s = k.read_sum(buf_ + b, e - b, streams);
    float cur = sum.load(std::memory_order_relaxed);
    while (!sum.compare_exchange_weak(cur, cur + s)) {
    }
  });
  const double dt = now_s() - t0;
  sink_ += sum.load();
  return static_cast<double>(kProbeBytes) / dt / 1e9;
}

void BandwidthProbe::run(int passes) {
  for (int i = 0; i < passes; ++i) {
    const int streams = 1 + (n_passes_++ % 2);
    best_[streams - 1] = std::max(best_[streams - 1], pass(streams));
  }
}

double measure_memory_bandwidth_gb_per_s(ThreadPool& pool) {
  // NOTE: 24 counted passes (~0.25 s): on a shared host 8 passes caught a
  // busy moment and read 33 instead of ~60 GB/s; best-of-more finds a quiet one.
  BandwidthProbe probe(pool);
  probe.run(24);
  return probe.best_gb_per_s();
}

FmaProbe::FmaProbe(ThreadPool& pool) : pool_(pool) {
  const IsaKernels& k = active_kernels();
  float sink = 0;
  // Calibrate: iterations for about 50 ms on one thread.
  int64_t iters = 1 << 16;
  for (;;) {
    const double t0 = now_s();
    k.fma_burn(iters, &sink);
    const double dt = now_s() - t0;
    if (dt > 0.01) {
      iters_ = static_cast<int64_t>(static_cast<double>(iters) * 0.05 / dt) + 1;
      break;
    }
    iters *= 4;
  }
  PARALLM_CHECK(sink != -1.0f);  // keeps the sums alive
}

void FmaProbe::run(int passes) {
  const IsaKernels& k = active_kernels();
  for (int pass = 0; pass < passes; ++pass) {
    std::atomic<double> flops{0};
    const double t0 = now_s();
    pool_.run([&](int, int) {
      float s = 0;
      const double f = k.fma_burn(iters_, &s);
      double cur = flops.load();
      while (!flops.compare_exchange_weak(cur, cur + f + (s == -1.0f ? 1 : 0))) {
      }
    });
    const double dt = now_s() - t0;
    best_ = std::max(best_, flops.load() / dt / 1e9);
  }
}

double measure_fma_peak_gflops(ThreadPool& pool) {
  FmaProbe probe(pool);
  probe.run(FmaProbe::kPasses);
  return probe.best_gflops();
}

}  // namespace parallm::cpu
