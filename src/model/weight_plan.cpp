#include "model/weight_plan.h"

#include "util/check.h"

namespace parallm {

namespace {
std::string blk(int64_t l, const char* name) { return "blk." + std::to_string(l) + "." + name; }

MatrixPiece rows_of(const WeightTensor& w, int64_t row_begin, int64_t row_end, const WeightTensor* bias = nullptr) {
  PARALLM_CHECK(w.shape.size() == 2 && row_begin >= 0 && row_begin <= row_end && row_end <= w.shape[0]);
  return MatrixPiece{w.data, w.dtype, w.row_bytes(), row_begin, row_end, 0, w.cols(), w.name, bias};
}

MatrixPiece cols_of(const WeightTensor& w, int64_t col_begin, int64_t col_end) {
  PARALLM_CHECK(w.shape.size() == 2 && col_begin >= 0 && col_begin <= col_end && col_end <= w.shape[1]);
  return MatrixPiece{w.data, w.dtype, w.row_bytes(), 0, w.rows(), col_begin, col_end, w.name, nullptr};
}

VectorPiece whole_vector(const WeightTensor& w) {
  PARALLM_CHECK(w.dtype == DType::kF32 && w.shape.size() == 1);
  return VectorPiece{&w, 0};
}
}  // namespace

WeightPlan plan_weights(const ModelFile& file, const LocalShape& s, const ShardSpec& shard) {
  const ModelConfig& c = file.config;
  const int64_t hd = c.head_dim;
  WeightPlan plan;
  for (int64_t l = s.layer_begin; l < s.layer_end; ++l) {
    LayerPlan lp;
    lp.layer = l;
    lp.attn_norm = whole_vector(file.get(blk(l, "attn_norm.weight")));
    const int64_t q0 = s.head_begin * hd, q1 = q0 + s.n_head_local * hd;
    const int64_t k0 = s.kv_head_begin * hd, k1 = k0 + s.n_kv_head_local * hd;
    if (c.mla()) {
      lp.mla = true;
    } else if (c.fused_qkv) {
      // Phi-3: Q rows, then K rows, then V rows of one matrix; each rank
      // takes its heads' rows of each part.
      const WeightTensor& qkv = file.get(blk(l, "attn_qkv.weight"));
      const int64_t q_dim = c.n_head * hd, kv_dim = c.n_kv_head * hd;
      lp.wq = rows_of(qkv, q0, q1);
      lp.wk = rows_of(qkv, q_dim + k0, q_dim + k1);
      lp.wv = rows_of(qkv, q_dim + kv_dim + k0, q_dim + kv_dim + k1);
    } else {
      lp.wq = rows_of(file.get(blk(l, "attn_q.weight")), q0, q1, file.find(blk(l, "attn_q.bias")));
      lp.wk = rows_of(file.get(blk(l, "attn_k.weight")), k0, k1, file.find(blk(l, "attn_k.bias")));
      lp.wv = rows_of(file.get(blk(l, "attn_v.weight")), k0, k1, file.find(blk(l, "attn_v.bias")));
    }
    // The output projection reads this rank's heads' values (MLA's are v_head_dim wide).
    const int64_t vd = c.mla() ? c.v_head_dim : hd;
    lp.wo = cols_of(file.get(blk(l, "attn_output.weight")), s.head_begin * vd, (s.head_begin + s.n_head_local) * vd);
    if (c.qk_norm) {
      lp.q_norm = whole_vector(file.get(blk(l, "attn_q_norm.weight")));
      lp.k_norm = whole_vector(file.get(blk(l, "attn_k_norm.weight")));
    }
    lp.ffn_norm = whole_vector(file.get(blk(l, "ffn_norm.weight")));
    if (c.post_norms) {
      lp.post_attn_norm = whole_vector(file.get(blk(l, "post_attention_norm.weight")));
      lp.post_ffn_norm = whole_vector(file.get(blk(l, "post_ffw_norm.weight")));
    }
    lp.moe_layer = c.is_moe_layer(l);
    if (lp.moe_layer && c.has_shared_expert()) {
      const int64_t f0 = s.ff_shared_begin, f1 = f0 + s.n_ff_shared_local;
      if (c.shared_expert_gated) lp.shared_gate_inp = whole_vector(file.get(blk(l, "ffn_gate_inp_shexp.weight")));
      lp.shared_gate = rows_of(file.get(blk(l, "ffn_gate_shexp.weight")), f0, f1);
      lp.shared_up = rows_of(file.get(blk(l, "ffn_up_shexp.weight")), f0, f1);
      lp.shared_down = cols_of(file.get(blk(l, "ffn_down_shexp.weight")), f0, f1);
    }
    if (lp.moe_layer) {
      const WeightTensor& router = file.get(blk(l, "ffn_gate_inp.weight"));
      lp.router = rows_of(router, 0, router.rows());
      if (const WeightTensor* b = file.find(blk(l, "exp_probs_b.bias"))) lp.router_bias = whole_vector(*b);
      lp.expert_begin = s.expert_begin;
      // With ep the experts are whole on their owner; without it, tp shards each expert's columns.
      const bool ep = shard.ep_size > 1;
      const int64_t f0 = ep ? 0 : s.ff_begin, f1 = ep ? c.n_ff : s.ff_begin + s.n_ff_local;
      for (int64_t e = s.expert_begin; e < s.expert_end; ++e) {
        auto take = [&](const char* kind, bool row_parallel) {
          const ModelFile::ExpertMatrix m = file.expert_matrix(l, kind, e);
          MatrixPiece p{m.data,
                        m.dtype,
                        dtype_row_bytes(m.dtype, m.cols),
                        0,
                        m.rows,
                        0,
                        m.cols,
                        blk(l, "ffn_") + kind + " expert " + std::to_string(e),
                        nullptr};
          if (row_parallel) {
            p.col_begin = f0;
            p.col_end = f1;
          } else {
            p.row_begin = f0;
            p.row_end = f1;
          }
          return p;
        };
        lp.expert_gate.push_back(take("gate", false));
        lp.expert_up.push_back(take("up", false));
        lp.expert_down.push_back(take("down", true));
      }
    } else {
      const int64_t f0 = s.ff_dense_begin, f1 = s.ff_dense_begin + s.n_ff_dense_local;
      if (c.fused_gate_up) {  // Phi-3: gate rows [0, n_ff), up rows [n_ff, 2 n_ff)
        const WeightTensor& gate_up = file.get(blk(l, "ffn_up.weight"));
        lp.w_gate = rows_of(gate_up, f0, f1);
        lp.w_up = rows_of(gate_up, c.dense_ff() + f0, c.dense_ff() + f1);
      } else {
        lp.w_gate = rows_of(file.get(blk(l, "ffn_gate.weight")), f0, f1);
        lp.w_up = rows_of(file.get(blk(l, "ffn_up.weight")), f0, f1);
      }
      lp.w_down = cols_of(file.get(blk(l, "ffn_down.weight")), f0, f1);
    }
    plan.layers.push_back(std::move(lp));
  }
  if (s.first_stage) plan.token_embd = &file.get("token_embd.weight");
  if (s.last_stage) {
    plan.output_norm = whole_vector(file.get("output_norm.weight"));
    const WeightTensor& out = c.tied_embeddings ? file.get("token_embd.weight") : file.get("output.weight");
    plan.output = rows_of(out, 0, out.rows());
  }
  return plan;
}

}  // namespace parallm
