// The architecture facts the planner needs about a model, and the exact counts
// derived from them: parameters (total and active per token), KV-cache bytes
// per token. Glossary names as in docs/: n_layer, n_embd, n_head, n_kv_head,
// head_dim, n_ff, n_vocab, n_expert, n_expert_used.
//
// Parameter count per layer (Llama/Qwen/Mistral family, SwiGLU MLP):
//   attention  n_embd*n_head*head_dim (q) + 2*n_embd*n_kv_head*head_dim (k, v)
//              + n_head*head_dim*n_embd (o) [+ q/k/v biases] [+ q/k norms]
//   MLA        q_a, q_b (or q), kv_a (latent + rope key), kv_b, o, two latent norms
//   MLP        3*n_embd*n_ff (gate, up, down); MoE: n_expert such blocks of n_ff_expert,
//              shared experts, router n_embd*n_expert [+ n_expert router bias:
//              DeepSeek-V3's e_score_correction_bias] [+ n_embd shared-expert gate: Qwen2-MoE]
//   norms      2*n_embd (4*n_embd with Gemma's post-norms)
// plus embeddings n_vocab*n_embd (twice unless tied) and the final norm.
#pragma once
#include <cstdint>
#include <string>

#include "config/model_config.h"

namespace parallm::planner {

struct ModelSpec {
  std::string name;     // catalog name or the path it came from
  std::string hf_repo;  // "meta-llama/Llama-2-70b-hf" for launch commands ("" = use path)
  // From a file's description (spec_from_config): its architecture name
  // (GGUF general.architecture / HF model_type; "" for catalog models), and
  // why parallm's own engine would refuse it ("" = it would run it).
  std::string arch;
  std::string engine_refusal;
  int64_t n_layer = 0;
  int64_t n_embd = 0;
  int64_t n_head = 0;
  int64_t n_kv_head = 0;
  int64_t head_dim = 0;  // n_embd / n_head unless the config says otherwise
  int64_t n_ff = 0;      // dense MLP intermediate size
  int64_t n_vocab = 0;
  bool tied_embeddings = false;
  bool attn_bias = false;    // q/k/v projection biases (Qwen2)
  bool qk_norm = false;      // per-head q/k RMSNorm (Qwen3)
  bool post_norms = false;   // RMSNorms after attention and after the FFN too (Gemma 2/3)
  int64_t max_position = 0;  // context the model was trained for (0 = unknown)
  // Mixture of experts (n_expert == 0: dense).
  int64_t n_expert = 0;
  int64_t n_expert_used = 0;
  int64_t n_ff_expert = 0;
  int64_t n_shared_expert = 0;  // shared experts, each of n_ff_shared
  int64_t n_ff_shared = 0;
  int64_t n_dense_layers = 0;       // leading layers with a dense MLP (DeepSeek first_k_dense_replace)
  bool moe_router_bias = false;     // [n_expert] per MoE layer (DeepSeek-V3 e_score_correction_bias)
  bool shared_expert_gate = false;  // [1, n_embd] per MoE layer (Qwen2-MoE shared_expert_gate)
  // Multi-head latent attention (DeepSeek-V2/V3); kv_lora_rank > 0 enables it.
  int64_t q_lora_rank = 0;
  int64_t kv_lora_rank = 0;
  int64_t qk_nope_head_dim = 0;
  int64_t qk_rope_head_dim = 0;
  int64_t v_head_dim = 0;
  // Set when weights come from a file whose exact size is known (GGUF).
  int64_t file_weight_bytes = 0;
  std::string file_weight_type;  // "q4_k" etc. from the file

  bool is_moe() const { return n_expert > 0; }
  bool is_mla() const { return kv_lora_rank > 0; }
  int64_t n_moe_layers() const { return is_moe() ? n_layer - n_dense_layers : 0; }
};

// Throws InputError naming the first missing or inconsistent field.
void validate_model(const ModelSpec& m);

// The planner's counting view of a model description (config/model_config.h),
// which the engine reads too: one HF reader and one GGUF mapping feed both.
ModelSpec spec_from_config(const ModelConfig& c, const std::string& name);

// Parameter groups, exact integers.
struct ParamCounts {
  int64_t embedding = 0;  // input embedding
  int64_t lm_head = 0;    // 0 when tied
  int64_t attention_per_layer = 0;
  int64_t dense_mlp_per_layer = 0;   // dense layers (all layers of a dense model)
  int64_t expert = 0;                // one routed expert
  int64_t moe_shared_per_layer = 0;  // shared experts + router of one MoE layer
  int64_t norms_per_layer = 0;
  int64_t final_norm = 0;
  int64_t total = 0;
  int64_t active = 0;                // per token: routed experts counted n_expert_used times
  int64_t routed_experts_total = 0;  // all routed-expert weights (what EP spreads)
};
ParamCounts count_params(const ModelSpec& m);

// Bytes of KV cache one token adds over all layers: 2 * n_layer * n_kv_head *
// head_dim * bytes, or n_layer * (kv_lora_rank + qk_rope_head_dim) * bytes for MLA.
double kv_bytes_per_token(const ModelSpec& m, double kv_elem_bytes);

// Attention "width" used for FLOP counts: n_head * qk head dim and n_head * v head dim.
int64_t attn_qk_width(const ModelSpec& m);
int64_t attn_v_width(const ModelSpec& m);

}  // namespace parallm::planner
