// LlamaModel: one rank's share of a Llama-family transformer (Llama 2/3,
// Mistral, Qwen2 with QKV bias, Qwen3 with q/k norms, Gemma 2/3, Phi-3,
// DeepSeek-V2/V3 with latent attention (model/mla.h), Mixtral-, Qwen- and
// DeepSeek-style MoE with shared experts), written rank-local:
// every size below is per rank (see model/shard.h), linear layers know whether
// they are column- or row-parallel, and the forward calls all_reduce itself.
//
//   x = embed(tokens)                               (first pipeline stage)
//   for each local layer:
//     h = rmsnorm(x) ; q,k,v = h Wq,Wk,Wv (+bias)   column-parallel, fused (DeepSeek: a = mla(h), model/mla.h)
//     q,k = rmsnorm per head (Qwen3)
//     rope(q, k) ; kv_write(k, v) ; a = attention(q, paged KV)
//       (Gemma: sliding window on some layers, scores soft-capped)
//     x += all_reduce(a Wo)                          row-parallel (Gemma: post-normed first)
//     h = rmsnorm(x) ; x += all_reduce(ffn(h))       dense: silu(h Wg) * (h Wu) Wd ; MoE: model/moe.h
//                                                    + sigmoid(h . g_shexp) * shared_ffn(h) (Qwen2-MoE)
//                                                    + shared_ffn(h) (DeepSeek), dense in its leading layers
//                                                    Gemma: gelu_tanh for silu, post-normed
//   x = embed(tokens) is scaled by sqrt(n_embd) for Gemma, its logits soft-capped (Gemma 2)
//   logits = rmsnorm(x) Wout                         (last stage, requested rows only)
#pragma once
#include <memory>
#include <optional>
#include <vector>

#include "comm/communicator.h"
#include "kernels/cpu/ops.h"
#include "loader/model_file.h"
#include "model/forward_batch.h"
#include "model/kv_pool.h"
#include "model/linear.h"
#include "model/mla.h"
#include "model/moe.h"
#include "model/shard.h"
#include "util/huge_pages.h"
#include "util/thread_pool.h"

namespace parallm {

struct LayerWeights {
  const float* attn_norm = nullptr;       // [n_embd]
  Linear wq, wk, wv;                      // column-parallel: [n_head_local*hd, n_embd], [n_kv_head_local*hd, n_embd]
  Linear wo;                              // row-parallel: [n_embd, n_head_local*hd]
  const float* q_norm = nullptr;          // [hd], Qwen3: every head shares it
  const float* k_norm = nullptr;          // [hd]
  const float* ffn_norm = nullptr;        // [n_embd]
  const float* post_attn_norm = nullptr;  // [n_embd], Gemma: on the attention output before the residual add
  const float* post_ffn_norm = nullptr;   // [n_embd], Gemma: on the FFN output
  Linear w_gate, w_up;                    // dense, column-parallel: [n_ff_local, n_embd]
  Linear w_down;                          // dense, row-parallel: [n_embd, n_ff_local]
  MlaWeights mla;                         // DeepSeek's latent attention, in place of wq / wk / wv
  bool moe_layer = false;                 // routed experts here (false: the dense FFN; DeepSeek's leading layers)
  MoeWeights moe;                         // MoE layers
  // Shared experts: a dense SwiGLU FFN over every token (DeepSeek's shared
  // experts as one), scaled by a per-token sigmoid gate in Qwen2-MoE; tp
  // splits it like the dense FFN.
  const float* shared_gate_inp = nullptr;  // [n_embd], replicated; null: no gate
  Linear shared_gate, shared_up;           // column-parallel: [n_ff_shared_local, n_embd]
  Linear shared_down;                      // row-parallel: [n_embd, n_ff_shared_local]
};

// Named intermediates of one forward (sized to the largest batch seen), so a
// test or a debugging session can dump and diff any of them. On huge pages:
// a prefill's GEMM writes its output 128 token rows at a time, one 4 KiB page
// each otherwise (util/huge_pages.h).
struct Activations {
  HugeVector<float> x;            // [n_tokens, n_embd] residual stream
  HugeVector<float> h;            // [n_tokens, n_embd] normed input of a sub-block
  HugeVector<float> q;            // [n_tokens, n_head_local * hd]
  HugeVector<float> k, v;         // [n_tokens, n_kv_head_local * hd]
  HugeVector<float> attn;         // [n_tokens, n_head_local * hd]
  HugeVector<float> proj;         // [n_tokens, n_embd] output of Wo / Wdown before the residual add
  HugeVector<float> gate, up;     // [n_tokens, max(n_ff_local, n_ff_shared_local)]
  HugeVector<float> shared;       // [n_tokens, n_embd] the shared expert's gated output
  HugeVector<float> last;         // [n_logits, n_embd] normed rows that produce logits
  HugeVector<float> pool_row;     // [n_embd] one normed row being added to a pooled sum
  HugeVector<float> rope_cs;      // [n_tokens, hd] RoPE cos / sin of the batch's positions, shared by all layers
  HugeVector<float> rope_cs_swa;  // [n_tokens, hd] the same for sliding layers with their own base (Gemma 3)
};

struct ModelOptions {
  ShardSpec shard;
  std::optional<DType> weight_dtype;  // --dtype: convert weights at load
  Communicator* tp_comm = nullptr;    // null when tp == 1
  Communicator* ep_comm = nullptr;    // null when ep == 1
  int64_t n_ctx = 0;                  // the engine's context: LongRoPE picks its factors by it
};

class LlamaModel {
 public:
  LlamaModel(const ModelFile& file, const ModelOptions& options);

