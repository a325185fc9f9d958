// This machine's physical limits, measured (not looked up) so that benchmarks
// and `bench-model` can report achieved GB/s and GFLOP/s as a fraction of
// what the hardware did in the same run.
#pragma once

#include <algorithm>
#include <cstdint>

#include "util/thread_pool.h"

namespace parallm::cpu {

// Streaming read bandwidth in GB/s (1e9 bytes/s) with pool.size() threads,
// each summing its own slice of a 512 MiB buffer (far beyond the LLC) with the
// active ISA's widest loads; best of 24 passes, about 1 s in all (most of it
// faulting the buffer in). Passes alternate between one stream per thread and
// two (the slice's halves in lockstep, 128 bytes from each in turn).
// NOTE: on the 2-core AMD Zen 5 VM this project runs on, two streams per core
// read 8-15% faster than one (57-61 vs 51-54 GB/s, alternating passes), so a
// one-stream probe understated the machine's limit.
double measure_memory_bandwidth_gb_per_s(ThreadPool& pool);

// The same probe in pieces, for a benchmark that interleaves its passes with
// the runs it measures, so that both see the same moments of a shared host:
// the buffer is faulted in (and one warm-up pass read) at construction, and
// every run() adds timed passes; best_gb_per_s() is the best pass so far.
class BandwidthProbe {
 public:
  explicit BandwidthProbe(ThreadPool& pool);
  ~BandwidthProbe();
  BandwidthProbe(const BandwidthProbe&) = delete;
  BandwidthProbe& operator=(const BandwidthProbe&) = delete;

  void run(int passes);
  double best_gb_per_s() const { return std::max(best_[0], best_[1]); }
  // The best with one stream per thread (the probe before two were tried).
  double best_one_stream_gb_per_s() const { return best_[0]; }

 private:
  double pass(int streams);  // GB/s of one read of the whole buffer

  ThreadPool& pool_;
  float* buf_ = nullptr;
  double best_[2] = {0, 0};
  int n_passes_ = 0;
  float sink_ = 0;
};

// FP32 FMA peak in GFLOP/s (2 flops per FMA lane) with pool.size() threads,
// using the active ISA with enough independent accumulators to cover FMA
// latency; best of 5 passes, about 0.3 s in all.
double measure_fma_peak_gflops(ThreadPool& pool);

// The same probe in pieces, like BandwidthProbe: calibrated at construction
// (a pass is ~50 ms), every run() adds timed passes; best_gflops() is the
// best pass so far.
class FmaProbe {
 public:
  static constexpr int kPasses = 5;  // what measure_fma_peak_gflops runs
  explicit FmaProbe(ThreadPool& pool);
  void run(int passes);
  double best_gflops() const { return best_; }

 private:
  ThreadPool& pool_;
  int64_t iters_ = 0;
  double best_ = 0;
};

}  // namespace parallm::cpu
