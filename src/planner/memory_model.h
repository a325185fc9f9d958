// Per-device memory of one candidate layout (dp x tp x pp, ep for MoE):
//   weights     the device's shard: ceil(n_layer/pp) layers' weights / tp
//               (routed experts / max(tp, ep)), plus the vocab-parallel embedding
//               and/or lm_head on the first/last stage
//   activation  the peak of one forward over the batch token budget
//               (max_num_batched_tokens) plus fp32 logits of max_num_seqs rows
//   overhead    CUDA context, CUDA graphs, communication buffers
//   kv          whatever is left under the utilization cap
//               (gpu_memory_utilization x device memory), like vLLM's pool
// KV per token per device: the layers of the stage x (KV heads / tp, at least
// one head when tp > n_kv_head: heads are replicated) x head_dim x 2; for MLA
// the compressed latent, which every tp rank keeps whole.
#pragma once
#include <cstdint>

#include "planner/hardware.h"
#include "planner/model_spec.h"

namespace parallm::planner {

struct Layout {
  int dp = 1;
  int tp = 1;
  int pp = 1;
  int ep = 1;
  int gpus() const { return dp * tp * pp; }
  int gpus_per_replica() const { return tp * pp; }
};

struct MemoryOptions {
  double gpu_memory_utilization = 0.90;
  int64_t max_num_batched_tokens = 8192;
  int64_t max_num_seqs = 256;
  double activation_elem_bytes = 2;  // bf16 activations (4 on the CPU engine)
};

struct DeviceMemory {
  double capacity_bytes = 0;  // device memory
  double usable_bytes = 0;    // capacity x utilization cap
  double weights_bytes = 0;
  double kv_bytes = 0;  // KV pool (>= 0)
  double activation_bytes = 0;
  double overhead_bytes = 0;
  double total_bytes = 0;          // weights + kv + activation + overhead
  double kv_bytes_per_token = 0;   // this device's share of one token's KV
  int64_t kv_capacity_tokens = 0;  // tokens of KV one replica holds
  int64_t layers_per_stage = 0;
  bool weights_fit = false;  // weights + activation + overhead under the cap
  bool fits = false;         // and KV for at least one max_model_len sequence
};

// Bytes of one stored weight, averaged over the model (a GGUF file's exact
// size when known, else bits_per_weight / 8).
double weight_bytes_per_param(const ModelSpec& m, const ParamCounts& p, const WeightFormat& w);
double model_weight_bytes(const ModelSpec& m, const ParamCounts& p, const WeightFormat& w);

DeviceMemory device_memory(const ModelSpec& m, const ParamCounts& p, const WeightFormat& w, double kv_elem_bytes,
                           const GpuSpec& gpu, const Layout& layout, const MemoryOptions& opt, int64_t max_model_len);

}  // namespace parallm::planner
