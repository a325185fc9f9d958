// The device's own limits, measured in the run that reports against them
// (issue #25 "Speed"): `bench-model --devices cuda:N` sets its prefill
// against the tensor-core GEMM rate and its decode against the read
// bandwidth measured here, as the CPU bench sets them against its FMA and
// bandwidth probes (kernels/cpu/roofline.h). No CUDA types: g++ code
// includes this header; the definitions are in probe.cu (CUDA builds only).
//
// What each number is:
//  - read_gb_per_s: a streaming read of one device buffer far larger than L2
//    (min(4 GiB, 1/4 of the free memory)): 16-byte loads, each thread folding
//    what it read into one word and the warps meeting in one atomic, so the
//    loads cannot be dropped; bytes read / GPU time (events), best of the
//    runs. The ceiling of a decode step, which streams every weight once.
//  - gemm_tflops_bf16: cuBLAS bf16 x bf16 -> bf16 GEMM, f32 accumulation
//    (tensor cores), 8192^3 on non-trivial data (a GEMM of zeros runs faster
//    on Hopper: less switching power), 2 n^3 / GPU time, best of the runs.
//  - launch_us: GPU time from before the first to after the last of many
//    back-to-back launches of an empty kernel, divided by their count: the
//    host's submit cost per launch (the kernels themselves are empty), which
//    bounds a decode step made of many tiny kernels.
//  - device_name: the CUDA device's name ("NVIDIA H200").
//
// Memory: charged to a ledger of the probe's own (budget: what is free at
// the start), freed before the function returns; the read buffer is freed
// before the GEMM's are allocated. Errors: InputError when cuda:N does not
// exist or no driver is loaded, CapacityError when less than 1 GiB is
// free, CudaError for a failed CUDA or cuBLAS call (device/cuda_error.h).
#pragma once
#include <string>

namespace parallm::cuda {

struct DeviceProbes {
  double read_gb_per_s = 0;     // 10^9 bytes / s
  double gemm_tflops_bf16 = 0;  // 10^12 FLOP / s
  double launch_us = 0;         // µs per kernel launch
  std::string device_name;
};

// Runs the three probes on cuda:`cuda_index` within about `budget_seconds`
// of wall time (each probe runs at least 3 timed repetitions after a
// warm-up, more while its share of the budget lasts: 40% read, 40% GEMM,
// 20% launches). Synchronous; leaves the device current for the thread.
DeviceProbes measure_device_probes(int cuda_index, double budget_seconds = 1.0);

}  // namespace parallm::cuda
