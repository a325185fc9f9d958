// ModelConfig: the one description of a checkpoint's architecture, parsed
// once from whichever format it came in (GGUF metadata: gguf_config.h, HF
// config.json: hf_config.h, llama2.c header), validated by finalize(), then
// passed around by const reference. The engine and the planner read the same
// description: a feature the engine cannot run is kept by name in
// `unsupported`, which the engine refuses (require_supported) and the planner
// plans around. Glossary: docs/ARCHITECTURE.md ("Glossary").
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace parallm {

// Mistral and Mixtral are Llama-family. Qwen3 adds per-head q/k RMSNorm;
// Qwen2-MoE adds a shared expert behind a sigmoid gate; Qwen3-MoE is Qwen3
// with routed experts only. Gemma 2 and 3 (text) differ in more places: see
// the Gemma block of ModelConfig.
// Phi-3 fuses Q/K/V and gate/up into single matrices and extends its
// context with LongRoPE.
// DeepSeek-V2/V3 attend through a low-rank latent (MLA) and route over
// shared and grouped experts after some dense layers.
enum class Architecture { kLlama, kQwen2, kQwen3, kQwen2Moe, kQwen3Moe, kGemma2, kGemma3, kPhi3, kDeepseek2 };
enum class RouterScoring { kSoftmax, kSigmoid };
enum class FfnActivation { kSilu, kGeluTanh };  // SwiGLU, or GeGLU with the tanh GELU (Gemma)
enum class RopeStyle { kInterleaved, kHalf };   // pairs (2i,2i+1) vs (i, i+head_dim/2)
enum class RopeScaling { kNone, kLinear, kLlama3, kLongRope, kYarn };

struct ModelConfig {
  Architecture arch = Architecture::kLlama;
  std::string arch_name = "llama";
  int64_t n_vocab = 0;
  int64_t n_embd = 0;
  int64_t n_layer = 0;
  int64_t n_head = 0;
  int64_t n_kv_head = 0;
  int64_t head_dim = 0;       // derived: n_embd / n_head unless the file says otherwise
  int64_t n_ff = 0;           // dense FFN width, or each expert's FFN width for MoE
  int64_t n_expert = 0;       // 0 = dense
  int64_t n_expert_used = 0;  // router top-k
  // Router weights: softmax over all experts, then the top-k kept; true
  // rescales the kept k to sum to 1 (Mixtral, Qwen3-MoE), false keeps their
  // share of the full softmax (Qwen2-MoE).
  bool norm_topk_prob = true;
  int64_t n_ff_shared = 0;           // shared experts' FFN width, all of them together; 0 = none
  int64_t n_expert_shared = 0;       // how many experts n_ff_shared is made of (DeepSeek-V2: 2); 0 = none
  bool shared_expert_gated = false;  // Qwen2-MoE: scaled by sigmoid(h . ffn_gate_inp_shexp)
  // DeepSeek routing: scores by softmax or sigmoid (plus a per-expert bias
  // for the choice only, when the file has one), the top-k taken within the
  // best expert_groups_used of n_expert_groups groups, weights times routed_scale.
  RouterScoring router_scoring = RouterScoring::kSoftmax;
  bool router_bias = false;  // DeepSeek-V3's per-expert choice bias (exp_probs_b / e_score_correction_bias)
  int64_t n_expert_groups = 1;
  int64_t n_expert_groups_used = 1;
  float routed_scale = 1.0f;
  int64_t n_dense_lead = 0;  // leading layers with a dense FFN of n_ff_dense (DeepSeek)
  int64_t n_ff_dense = 0;    // (a Qwen-MoE file states its unused dense width here too)

  // Multi-head latent attention (DeepSeek-V2/V3). head_dim is the key head
  // (qk_nope_dim + qk_rope_dim); values have v_head_dim. The cache holds one
  // row per token: the normed latent [kv_lora_rank] and the roped shared key
  // part [qk_rope_dim].
  int64_t q_lora_rank = 0;   // 0: q straight from the hidden state
  int64_t kv_lora_rank = 0;  // 0: not MLA
  int64_t qk_nope_dim = 0, qk_rope_dim = 0, v_head_dim = 0;
  int64_t n_ctx_train = 0;  // context length in the file's metadata
  float rms_eps = 1e-5f;
  float rope_theta = 10000.0f;
  RopeStyle rope_style = RopeStyle::kInterleaved;
  RopeScaling rope_scaling = RopeScaling::kNone;
  float rope_factor = 1.0f;            // linear / llama3 scaling factor
  float rope_low_freq_factor = 1.0f;   // llama3
  float rope_high_freq_factor = 4.0f;  // llama3
  int64_t rope_original_ctx = 8192;    // llama3 / longrope original_max_position_embeddings
  // YaRN (DeepSeek): beta_fast / beta_slow bound the interpolated band;
  // the query scale gains mscale(mscale_all_dim)^2, cos / sin
  // mscale(mscale) / mscale(mscale_all_dim), mscale(m) = 0.1 m ln(factor) + 1.
  float yarn_beta_fast = 32.0f, yarn_beta_slow = 1.0f;
  float yarn_mscale = 1.0f, yarn_mscale_all_dim = 0.0f;
  // LongRoPE (Phi-3): per-frequency divisors [head_dim / 2], the long ones
  // for contexts past rope_original_ctx, and the factor cos / sin are scaled by.
  std::vector<float> rope_long_factors, rope_short_factors;
  float rope_attn_factor = 1.0f;
  bool qkv_bias = false;  // Qwen2
  bool qk_norm = false;   // Qwen3, Gemma 3: RMSNorm over each q and k head before RoPE

  // Gemma. Norm weights are the effective ones (Gemma's HF checkpoints store
  // w - 1; the loader adds the 1, as llama.cpp's converter does).
  FfnActivation ffn_act = FfnActivation::kSilu;
  bool post_norms = false;              // RMSNorm of the attention and FFN outputs before each residual add
  float embd_scale = 0.0f;              // token embeddings times this (sqrt(n_embd)); 0 = 1
  float attn_scale = 0.0f;              // query scaling; 0 = 1 / sqrt(head_dim)
  float attn_softcap = 0.0f;            // scores -> cap * tanh(scores / cap) before the softmax; 0 = off
  float final_softcap = 0.0f;           // the same on the output logits
  int64_t sliding_window = 0;           // keys a sliding layer's query sees, itself included
  std::vector<uint8_t> sliding_layers;  // [n_layer] 1 = sliding window, 0 = global; empty = all global
  float rope_theta_swa = 0.0f;          // sliding layers' RoPE base, unscaled (Gemma 3); 0 = the global RoPE
  bool tied_embeddings = false;         // classifier shares token_embd
  bool fused_qkv = false;               // Phi-3: one attn_qkv [q_dim + 2 kv_dim, n_embd]
  bool fused_gate_up = false;           // Phi-3: ffn_up holds gate rows then up rows [2 n_ff, n_embd]

  // What the file asks for that the engine cannot run, one message each
  // ("hidden_act 'gelu' is not supported (...)"), in the order found.
  std::vector<std::string> unsupported;

  // Checks ranges and divisibility, fills derived fields; throws InputError.
  void finalize();
  // Throws InputError "<source>: <the first unsupported feature>" (and how
  // many more) unless the engine can run everything the file describes.
  void require_supported(const std::string& source) const;
  bool is_moe() const { return n_expert > 0; }
  bool has_shared_expert() const { return n_ff_shared > 0; }
  bool mla() const { return kv_lora_rank > 0; }
  bool is_moe_layer(int64_t layer) const { return is_moe() && layer >= n_dense_lead; }
  // The dense FFN width of a layer (the leading dense layers of a MoE model).
  int64_t dense_ff() const { return n_dense_lead > 0 ? n_ff_dense : n_ff; }
  // Dimensions RoPE turns: MLA's rope part, else the whole head.
  int64_t rope_dim() const { return mla() ? qk_rope_dim : head_dim; }
  // The paged cache per layer: heads, row width, and whether values are read
  // from the key rows (MLA's latent serves as both).
  int64_t kv_heads() const { return mla() ? 1 : n_kv_head; }
  int64_t kv_row_dim() const { return mla() ? kv_lora_rank + qk_rope_dim : head_dim; }
  bool kv_values_in_keys() const { return mla(); }
  // YaRN's cos / sin factor (1 otherwise).
  float rope_cos_sin_scale() const;
  bool is_sliding(int64_t layer) const {
    return !sliding_layers.empty() && sliding_layers[static_cast<size_t>(layer)] != 0;
  }
  float query_scale() const;
  // Layers l with l % pattern < pattern - 1 slide (llama.cpp's swa pattern:
  // Gemma 2 is 2, Gemma 3 is 6); pattern 0 = none.
  void set_sliding_pattern(int64_t pattern);
  // Rotary inverse frequencies [head_dim / 2], with rope scaling applied;
  // n_ctx (the engine's context) picks LongRoPE's long or short factors.
  std::vector<float> rope_inv_freq(int64_t n_ctx = 0) const;
  // Those of the sliding layers: rope_theta_swa unscaled when set, else the global ones.
  std::vector<float> rope_inv_freq_swa() const;
  std::string summary() const;
};

// llama.cpp's name of the architecture ("llama", "qwen2", "qwen3", "qwen2moe", "qwen3moe").
const char* architecture_name(Architecture a);
// LongRoPE's cos / sin factor when a file leaves it out (transformers' rule):
// sqrt(1 + ln(n_ctx / original) / ln(original)) for a longer context, else 1.
float longrope_attn_factor(int64_t n_ctx, int64_t original_ctx);
// What each architecture implies beyond the shapes: RoPE style, QKV bias,
// q/k norms, how the router weights its top-k. Both file formats call it
// before reading the fields a file may override.
void apply_architecture_defaults(ModelConfig* c);
// Maps a GGUF general.architecture / HF model_type to an Architecture;
// throws InputError listing the supported ones.
Architecture parse_architecture(const std::string& name);

}  // namespace parallm
