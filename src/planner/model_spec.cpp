// Exact parameter and KV-cache arithmetic of model_spec.h. Integers only, so
// the results can be compared with the counts published on model cards.
#include "planner/model_spec.h"

#include "util/check.h"

namespace parallm::planner {

void validate_model(const ModelSpec& m) {
  const ModelConfig& c = m.config;
  auto need = [&](int64_t v, const char* field) {
    if (v <= 0) throw InputError("model '" + m.name + "': missing or non-positive " + field);
  };
  need(c.n_layer, "num_hidden_layers");
  need(c.n_embd, "hidden_size");
  need(c.n_head, "num_attention_heads");
  need(c.n_kv_head, "num_key_value_heads");
  need(c.n_vocab, "vocab_size");
  if (!c.mla()) need(c.head_dim, "head_dim");
  if (c.n_head % c.n_kv_head != 0)
    throw InputError("model '" + m.name + "': num_attention_heads is not a multiple of num_key_value_heads");
  if (c.is_moe()) {
    need(c.n_expert_used, "num_experts_per_tok");
    need(c.n_ff, "moe_intermediate_size");
    if (c.n_expert_used > c.n_expert)
      throw InputError("model '" + m.name + "': num_experts_per_tok exceeds the number of experts");
    if (c.n_dense_lead > 0) need(c.n_ff_dense, "intermediate_size");
  } else {
    need(c.n_ff, "intermediate_size");
  }
  if (c.mla()) {
    need(c.qk_rope_dim, "qk_rope_head_dim");
    need(c.qk_nope_dim, "qk_nope_head_dim");
    need(c.v_head_dim, "v_head_dim");
  }
}

ModelSpec spec_from_config(const ModelConfig& c, const std::string& name) {
  ModelSpec m;
  m.name = name;
  m.arch = c.arch_name;
  if (!c.unsupported.empty()) m.engine_refusal = c.unsupported.front();
  m.config = c;
  validate_model(m);
  return m;
}

ParamCounts count_params(const ModelSpec& m) {
  const ModelConfig& c = m.config;
  ParamCounts p;
  const int64_t e = c.n_embd;
  p.embedding = c.n_vocab * e;
  p.lm_head = c.tied_embeddings ? 0 : c.n_vocab * e;
  if (c.mla()) {
    const int64_t qk_hd = c.qk_nope_dim + c.qk_rope_dim;
    int64_t q =
        c.q_lora_rank > 0 ? e * c.q_lora_rank + c.q_lora_rank + c.q_lora_rank * c.n_head * qk_hd : e * c.n_head * qk_hd;
    int64_t kv = e * (c.kv_lora_rank + c.qk_rope_dim) + c.kv_lora_rank +
                 c.kv_lora_rank * c.n_head * (c.qk_nope_dim + c.v_head_dim);
    int64_t o = c.n_head * c.v_head_dim * e;
    p.attention_per_layer = q + kv + o;
  } else {
    const int64_t q = c.n_head * c.head_dim, kv = c.n_kv_head * c.head_dim;
    p.attention_per_layer = e * q + 2 * e * kv + q * e;
    if (c.qkv_bias) p.attention_per_layer += q + 2 * kv;
    if (c.qk_norm) p.attention_per_layer += 2 * c.head_dim;
  }
  const int64_t n_dense = c.is_moe() ? c.n_dense_lead : c.n_layer;
  const int64_t n_moe = n_moe_layers(c);
  if (n_dense > 0) p.dense_mlp_per_layer = 3 * e * c.dense_ff();
  if (c.is_moe()) {
    p.expert = 3 * e * c.n_ff;
    p.moe_shared_per_layer = 3 * e * c.n_ff_shared + e * c.n_expert;
    if (c.router_bias) p.moe_shared_per_layer += c.n_expert;
    if (c.shared_expert_gated) p.moe_shared_per_layer += e;
  }
  p.norms_per_layer = (c.post_norms ? 4 : 2) * e;  // Gemma: also after attention and after the FFN
  p.final_norm = e;
  const int64_t common = c.n_layer * (p.attention_per_layer + p.norms_per_layer) + p.embedding + p.lm_head +
                         p.final_norm + n_dense * p.dense_mlp_per_layer + n_moe * p.moe_shared_per_layer;
  p.routed_experts_total = n_moe * c.n_expert * p.expert;
  p.total = common + p.routed_experts_total;
  p.active = common + n_moe * c.n_expert_used * p.expert;
  return p;
}

double kv_bytes_per_token(const ModelSpec& m, double kv_elem_bytes) {
  const ModelConfig& c = m.config;
  const int64_t per_layer = c.kv_heads() * c.kv_row_dim() * (c.kv_values_in_keys() ? 1 : 2);
  return static_cast<double>(c.n_layer * per_layer) * kv_elem_bytes;
}

// MLA's key heads are qk_nope + qk_rope wide (head_dim), its value heads v_head_dim.
int64_t attn_qk_width(const ModelSpec& m) { return m.config.n_head * m.config.head_dim; }
int64_t attn_v_width(const ModelSpec& m) {
  return m.config.n_head * (m.config.mla() ? m.config.v_head_dim : m.config.head_dim);
}

}  // namespace parallm::planner