  const ModelConfig& config() const { return config_; }
  const LocalShape& shape() const { return shape_; }
  int64_t n_local_layers() const { return shape_.layer_end - shape_.layer_begin; }
  size_t weight_bytes() const { return store_.resident_bytes(); }

  // Runs this rank's layers over the batch.
  //  hidden [n_tokens, n_embd]: on the first stage it is filled from the token
  //    embeddings; on later stages it holds the previous stage's output. On
  //    return it holds this stage's output (the residual stream).
  //  logits [logit_rows.size(), n_vocab]: written on the last stage only.
  //  pooled [n_pooled, n_embd]: last stage, with batch.pool_ranges: each
  //    range's sum of final-norm hidden states (what the logits would be
  //    computed from; no output matrix for them).
  void forward(const ForwardBatch& batch, KvPool& kv, float* hidden, float* logits, ThreadPool& pool,
               float* pooled = nullptr);

  Activations& activations() { return act_; }
  const MoeStats& moe_stats() const { return moe_stats_; }

 private:
  void embed(const ForwardBatch& batch, float* x);
  // x += attention(attn_norm(x)); leaves ffn_norm(x) in act_.h for ffn_block
  // (the residual add and the norm share one pass over the batch).
  void attention_block(int64_t l, const ForwardBatch& batch, KvPool& kv, float* x, ThreadPool& pool);
  // act_.attn [n_tokens, n_head_local * v] -> x += all_reduce(attn Wo),
  // then ffn_norm(x) into act_.h.
  void finish_attention(const LayerWeights& w, int64_t n_tokens, float* x, ThreadPool& pool);
  // x += ffn(act_.h).
  void ffn_block(int64_t l, int64_t n_tokens, float* x, ThreadPool& pool);
  // out [n_tokens, n_embd] = silu(h Wg) * (h Wu) Wd: this rank's columns of a
  // dense FFN (its partial sum under tp).
  void dense_ffn(float* out, const Linear& gate, const Linear& up, const Linear& down, int64_t n_ff_local,
                 int64_t n_tokens, ThreadPool& pool);
  // act_.shared = sigmoid(h . g) * shared_ffn(h): this rank's partial sum under tp.
  void shared_expert(const LayerWeights& w, int64_t n_tokens, ThreadPool& pool);
  void all_reduce_tp(float* data, size_t count);
  // pooled [n_pooled, n_embd]: see forward().
  void pool_hidden(const ForwardBatch& batch, const float* hidden, float* pooled);

  ModelConfig config_;
  LocalShape shape_;
  ModelOptions options_;
  WeightStore store_;
  const WeightTensor* token_embd_ = nullptr;  // [n_vocab, n_embd], read row by row
  std::vector<LayerWeights> layers_;          // [n_local_layers]
  const float* output_norm_ = nullptr;
  Linear output_;                    // [n_vocab, n_embd]
  std::vector<float> inv_freq_;      // [head_dim / 2]
  std::vector<float> inv_freq_swa_;  // [head_dim / 2] sliding layers' (Gemma 3); empty = inv_freq_
  cpu::RopeStyle rope_style_;
  Activations act_;
  MlaScratch mla_scratch_;
  MoeStats moe_stats_;
};

}  // namespace parallm
