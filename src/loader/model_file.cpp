#include "loader/model_file.h"

#include "util/check.h"
#include "util/log.h"

namespace parallm {

int64_t WeightTensor::rows() const {
  int64_t r = 1;
  for (size_t i = 0; i + 1 < shape.size(); ++i) r *= shape[i];
  return r;
}

const WeightTensor* ModelFile::find(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

const WeightTensor& ModelFile::get(const std::string& name) const {
  const WeightTensor* t = find(name);
  if (t == nullptr) throw InputError("model '" + path + "' lacks the tensor '" + name + "'");
  return *t;
}

void ModelFile::add_tensor(WeightTensor t) {
  std::string name = t.name;
  tensors_[name] = std::move(t);
}

const uint8_t* ModelFile::own_buffer(std::vector<uint8_t> bytes) {
  buffers_.push_back(std::move(bytes));
  return buffers_.back().data();
}

ModelFile::ExpertMatrix ModelFile::expert_matrix(int64_t layer, const std::string& kind, int64_t e) const {
  std::string blk = "blk." + std::to_string(layer) + ".ffn_" + kind;
  if (const WeightTensor* merged = find(blk + "_exps.weight")) {
    int64_t rows = merged->shape[1], cols = merged->shape[2];
    size_t per_expert = static_cast<size_t>(rows) * dtype_row_bytes(merged->dtype, cols);
    return {merged->data + static_cast<size_t>(e) * per_expert, merged->dtype, rows, cols};
  }
  const WeightTensor& t = get(blk + "." + std::to_string(e) + ".weight");
  return {t.data, t.dtype, t.shape[0], t.shape[1]};
}

size_t ModelFile::weight_bytes() const {
  size_t total = 0;
  for (const auto& [name, t] : tensors_) total += t.nbytes;
  return total;
}

size_t ModelFile::streamed_weight_bytes() const {
  size_t total = weight_bytes();
  if (const WeightTensor* e = find("token_embd.weight")) {
    // A tied classifier streams the embedding table every step: keep it.
    if (!config.tied_embeddings) total -= e->nbytes;
  }
  return total;
}

void ModelFile::validate() const {
  const ModelConfig& c = config;
  auto expect = [&](const std::string& name, std::vector<int64_t> shape) {
    const WeightTensor& t = get(name);
    if (t.shape != shape) {
      std::string want, got;
      for (auto d : shape) want += (want.empty() ? "" : "x") + std::to_string(d);
      for (auto d : t.shape) got += (got.empty() ? "" : "x") + std::to_string(d);
      throw InputError("model '" + path + "': tensor '" + name + "' has shape " + got + ", expected " + want);
    }
    if (t.data == nullptr || t.nbytes != static_cast<size_t>(t.rows()) * t.row_bytes()) {
      throw InputError("model '" + path + "': tensor '" + name + "' has inconsistent size");
    }
  };
  const int64_t q_dim = c.n_head * c.head_dim, kv_dim = c.n_kv_head * c.head_dim;
  // DeepSeek's latent attention (model/mla.h).
  auto validate_mla = [&](const std::string& b) {
    const int64_t lora = c.kv_lora_rank, nope = c.qk_nope_dim, v = c.v_head_dim;
    if (c.q_lora_rank > 0) {
      expect(b + "attn_q_a.weight", {c.q_lora_rank, c.n_embd});
      expect(b + "attn_q_a_norm.weight", {c.q_lora_rank});
      expect(b + "attn_q_b.weight", {q_dim, c.q_lora_rank});
    } else {
      expect(b + "attn_q.weight", {q_dim, c.n_embd});
    }
    expect(b + "attn_kv_a_mqa.weight", {lora + c.qk_rope_dim, c.n_embd});
    expect(b + "attn_kv_a_norm.weight", {lora});
    if (find(b + "attn_kv_b.weight") != nullptr) {
      expect(b + "attn_kv_b.weight", {c.n_head * (nope + v), lora});
    } else {
      expect(b + "attn_k_b.weight", {c.n_head, lora, nope});
      expect(b + "attn_v_b.weight", {c.n_head, v, lora});
    }
  };
  expect("token_embd.weight", {c.n_vocab, c.n_embd});
  expect("output_norm.weight", {c.n_embd});
  if (!c.tied_embeddings) expect("output.weight", {c.n_vocab, c.n_embd});
  for (int64_t l = 0; l < c.n_layer; ++l) {
    std::string b = "blk." + std::to_string(l) + ".";
    expect(b + "attn_norm.weight", {c.n_embd});
    if (c.mla()) {
      validate_mla(b);
    } else if (c.fused_qkv) {
      expect(b + "attn_qkv.weight", {q_dim + 2 * kv_dim, c.n_embd});
    } else {
      expect(b + "attn_q.weight", {q_dim, c.n_embd});
      expect(b + "attn_k.weight", {kv_dim, c.n_embd});
      expect(b + "attn_v.weight", {kv_dim, c.n_embd});
    }
    expect(b + "attn_output.weight", {c.n_embd, c.mla() ? c.n_head * c.v_head_dim : q_dim});
    if (c.qkv_bias) {
      expect(b + "attn_q.bias", {q_dim});
      expect(b + "attn_k.bias", {kv_dim});
      expect(b + "attn_v.bias", {kv_dim});
    }
    if (c.qk_norm) {
      expect(b + "attn_q_norm.weight", {c.head_dim});
      expect(b + "attn_k_norm.weight", {c.head_dim});
    }
    expect(b + "ffn_norm.weight", {c.n_embd});
    if (c.post_norms) {
      expect(b + "post_attention_norm.weight", {c.n_embd});
      expect(b + "post_ffw_norm.weight", {c.n_embd});
    }
    const bool moe = c.is_moe_layer(l);
    if (moe && c.has_shared_expert()) {
      if (c.shared_expert_gated) expect(b + "ffn_gate_inp_shexp.weight", {c.n_embd});
      expect(b + "ffn_gate_shexp.weight", {c.n_ff_shared, c.n_embd});
      expect(b + "ffn_up_shexp.weight", {c.n_ff_shared, c.n_embd});
      expect(b + "ffn_down_shexp.weight", {c.n_embd, c.n_ff_shared});
    }
    const int64_t dense = c.dense_ff();
    if (moe) {
      expect(b + "ffn_gate_inp.weight", {c.n_expert, c.n_embd});
      if (find(b + "exp_probs_b.bias")) expect(b + "exp_probs_b.bias", {c.n_expert});
      if (find(b + "ffn_gate_exps.weight")) {
        expect(b + "ffn_gate_exps.weight", {c.n_expert, c.n_ff, c.n_embd});
        expect(b + "ffn_up_exps.weight", {c.n_expert, c.n_ff, c.n_embd});
        expect(b + "ffn_down_exps.weight", {c.n_expert, c.n_embd, c.n_ff});
      } else {
        for (int64_t e = 0; e < c.n_expert; ++e) {
          std::string s = "." + std::to_string(e) + ".weight";
          expect(b + "ffn_gate" + s, {c.n_ff, c.n_embd});
          expect(b + "ffn_up" + s, {c.n_ff, c.n_embd});
          expect(b + "ffn_down" + s, {c.n_embd, c.n_ff});
        }
      }
    } else if (c.fused_gate_up) {
      expect(b + "ffn_up.weight", {2 * dense, c.n_embd});
      expect(b + "ffn_down.weight", {c.n_embd, dense});
    } else {
      expect(b + "ffn_gate.weight", {dense, c.n_embd});
      expect(b + "ffn_up.weight", {dense, c.n_embd});
      expect(b + "ffn_down.weight", {c.n_embd, dense});
    }
  }
  // Norms and biases are used as f32 by every kernel.
  for (const auto& [name, t] : tensors_) {
    bool small = t.shape.size() == 1;
    if (small && t.dtype != DType::kF32) {
      throw InputError("model '" + path + "': 1-D tensor '" + name + "' must be f32, is " + dtype_name(t.dtype));
    }
  }
}

}  // namespace parallm
