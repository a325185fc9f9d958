// DeviceLlamaModel: one rank's share of a Llama-family transformer on a
// device (a CUDA GPU, or the emulated device in CI), the twin of LlamaModel
// (llama_model.h). It shares everything that is plain data with the CPU
// model: ModelConfig, the shard (local_shape) and the weight plan
// (weight_plan.h), ForwardBatch, the KV layout and block ids (a block
// table means the same rows on either backend), and the sampler (logits come
// back to host memory). Weights are uploaded once in their stored dtype
// (f32, f16, bf16, q8_0; q4_0 / q4_k / q6_k are dequantized to f16 on the
// device), activations and the paged KV cache stay on the device, and each
// forward runs the kernels of kernels/cuda through the backend's KernelSet.
//
//   x = embed(tokens)                                       (first stage; later stages upload x)
//   h = rmsnorm(x)                                          layer 0's attn_norm
//   for each local layer:
//     q,k,v = h Wq,Wk,Wv (+bias) ; q,k = rmsnorm per head (Qwen3) ; rope(q, k)
//     kv_write(k, v) ; a = paged_attention(q)
//     p = all_reduce(a Wo) ; h = rmsnorm(x += p)            ffn_norm, fused with the residual add
//     p = all_reduce(ffn(h))                                dense SwiGLU, or MoE: top-k, gather, experts, scatter-add
//     h = rmsnorm(x += p)                                   the next layer's attn_norm (last: output_norm)
//   logits = gather(h, logit rows) Wout                     (last stage; downloaded)
// Under ep every rank routes all tokens, runs the experts it owns and the
// group's all-reduce sums the parts (the CPU model exchanges tokens with
// all_to_all instead; the sums are the same).
//
// A synthetic file (bench-model --synthetic) has no weights to read: each is
// filled on the device with valid values of its dtype (norm weights 1,
// biases 0), a benchmark's model, not a language model.
//
// Not on devices yet (check_device_support names them): DeepSeek's latent
// attention, Gemma (GeGLU, post-norms, scaled embeddings), shared experts,
// grouped expert routing, and --dtype conversion at load.
#pragma once
#include <map>
#include <memory>
#include <vector>

#include "config/model_config.h"
#include "loader/model_file.h"
#include "model/device_backend.h"
#include "model/forward_batch.h"
#include "model/llama_model.h"
#include "model/moe.h"
#include "model/shard.h"

namespace parallm {

// Throws InputError ("... is not on CUDA devices yet ...") when the model or
// the options need what the device model does not run.
void check_device_support(const ModelConfig& c, const ModelOptions& options, const std::string& device);

// A weight matrix in device memory: [n_out, n_in] rows in `dtype`.
struct DeviceMatrix {
  DeviceArray<uint8_t> data;
  DType dtype = DType::kF32;
  int64_t n_out = 0, n_in = 0;
  DeviceArray<float> bias;  // [n_out] or empty
  const float* bias_ptr() const { return bias.size() > 0 ? bias.data() : nullptr; }
};

struct DeviceLayer {
  DeviceArray<float> attn_norm, q_norm, k_norm, ffn_norm;  // [n_embd] ([head_dim] for q / k)
  DeviceMatrix wq, wk, wv, wo;                             // as LayerWeights
  bool moe_layer = false;
  DeviceMatrix w_gate, w_up, w_down;  // dense FFN
  DeviceMatrix router;                // [n_expert, n_embd]
  DeviceArray<float> router_bias;     // [n_expert] or empty
  int64_t expert_begin = 0;
  std::vector<DeviceMatrix> expert_gate, expert_up, expert_down;  // per owned expert
};

// The device's paged KV cache: per local layer K and V pools in the layout
// of cuda::PagedKv (the CPU's), one allocation each.
struct DeviceKvCache {
  DeviceArray<uint8_t> memory;  // [n_layers][K, V][layer_bytes]
  int64_t n_blocks = 0, block_size = 16, n_kv_head = 0, head_dim = 0;
  DType dtype = DType::kF16;
  size_t layer_bytes = 0;
  cuda::PagedKv layer(int64_t local_layer) const;
};

class DeviceLlamaModel {
 public:
  DeviceLlamaModel(const ModelFile& file, const ModelOptions& options, DeviceBackend& backend);

