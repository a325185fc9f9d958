// Performance model of one replica (tp x pp devices) of a layout.
//
// One forward pass on one pipeline stage is a sum of kernel classes, each at
// its roofline (time = max(bytes / bandwidth, FLOPs / peak), each at a fixed
// efficiency):
//   weight GEMMs  bytes = the stage's weight shard (MoE: only the experts the
//                 batch touches, E * (1 - (1 - k/E)^tokens)); FLOPs = 2 x active
//                 params x tokens / tp
//   expert GEMMs  MoE: the routed experts' grouped GEMMs, a kernel of their own
//                 at moe_gemm_eff of the dense GEMMs' efficiency
//   attention     decode: KV bytes of every sequence's context (without
//                 grouped-query kernels: read once per query head at
//                 ungrouped_kv_read_gbps); prefill: FLOPs
//                 2 x n_layer x n_head x head_dim x len^2 (causal half of QK^T and PV)
//   tp all-reduce two per layer, ring: 2 (tp-1)/tp x bytes / link + latency
//   ep all-to-all dispatch and combine of top-k token copies over the EP
//                 group's links; expert FLOPs x expert_imbalance (busiest rank)
//   attention-DP  ep > tp: the EP group spans ep/tp attention replicas that
//                 step together; each expert sees the tokens of all of them
//   launches      a fixed cost per layer
// Pipeline: the batch is split into m = min(batch, pp) micro-batches; a token
// takes pp stage times plus pp-1 hand-offs (bubbles when batch < pp).
// Static batches (predict_load, the way benchmark tables are taken): a round
// is the prefill of C prompts plus `output` decode steps at batch C with mean
// context input + output/2. Online serving under continuous batching with a
// token budget, chunked prefill and queueing: load_model.h, on mixed_step_s.
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

#include "planner/fabric.h"
#include "planner/memory_model.h"

namespace parallm::planner {

// Global efficiency factors: chosen once for all GPUs and models (docs/plan.md
// explains how and lists the resulting errors); --calibrate replaces them.
struct PerfConstants {
  double bw_eff = 0.80;     // achieved / datasheet memory bandwidth
  double flops_eff = 0.60;  // achieved / datasheet dense tensor throughput
  // Weight GEMMs in fp8 where the device has an fp8 peak: achieved / that peak;
  // 0 = flops_eff (docs/plan.md: why fp8 reaches less of its datasheet peak).
  double fp8_flops_eff = 0.45;
  // The routed experts' grouped GEMMs, with routing and token permutation:
  // achieved / the dense GEMMs' efficiency above (docs/plan.md).
  double moe_gemm_eff = 0.35;
  double link_eff = 0.75;         // achieved / nominal link bandwidth
  double layer_overhead_us = 10;  // launches per layer per forward
  // Attention's own efficiencies (KV reads in decode, causal FLOPs in prefill);
  // 0 = the weight GEMMs' bw_eff / flops_eff. Only --calibrate sets them: the
  // CPU engine's attention runs far below its matmuls (docs/plan.md).
  double attn_bw_eff = 0;
  double attn_flops_eff = 0;
  double request_overhead_ms = 4;  // scheduling, sampling, detokenize per request (TTFT)
  // Decode attention without grouped-query kernels (PerfInputs::grouped_kv_reads
  // false): GB/s at which it reads the KV once per query head (docs/plan.md).
  double ungrouped_kv_read_gbps = 3200;
  // Calibrated CPU only (Calibration's KernelEfficiency::gflops_by_tokens):
  // the weight GEMMs' FLOP/s by batch size, replacing flops_eff's one peak
  // share. Between points the time per token is interpolated linearly; past
  // the last point its rate holds.
  std::vector<std::pair<double, double>> gemm_gflops_by_tokens;
};

struct PerfInputs {
  const ModelSpec* model = nullptr;
  ParamCounts params;
  WeightFormat weights;
  double kv_elem_bytes = 2;
  double act_elem_bytes = 2;
  GpuSpec gpu;
  Layout layout;
  GroupLink tp_link;           // links inside the tp group
  GroupLink pp_link;           // links between stages
  GroupLink ep_link;           // links of the EP group inside a node (size 1: tp_link)
  GroupLink ep_net_link;       // between nodes, when the EP group spans nodes
  double ep_net_fraction = 0;  // of the token copies that leave a device, those crossing nodes
  // Routed tokens on the busiest EP rank over the mean (>= 1); expert GEMMs
  // wait for it. 1 when ep == 1.
  double expert_imbalance = 1;
  DeviceMemory memory;  // from device_memory()
  // Decode attention reads each KV head once for its whole query-head group
  // (grouped-query kernels: vLLM, SGLang, TensorRT-LLM's XQA from v0.7). false:
  // once per query head, n_head / n_kv_head times the KV bytes (TensorRT-LLM
  // <= v0.6's masked multi-head attention, the engine of the v0.6.1 tables).
  bool grouped_kv_reads = true;
  PerfConstants k;
};

// Step-time functions of one replica; the simulator (src/sim/) calls them for
// every scheduler step, so they are pure functions of their arguments.
//
// Seconds of one decode step for `batch` sequences of mean context `ctx` (TPOT).
double decode_step_s(const PerfInputs& in, double batch, double ctx);
// Seconds of one mixed step of a continuous-batching engine: `prefill_tokens`
// prompt tokens (chunks of prompts, each token attending to `prefill_ctx`
// earlier tokens on average: len/2 for a whole prompt of len, start + chunk/2
// for a chunk starting at `start`; `prefill_seqs` prompts among them, for the
// logits of those that finish) plus `decode_seqs` decoding sequences of mean
// context `decode_ctx`. The weights are read once for all of them.
// mixed_step_s(in, 0, 0, 0, B, L) == decode_step_s(in, B, L).
double mixed_step_s(const PerfInputs& in, double prefill_tokens, double prefill_seqs, double prefill_ctx,
                    double decode_seqs, double decode_ctx);
// Seconds to prefill n_requests prompts of input_len tokens together.
double prefill_s(const PerfInputs& in, double n_requests, double input_len);

struct LoadPoint {
  double concurrency = 0;                   // sequences in flight on this replica
  double ttft_ms = 0;                       // mean time to first token
  double tpot_ms = 0;                       // mean time per output token after the first
  double ttft_p50_ms = 0, ttft_p95_ms = 0;  // over requests
  double tpot_p50_ms = 0, tpot_p95_ms = 0;  // over requests (each request's mean TPOT)
  double queue_ms = 0;                      // mean wait before a request's prefill starts
  double output_tokens_per_s = 0;           // this replica
  double requests_per_s = 0;                // this replica
  bool stable = true;                       // false: the arrival rate exceeds what the replica serves
};

LoadPoint predict_load(const PerfInputs& in, double concurrency, int64_t input_len, int64_t output_len);

}  // namespace parallm::planner
