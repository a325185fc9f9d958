// GGUF -> ModelSpec through parallm::GgufFile (loader/): the ARCH.* keys
// llama.cpp writes (block_count, embedding_length, attention.head_count[_kv],
// attention.key_length, feed_forward_length, expert_count, expert_used_count,
// expert_feed_forward_length, expert_shared_count, leading_dense_block_count,
// attention.kv_lora_rank, attention.q_lora_rank, rope.dimension_count), the
// tensors present (output.weight absent = tied; attn_q.bias = q/k/v biases;
// attn_q_norm = q/k norms), and the exact bytes of all tensors.
#include <map>

#include "planner/model_source.h"
#include "util/check.h"

#ifdef PARALLM_HAVE_LOADER
#include "core/dtype.h"
#include "loader/gguf_reader.h"
#endif

namespace parallm::planner {

ModelSpec model_from_gguf(const std::string& path) {
#ifndef PARALLM_HAVE_LOADER
  throw InputError(path + ": this build has no GGUF reader (parallm_loader)");
#else
  GgufFile f(path);
  const std::string arch = f.get_string("general.architecture");
  auto key = [&](const char* k) { return arch + "." + k; };
  ModelSpec m;
  m.name = f.get_string_opt("general.name").value_or(path);
  m.n_layer = f.get_int(key("block_count"));
  m.n_embd = f.get_int(key("embedding_length"));
  m.n_head = f.get_int(key("attention.head_count"));
  m.n_kv_head = f.get_int_opt(key("attention.head_count_kv")).value_or(m.n_head);
  m.head_dim = f.get_int_opt(key("attention.key_length")).value_or(m.n_head > 0 ? m.n_embd / m.n_head : 0);
  m.n_ff = f.get_int_opt(key("feed_forward_length")).value_or(0);
  m.max_position = f.get_int_opt(key("context_length")).value_or(0);
  m.n_vocab = f.get_int_opt(key("vocab_size")).value_or(0);
  if (m.n_vocab == 0 && f.has("tokenizer.ggml.tokens"))
    m.n_vocab = static_cast<int64_t>(f.array_length("tokenizer.ggml.tokens"));
  if (const GgufTensorInfo* emb = f.find_tensor("token_embd.weight");
      emb != nullptr && emb->ne.size() == 2 && m.n_vocab == 0)
    m.n_vocab = emb->ne[1];
  m.tied_embeddings = f.find_tensor("output.weight") == nullptr;
  m.attn_bias = f.find_tensor("blk.0.attn_q.bias") != nullptr;
  m.qk_norm = f.find_tensor("blk.0.attn_q_norm.weight") != nullptr;
  m.n_expert = f.get_int_opt(key("expert_count")).value_or(0);
  if (m.n_expert > 0) {
    m.n_expert_used = f.get_int_opt(key("expert_used_count")).value_or(0);
    m.n_ff_expert = f.get_int_opt(key("expert_feed_forward_length")).value_or(m.n_ff);
    m.n_shared_expert = f.get_int_opt(key("expert_shared_count")).value_or(0);
    m.n_dense_layers = f.get_int_opt(key("leading_dense_block_count")).value_or(0);
  }
  m.kv_lora_rank = f.get_int_opt(key("attention.kv_lora_rank")).value_or(0);
  if (m.kv_lora_rank > 0) {
    m.q_lora_rank = f.get_int_opt(key("attention.q_lora_rank")).value_or(0);
    m.qk_rope_head_dim = f.get_int_opt(key("rope.dimension_count")).value_or(0);
    m.qk_nope_head_dim = m.head_dim - m.qk_rope_head_dim;
    m.v_head_dim = f.get_int_opt(key("attention.value_length")).value_or(0);
    m.head_dim = 0;
  }
  // Exact stored bytes and the dominant matrix type.
  int64_t bytes = 0;
  std::map<uint32_t, int64_t> by_type;
  for (const auto& t : f.tensors()) {
    bytes += static_cast<int64_t>(t.nbytes);
    if (t.ne.size() >= 2) by_type[t.ggml_type] += static_cast<int64_t>(t.nbytes);
  }
  m.file_weight_bytes = bytes;
  uint32_t dominant = 0;
  int64_t most = -1;
  for (auto [type, n] : by_type)
    if (n > most) {
      most = n;
      dominant = type;
    }
  m.file_weight_type = ggml_type_name(dominant);
  try {
    validate_model(m);
  } catch (const InputError& e) {
    std::string msg = e.what();
    throw InputError(path + ": " + msg.substr(msg.find(": ") + 2));
  }
  return m;
#endif
}

}  // namespace parallm::planner