  const ModelConfig& config() const { return config_; }
  const LocalShape& shape() const { return shape_; }
  int64_t n_local_layers() const { return shape_.layer_end - shape_.layer_begin; }
  size_t weight_bytes() const { return weight_bytes_; }
  const MoeStats& moe_stats() const { return moe_stats_; }
  DeviceBackend& backend() { return backend_; }

  // A fresh, zeroed cache of n_blocks blocks (the old one is freed first).
  void make_kv_cache(int64_t n_blocks, int64_t block_size, DType dtype);
  int64_t kv_blocks() const { return kv_.n_blocks; }
  size_t kv_bytes() const { return kv_.memory.bytes(); }

  // As LlamaModel::forward, with host buffers: hidden [n_tokens, n_embd] is
  // read on later stages and written on all but the last; logits
  // [logit_rows, n_vocab] and pooled [n_pooled, n_embd] on the last stage.
  void forward(const ForwardBatch& batch, float* hidden, float* logits, float* pooled);

 private:
  void upload_matrix(DeviceMatrix& m, const MatrixPiece& p);
  // Synthetic models (ModelFile::synthetic): `bytes` of valid `dtype` values
  // at device pointer dst, tiled from a pool made once per dtype.
  void fill_synthetic(void* dst, DType dtype, size_t bytes);
  // synthetic_value: what a synthetic model's vector holds (norm weights 1, biases 0).
  void upload_vector(DeviceArray<float>& v, const VectorPiece& p, int64_t n, const std::string& what,
                     float synthetic_value = 1.0f);
  void upload_batch(const ForwardBatch& batch);
  // out [n, m.n_out] = x [n, m.n_in] W^T (+ bias).
  void linear(float* out, const DeviceMatrix& m, const float* x, int64_t n);
  void attention(int64_t l, const ForwardBatch& batch);
  void dense_ffn(const DeviceLayer& w, int64_t n);
  void moe_ffn(const DeviceLayer& w, int64_t n);
  void all_reduce(Communicator* comm, float* data, size_t count);

  ModelConfig config_;
  LocalShape shape_;
  ModelOptions options_;
  DeviceBackend& backend_;
  size_t weight_bytes_ = 0;
  DeviceArray<uint8_t> token_embd_;  // [n_vocab, n_embd] in embd_dtype_ (first stage)
  DType embd_dtype_ = DType::kF32;
  std::vector<DeviceLayer> layers_;
  DeviceArray<float> output_norm_;
  DeviceMatrix output_;               // [n_vocab, n_embd]
  bool output_is_embedding_ = false;  // tied and on the same rank: output_ reads token_embd_
  std::vector<float> inv_freq_, inv_freq_swa_;
  cuda::RopeStyle rope_style_ = cuda::RopeStyle::kInterleaved;
  DeviceKvCache kv_;
  MoeStats moe_stats_;
  bool synthetic_ = false;
  std::map<DType, DeviceArray<uint8_t>> synthetic_pools_;

  // Per-step inputs and activations, grown to the largest batch seen.
  struct Step {
    DeviceArray<int32_t> tokens, positions, seq_of_token, tables, logit_rows;
    DeviceArray<int64_t> slots;
    DeviceArray<float> rope_cs, rope_cs_swa;  // [n_tokens, head_dim]
    DeviceArray<float> x, h, q, k, v, attn, proj, gate, up, last, logits;
    DeviceArray<float> router_logits, topk_weights, expert_weights, expert_x, expert_out;
    DeviceArray<int32_t> topk_ids, expert_rows;
    int64_t max_blocks_per_seq = 0;
    std::vector<float> host_cs, host_cs_swa, host_h;
    std::vector<int32_t> host_ids, host_tables, host_rows;  // host_rows: one expert's tokens
    std::vector<float> host_weights, host_row_weights;
    std::vector<int64_t> host_used;  // blocks each sequence uses this step
  } s_;
};

}  // namespace parallm
