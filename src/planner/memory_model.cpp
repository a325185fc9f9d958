// Arithmetic of memory_model.h. Overhead figures follow what vLLM-class
// servers report on start-up: ~0.5 GiB CUDA context, ~0.5 GiB of captured CUDA
// graphs, ~0.5 GiB NCCL/custom all-reduce buffers once a replica spans devices.
#include "planner/memory_model.h"

#include <algorithm>
#include <cmath>

#include "core/capacity.h"

namespace parallm::planner {

namespace {
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
}

double weight_bytes_per_param(const ModelSpec& m, const ParamCounts& p, const WeightFormat& w) {
  if (m.file_weight_bytes > 0 && p.total > 0)
    return static_cast<double>(m.file_weight_bytes) / static_cast<double>(p.total);
  return w.bits_per_weight / 8.0;
}

double model_weight_bytes(const ModelSpec& m, const ParamCounts& p, const WeightFormat& w) {
  if (m.file_weight_bytes > 0) return static_cast<double>(m.file_weight_bytes);
  return static_cast<double>(p.total) * w.bits_per_weight / 8.0;
}

DeviceMemory device_memory(const ModelSpec& m, const ParamCounts& p, const WeightFormat& w, double kv_elem_bytes,
                           const GpuSpec& gpu, const Layout& layout, const MemoryOptions& opt, int64_t max_model_len) {
  DeviceMemory d;
  const double bpp = weight_bytes_per_param(m, p, w);
  const ModelConfig& c = m.config;
  const int tp = layout.tp, pp = layout.pp;
  d.layers_per_stage = (c.n_layer + pp - 1) / pp;
  const double stage_frac = static_cast<double>(d.layers_per_stage) / static_cast<double>(c.n_layer);
  const double layer_params =
      static_cast<double>(p.total - p.embedding - p.lm_head - p.final_norm - p.routed_experts_total);
  const double ends = pp == 1 ? static_cast<double>(p.embedding + p.lm_head + p.final_norm)
                              : static_cast<double>(std::max(p.embedding, p.lm_head + p.final_norm));
  const double expert_split = std::max(tp, layout.ep);
  d.weights_bytes = bpp * ((layer_params * stage_frac + ends) / tp +
                           static_cast<double>(p.routed_experts_total) * stage_frac / expert_split);

  // KV share of one token on this device.
  double per_layer;
  if (c.mla()) {
    per_layer = static_cast<double>(c.kv_lora_rank + c.qk_rope_dim) * kv_elem_bytes;
  } else {
    const double kv_heads_local = std::max(1.0, static_cast<double>(c.n_kv_head) / tp);
    per_layer = 2.0 * kv_heads_local * static_cast<double>(c.head_dim) * kv_elem_bytes;
  }
  d.kv_bytes_per_token = per_layer * static_cast<double>(d.layers_per_stage);

  // Activation peak over the token budget, and the sampler's fp32 logits.
  // The FFN's width: the dense one the description states (a Qwen-MoE file
  // states one no layer uses, counted all the same), or the routed experts
  // used plus the shared ones when wider.
  const double tokens = static_cast<double>(std::max<int64_t>(1, opt.max_num_batched_tokens));
  double ff_local = static_cast<double>(c.n_ff_dense > 0 ? c.n_ff_dense : c.n_ff);
  if (c.is_moe()) {
    ff_local = std::max(ff_local, static_cast<double>(c.n_expert_used * c.n_ff + c.n_ff_shared));
  }
  ff_local /= tp;
  // q, and k and v of head_dim per KV head (MLA: one value per head, its k
  // and v being expanded from the cached latent).
  const int64_t kv_width = c.mla() ? 1 : c.head_dim;
  const double qkv_local = static_cast<double>(attn_qk_width(m) + 2 * c.n_kv_head * kv_width) / tp;
  d.activation_bytes =
      tokens * (4.0 * static_cast<double>(c.n_embd) + 2.0 * ff_local + qkv_local) * opt.activation_elem_bytes +
      static_cast<double>(opt.max_num_seqs) * static_cast<double>(c.n_vocab) / tp * 4.0;

  if (gpu.is_cpu) {
    d.overhead_bytes = 0.25 * kGiB;
  } else {
    d.overhead_bytes = 1.0 * kGiB + (layout.gpus_per_replica() > 1 ? 0.5 * kGiB : 0.0);
  }
  d.capacity_bytes = gpu.memory_bytes;
  // The engine's and serve's rule (core/capacity.h), in tokens of KV.
  const DeviceFit fit = fit_device(gpu.memory_bytes, opt.gpu_memory_utilization, d.weights_bytes, d.activation_bytes,
                                   d.overhead_bytes, d.kv_bytes_per_token, max_model_len);
  d.usable_bytes = fit.usable;
  d.weights_fit = fit.weights_fit;
  d.kv_bytes = fit.kv_bytes;
  d.kv_capacity_tokens = fit.kv_units;
  d.fits = fit.fits;
  d.total_bytes = d.weights_bytes + d.kv_bytes + d.activation_bytes + d.overhead_bytes;
  return d;
}

}  // namespace parallm::planner
