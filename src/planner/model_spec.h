// The planner's view of a model: the description the engine reads
// (config/model_config.h) plus where it came from, and the exact counts
// derived from it: parameters (total and active per token), KV-cache bytes
// per token. Glossary names as in docs/ and ModelConfig: n_layer, n_embd,
// n_head, n_kv_head, head_dim, n_ff, n_vocab, n_expert, n_expert_used.
//
// Parameter count per layer (Llama/Qwen/Mistral family, SwiGLU MLP):
//   attention  n_embd*n_head*head_dim (q) + 2*n_embd*n_kv_head*head_dim (k, v)
//              + n_head*head_dim*n_embd (o) [+ q/k/v biases] [+ q/k norms]
//   MLA        q_a, q_b (or q), kv_a (latent + rope key), kv_b, o, two latent norms
//   MLP        3*n_embd*n_ff (gate, up, down); MoE: n_expert such blocks of the
//              experts' n_ff, the shared experts (n_ff_shared wide together),
//              router n_embd*n_expert [+ n_expert router bias: DeepSeek-V3's
//              e_score_correction_bias] [+ n_embd shared-expert gate: Qwen2-MoE];
//              MoE models' leading dense layers are n_ff_dense wide
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
  // (GGUF general.architecture / HF model_type; "" for catalog models, whose
  // numbers are published ones, not a file the engine read), and why
  // parallm's own engine would refuse it ("" = it would run it).
  std::string arch;
  std::string engine_refusal;
  // The shapes, finalized: what the engine reads from the file, or the
  // catalog's published config.json values.
  ModelConfig config;
  // Set when weights come from a file whose exact size is known (GGUF).
  int64_t file_weight_bytes = 0;
  std::string file_weight_type;  // "q4_k" etc. from the file
};

// Layers with routed experts: all but a MoE model's leading dense ones.
inline int64_t n_moe_layers(const ModelConfig& c) { return c.is_moe() ? c.n_layer - c.n_dense_lead : 0; }

// Throws InputError naming the first missing or inconsistent field.
void validate_model(const ModelSpec& m);

// The planner's view of a model description (config/model_config.h), which
// the engine reads too: one HF reader and one GGUF mapping feed both.
ModelSpec spec_from_config(const ModelConfig& c, const std::string& name);

// Parameter groups, exact integers.
struct ParamCounts {
  int64_t embedding = 0;  // input embedding
  int64_t lm_head = 0;    // 0 when tied
  int64_t attention_per_layer = 0;
  int64_t dense_mlp_per_layer = 0;   // one dense layer's (all layers of a dense model); 0 when none is dense
  int64_t expert = 0;                // one routed expert
  int64_t moe_shared_per_layer = 0;  // shared experts + router of one MoE layer
  int64_t norms_per_layer = 0;
  int64_t final_norm = 0;
  int64_t total = 0;
  int64_t active = 0;                // per token: routed experts counted n_expert_used times
  int64_t routed_experts_total = 0;  // all routed-expert weights (what EP spreads)
};
ParamCounts count_params(const ModelSpec& m);

// Bytes of KV cache one token adds over all layers, as the engine's paged
// cache stores it: 2 * n_layer * n_kv_head * head_dim * bytes, or
// n_layer * (kv_lora_rank + qk_rope_dim) * bytes for MLA.
double kv_bytes_per_token(const ModelSpec& m, double kv_elem_bytes);

// Attention "width" used for FLOP counts: n_head * qk head dim and n_head * v head dim.
int64_t attn_qk_width(const ModelSpec& m);
int64_t attn_v_width(const ModelSpec& m);

}  // namespace parallm::planner
