// Exact parameter and KV-cache arithmetic of model_spec.h. Integers only, so
// the results can be compared with the counts published on model cards.
#include "planner/model_spec.h"

#include "util/check.h"

namespace parallm::planner {

void validate_model(const ModelSpec& m) {
  auto need = [&](int64_t v, const char* field) {
    if (v <= 0) throw InputError("model '" + m.name + "': missing or non-positive " + field);
  };
  need(m.n_layer, "num_hidden_layers");
  need(m.n_embd, "hidden_size");
  need(m.n_head, "num_attention_heads");
  need(m.n_kv_head, "num_key_value_heads");
  need(m.n_vocab, "vocab_size");
  if (!m.is_mla()) need(m.head_dim, "head_dim");
  if (m.n_head % m.n_kv_head != 0)
    throw InputError("model '" + m.name + "': num_attention_heads is not a multiple of num_key_value_heads");
  if (m.is_moe()) {
    need(m.n_expert_used, "num_experts_per_tok");
    need(m.n_ff_expert, "moe_intermediate_size");
    if (m.n_expert_used > m.n_expert)
      throw InputError("model '" + m.name + "': num_experts_per_tok exceeds the number of experts");
    if (m.n_dense_layers > 0) need(m.n_ff, "intermediate_size");
  } else {
    need(m.n_ff, "intermediate_size");
  }
  if (m.is_mla()) {
    need(m.qk_rope_head_dim, "qk_rope_head_dim");
    need(m.qk_nope_head_dim, "qk_nope_head_dim");
    need(m.v_head_dim, "v_head_dim");
  }
}

ModelSpec spec_from_config(const ModelConfig& c, const std::string& name) {
  ModelSpec m;
  m.name = name;
  m.arch = c.arch_name;
  if (!c.unsupported.empty()) m.engine_refusal = c.unsupported.front();
  m.n_layer = c.n_layer;
  m.n_embd = c.n_embd;
  m.n_head = c.n_head;
  m.n_kv_head = c.n_kv_head;
  m.head_dim = c.mla() ? 0 : c.head_dim;
  m.n_vocab = c.n_vocab;
  m.tied_embeddings = c.tied_embeddings;
  m.attn_bias = c.qkv_bias;
  m.qk_norm = c.qk_norm;
  m.post_norms = c.post_norms;
  m.max_position = c.n_ctx_train;
  // The dense MLP width: the leading dense layers' (DeepSeek), the one a
  // Qwen-MoE file states, or a dense model's.
  m.n_ff = c.n_ff_dense > 0 ? c.n_ff_dense : c.n_ff;
  if (c.is_moe()) {
    m.n_expert = c.n_expert;
    m.n_expert_used = c.n_expert_used;
    m.n_ff_expert = c.n_ff;
    if (c.n_ff_shared > 0) {
      m.n_shared_expert = c.n_expert_shared > 0 ? c.n_expert_shared : 1;
      m.n_ff_shared = c.n_ff_shared / m.n_shared_expert;
    }
    m.n_dense_layers = c.n_dense_lead;
    m.moe_router_bias = c.router_bias;
    m.shared_expert_gate = c.shared_expert_gated;
  }
  if (c.mla()) {
    m.q_lora_rank = c.q_lora_rank;
    m.kv_lora_rank = c.kv_lora_rank;
    m.qk_nope_head_dim = c.qk_nope_dim;
    m.qk_rope_head_dim = c.qk_rope_dim;
    m.v_head_dim = c.v_head_dim;
  }
  validate_model(m);
  return m;
}

ParamCounts count_params(const ModelSpec& m) {
  ParamCounts p;
  const int64_t e = m.n_embd;
  p.embedding = m.n_vocab * e;
  p.lm_head = m.tied_embeddings ? 0 : m.n_vocab * e;
  if (m.is_mla()) {
    const int64_t qk_hd = m.qk_nope_head_dim + m.qk_rope_head_dim;
    int64_t q =
        m.q_lora_rank > 0 ? e * m.q_lora_rank + m.q_lora_rank + m.q_lora_rank * m.n_head * qk_hd : e * m.n_head * qk_hd;
    int64_t kv = e * (m.kv_lora_rank + m.qk_rope_head_dim) + m.kv_lora_rank +
                 m.kv_lora_rank * m.n_head * (m.qk_nope_head_dim + m.v_head_dim);
    int64_t o = m.n_head * m.v_head_dim * e;
    p.attention_per_layer = q + kv + o;
  } else {
    const int64_t q = m.n_head * m.head_dim, kv = m.n_kv_head * m.head_dim;
    p.attention_per_layer = e * q + 2 * e * kv + q * e;
    if (m.attn_bias) p.attention_per_layer += q + 2 * kv;
    if (m.qk_norm) p.attention_per_layer += 2 * m.head_dim;
  }
  p.dense_mlp_per_layer = 3 * e * m.n_ff;
  if (m.is_moe()) {
    p.expert = 3 * e * m.n_ff_expert;
    const int64_t ff_shared = m.n_ff_shared > 0 ? m.n_ff_shared : m.n_ff_expert;
    p.moe_shared_per_layer = m.n_shared_expert * 3 * e * ff_shared + e * m.n_expert;
    if (m.moe_router_bias) p.moe_shared_per_layer += m.n_expert;
    if (m.shared_expert_gate) p.moe_shared_per_layer += e;
  }
  p.norms_per_layer = (m.post_norms ? 4 : 2) * e;  // Gemma: also after attention and after the FFN
  p.final_norm = e;
  const int64_t n_dense = m.is_moe() ? m.n_dense_layers : m.n_layer;
  const int64_t n_moe = m.n_moe_layers();
  const int64_t common = m.n_layer * (p.attention_per_layer + p.norms_per_layer) + p.embedding + p.lm_head +
                         p.final_norm + n_dense * p.dense_mlp_per_layer + n_moe * p.moe_shared_per_layer;
  p.routed_experts_total = n_moe * m.n_expert * p.expert;
  p.total = common + p.routed_experts_total;
  p.active = common + n_moe * m.n_expert_used * p.expert;
  return p;
}

double kv_bytes_per_token(const ModelSpec& m, double kv_elem_bytes) {
  if (m.is_mla()) return static_cast<double>(m.n_layer * (m.kv_lora_rank + m.qk_rope_head_dim)) * kv_elem_bytes;
  return static_cast<double>(2 * m.n_layer * m.n_kv_head * m.head_dim) * kv_elem_bytes;
}

int64_t attn_qk_width(const ModelSpec& m) {
  return m.is_mla() ? m.n_head * (m.qk_nope_head_dim + m.qk_rope_head_dim) : m.n_head * m.head_dim;
}
int64_t attn_v_width(const ModelSpec& m) { return m.is_mla() ? m.n_head * m.v_head_dim : m.n_head * m.head_dim; }

}  // namespace parallm::planner
