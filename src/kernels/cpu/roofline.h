// This machine's physical limits, measured (not looked up) so that benchmarks
// and `bench-model` can report achieved GB/s and GFLOP/s as a fraction of
// what the hardware did in the same run.
#pragma once

#include "util/thread_pool.h"

namespace parallm::cpu {

// Streaming read bandwidth in GB/s (1e9 bytes/s) with pool.size() threads,
// each summing its own slice of a 512 MiB buffer (far beyond the LLC) with the
// active ISA's widest loads; best of 23 passes, about 1 s in all (most of it
// faulting the buffer in).
double measure_memory_bandwidth_gb_per_s(ThreadPool& pool);

// FP32 FMA peak in GFLOP/s (2 flops per FMA lane) with pool.size() threads,
// using the active ISA with enough independent accumulators to cover FMA
// latency; best of a few passes, about 0.3 s in all.
double measure_fma_peak_gflops(ThreadPool& pool);

}  // namespace parallm::cpu
