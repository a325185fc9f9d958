// Performance model of one replica (tp x pp devices) of a layout.
//
// One forward pass on one pipeline stage is a sum of kernel classes, each at
// its roofline (time = max(bytes / bandwidth, FLOPs / peak), each at a fixed
// efficiency):
//   weight GEMMs  bytes = the stage's weight shard (MoE: only the experts the
//                 batch touches, E * (1 - (1 - k/E)^tokens)); FLOPs = 2 x active
//                 params x tokens / tp
//   attention     decode: KV bytes of every sequence's context; prefill: FLOPs
//                 2 x n_layer x n_head x head_dim x len^2 (causal half of QK^T and PV)
//   tp all-reduce two per layer, ring: 2 (tp-1)/tp x bytes / link + latency
//   ep all-to-all dispatch and combine of top-k token copies
//   launches      a fixed cost per layer
// Pipeline: the batch is split into m = min(batch, pp) micro-batches; a token
// takes pp stage times plus pp-1 hand-offs (bubbles when batch < pp).
// Serving at concurrency C with fixed input/output lengths (closed loop, the
// way benchmark tables are taken): a round is the prefill of C prompts plus
// `output` decode steps at batch C with mean context input + output/2.
#pragma once
#include <cstdint>

#include "planner/fabric.h"
#include "planner/memory_model.h"

namespace parallm::planner {

// Global efficiency factors: chosen once for all GPUs and models (docs/plan.md
// explains how and lists the resulting errors); --calibrate replaces them.
struct PerfConstants {
  double bw_eff = 0.80;          // achieved / datasheet memory bandwidth
  double flops_eff = 0.60;       // achieved / datasheet dense tensor throughput
  double link_eff = 0.75;        // achieved / nominal link bandwidth
  double layer_overhead_us = 10; // launches per layer per forward
  // Attention's own efficiencies (KV reads in decode, causal FLOPs in prefill);
  // 0 = the weight GEMMs' bw_eff / flops_eff. Only --calibrate sets them: the
  // CPU engine's attention runs far below its matmuls (docs/plan.md).
  double attn_bw_eff = 0;
  double attn_flops_eff = 0;
  double request_overhead_ms = 4;  // scheduling, sampling, detokenize per request (TTFT)
};

struct PerfInputs {
  const ModelSpec* model = nullptr;
  ParamCounts params;
  WeightFormat weights;
  double kv_elem_bytes = 2;
  double act_elem_bytes = 2;
  GpuSpec gpu;
  Layout layout;
  GroupLink tp_link;       // links inside the tp group
  GroupLink pp_link;       // links between stages
  DeviceMemory memory;     // from device_memory()
  PerfConstants k;
};

// Seconds of one decode step for `batch` sequences of mean context `ctx` (TPOT).
double decode_step_s(const PerfInputs& in, double batch, double ctx);
// Seconds to prefill n_requests prompts of input_len tokens together.
double prefill_s(const PerfInputs& in, double n_requests, double input_len);

struct LoadPoint {
  double concurrency = 0;        // sequences in flight on this replica
  double ttft_ms = 0;            // mean time to first token
  double tpot_ms = 0;            // time per output token after the first
  double output_tokens_per_s = 0;  // this replica
  double requests_per_s = 0;     // this replica
};

LoadPoint predict_load(const PerfInputs& in, double concurrency, int64_t input_len, int64_t output_len);

// Largest concurrency <= limit meeting both SLOs (<= 0: no SLO); 0 if even one
// sequence misses them.
int64_t max_concurrency_at_slo(const PerfInputs& in, int64_t limit, int64_t input_len, int64_t output_len,
                               double ttft_slo_ms, double tpot_slo_ms);

}  // namespace parallm::planner
