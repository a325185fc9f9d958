#include "model/llama_model.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/cpu/attention.h"
#include "kernels/cpu/quant.h"
#include "util/check.h"

namespace parallm {

namespace {

// Runs fn(t_begin, t_end) over the batch's tokens: split between the pool's
// threads when the batch is large, on the caller alone when a parallel region
// would cost more than the work (a decode token's norm is ~1 us).
// NOTE: at 32 sequences the norms, adds and SwiGLU on one thread were ~5% of
// a decode step, with the other thread waiting.
template <class F>
void over_tokens(ThreadPool& pool, int64_t n_tokens, F&& fn) {
  constexpr int64_t kMinTokens = 8;
  if (n_tokens < kMinTokens || pool.size() == 1) {
    fn(int64_t{0}, n_tokens);
    return;
  }
  pool.run([&](int ti, int nt) {
    int64_t b, e;
    ThreadPool::split(n_tokens, 1, ti, nt, &b, &e);
    if (b < e) fn(b, e);
  });
}
}  // namespace

LlamaModel::LlamaModel(const ModelFile& file, const ModelOptions& options)
    : config_(file.config), options_(options), store_(options.weight_dtype) {
  shape_ = local_shape(config_, options.shard);
  const ModelConfig& c = config_;
  const LocalShape& s = shape_;
  if (options.tp_comm) PARALLM_CHECK(options.tp_comm->size() == options.shard.tp_size);

  const WeightPlan plan = plan_weights(file, s, options.shard);
  for (const LayerPlan& lp : plan.layers) {
    LayerWeights lw;
    lw.attn_norm = store_.vector(lp.attn_norm);
    if (lp.mla) lw.mla = load_mla(file, store_, c, s, lp.layer);
    lw.wq = store_.materialize(lp.wq);
    lw.wk = store_.materialize(lp.wk);
    lw.wv = store_.materialize(lp.wv);
    lw.wo = store_.materialize(lp.wo);
    lw.q_norm = store_.vector(lp.q_norm);
    lw.k_norm = store_.vector(lp.k_norm);
    lw.ffn_norm = store_.vector(lp.ffn_norm);
    lw.post_attn_norm = store_.vector(lp.post_attn_norm);
    lw.post_ffn_norm = store_.vector(lp.post_ffn_norm);
    lw.moe_layer = lp.moe_layer;
    lw.shared_gate_inp = store_.vector(lp.shared_gate_inp);
    lw.shared_gate = store_.materialize(lp.shared_gate);
    lw.shared_up = store_.materialize(lp.shared_up);
    lw.shared_down = store_.materialize(lp.shared_down);
    if (lp.moe_layer) {
      lw.moe.router = store_.materialize(lp.router);
      lw.moe.router_bias = store_.vector(lp.router_bias);
      lw.moe.expert_begin = lp.expert_begin;
      for (size_t e = 0; e < lp.expert_gate.size(); ++e) {
        lw.moe.gate.push_back(store_.materialize(lp.expert_gate[e]));
        lw.moe.up.push_back(store_.materialize(lp.expert_up[e]));
        lw.moe.down.push_back(store_.materialize(lp.expert_down[e]));
      }
    }
    lw.w_gate = store_.materialize(lp.w_gate);
    lw.w_up = store_.materialize(lp.w_up);
    lw.w_down = store_.materialize(lp.w_down);
    layers_.push_back(std::move(lw));
  }
  token_embd_ = plan.token_embd;
  if (s.last_stage) {
    output_norm_ = store_.vector(plan.output_norm);
    output_ = store_.materialize(plan.output);
  }
  inv_freq_ = c.rope_inv_freq(options.n_ctx);
  if (const WeightTensor* f = file.find("rope_freqs.weight")) {
    const float* div = reinterpret_cast<const float*>(f->data);
    for (size_t i = 0; i < inv_freq_.size(); ++i) inv_freq_[i] /= div[i];
  }
  if (c.rope_theta_swa > 0.0f) inv_freq_swa_ = c.rope_inv_freq_swa();
  rope_style_ = c.rope_style == RopeStyle::kHalf ? cpu::RopeStyle::kHalf : cpu::RopeStyle::kInterleaved;
}

void LlamaModel::all_reduce_tp(float* data, size_t count) {
  if (options_.tp_comm) options_.tp_comm->all_reduce_sum(data, count);
}

void LlamaModel::embed(const ForwardBatch& batch, float* x) {
  const WeightTensor& e = *token_embd_;
  const int64_t n_embd = config_.n_embd;
  for (int64_t t = 0; t < batch.n_tokens(); ++t) {
    const int32_t id = batch.tokens[t];
    if (id < 0 || id >= config_.n_vocab)
      throw InputError("token id " + std::to_string(id) + " is outside the vocabulary");
    cpu::dequantize_row(e.dtype, e.data + static_cast<size_t>(id) * e.row_bytes(), x + t * n_embd, n_embd);
    if (config_.embd_scale > 0.0f) {
      for (int64_t j = 0; j < n_embd; ++j) x[t * n_embd + j] *= config_.embd_scale;
    }
  }
}

void LlamaModel::attention_block(int64_t l, const ForwardBatch& batch, KvPool& kv, float* x, ThreadPool& pool) {
  const ModelConfig& c = config_;
  const LayerWeights& w = layers_[l];
  const int64_t n = batch.n_tokens(), hd = c.head_dim;
  const int64_t nh = shape_.n_head_local, nkv = shape_.n_kv_head_local;
  const int64_t d = c.n_embd;
  over_tokens(pool, n, [&](int64_t b, int64_t e) {
    cpu::rmsnorm(act_.h.data() + b * d, x + b * d, w.attn_norm, e - b, d, c.rms_eps);
  });
  if (c.mla()) {
    mla_attention(act_.attn.data(), act_.h.data(), w.mla, c, shape_, batch, kv.layer(l), act_.rope_cs.data(),
                  mla_scratch_, pool);
    finish_attention(w, n, x, pool);
    return;
  }
  float* outs[3] = {act_.q.data(), act_.k.data(), act_.v.data()};
  const Linear* ls[3] = {&w.wq, &w.wk, &w.wv};
  linear_forward_multi(outs, ls, 3, act_.h.data(), n, pool);
  if (w.q_norm != nullptr) {
    over_tokens(pool, n, [&](int64_t b, int64_t e) {
      cpu::rmsnorm(act_.q.data() + b * nh * hd, act_.q.data() + b * nh * hd, w.q_norm, (e - b) * nh, hd, c.rms_eps);
      cpu::rmsnorm(act_.k.data() + b * nkv * hd, act_.k.data() + b * nkv * hd, w.k_norm, (e - b) * nkv, hd, c.rms_eps);
    });
  }
  const bool sliding = c.is_sliding(shape_.layer_begin + l);
  const float* cs = sliding && !inv_freq_swa_.empty() ? act_.rope_cs_swa.data() : act_.rope_cs.data();
  cpu::rope_apply(act_.q.data(), cs, n, nh, hd, rope_style_);
  cpu::rope_apply(act_.k.data(), cs, n, nkv, hd, rope_style_);
  const cpu::KvRows rows{act_.k.data(), act_.v.data(), batch.slots.data()};
  const cpu::AttendLimits limits{sliding ? c.sliding_window : 0, c.attn_softcap};
  cpu::paged_attention(act_.attn.data(), act_.q.data(), kv.layer(l), batch.positions.data(), batch.seq_of_token.data(),
                       batch.block_tables.data(), n, nh, c.query_scale(), pool, &rows, limits);
  finish_attention(w, n, x, pool);
}

void LlamaModel::finish_attention(const LayerWeights& w, int64_t n, float* x, ThreadPool& pool) {
  const ModelConfig& c = config_;
  const int64_t d = c.n_embd;
  linear_forward(act_.proj.data(), w.wo, act_.attn.data(), n, pool);
  all_reduce_tp(act_.proj.data(), static_cast<size_t>(n * c.n_embd));
  // The residual add and the next norm in one pass over the batch.
  over_tokens(pool, n, [&](int64_t b, int64_t e) {
    if (w.post_attn_norm != nullptr) {
      cpu::rmsnorm(act_.proj.data() + b * d, act_.proj.data() + b * d, w.post_attn_norm, e - b, d, c.rms_eps);
    }
    cpu::add(x + b * d, x + b * d, act_.proj.data() + b * d, (e - b) * d);
    cpu::rmsnorm(act_.h.data() + b * d, x + b * d, w.ffn_norm, e - b, d, c.rms_eps);
  });
}

void LlamaModel::dense_ffn(float* out, const Linear& gate, const Linear& up, const Linear& down, int64_t f, int64_t n,
                           ThreadPool& pool) {
  float* outs[2] = {act_.gate.data(), act_.up.data()};
  const Linear* ls[2] = {&gate, &up};
  linear_forward_multi(outs, ls, 2, act_.h.data(), n, pool);
  const bool gelu = config_.ffn_act == FfnActivation::kGeluTanh;
  over_tokens(pool, n, [&](int64_t b, int64_t e) {
    float* g = act_.gate.data() + b * f;
    const float* u = act_.up.data() + b * f;
    if (gelu) {
      cpu::geglu_tanh(g, g, u, (e - b) * f);
    } else {
      cpu::swiglu(g, g, u, (e - b) * f);
    }
  });
  linear_forward(out, down, act_.gate.data(), n, pool);
}

void LlamaModel::shared_expert(const LayerWeights& w, int64_t n, ThreadPool& pool) {
  const int64_t d = config_.n_embd;
  dense_ffn(act_.shared.data(), w.shared_gate, w.shared_up, w.shared_down, shape_.n_ff_shared_local, n, pool);
  // The gate reads the whole (replicated) normed row, so every tp rank scales
  // its partial sum by the same factor.
  if (w.shared_gate_inp == nullptr) return;  // DeepSeek's shared experts: ungated
  for (int64_t t = 0; t < n; ++t) {
    const float* h = act_.h.data() + t * d;
    float dot = 0.0f;
    for (int64_t j = 0; j < d; ++j) dot += h[j] * w.shared_gate_inp[j];
    const float g = 1.0f / (1.0f + std::exp(-dot));
    float* s = act_.shared.data() + t * d;
    for (int64_t j = 0; j < d; ++j) s[j] *= g;
  }
}

void LlamaModel::ffn_block(int64_t l, int64_t n, float* x, ThreadPool& pool) {
  const ModelConfig& c = config_;
  const LayerWeights& w = layers_[l];
  const int64_t d = c.n_embd;
  const size_t count = static_cast<size_t>(n * d);
  if (w.moe_layer) {
    moe_forward(act_.proj.data(), act_.h.data(), n, c, w.moe, options_.ep_comm, &moe_stats_, pool);
    if (c.has_shared_expert()) shared_expert(w, n, pool);
    if (options_.shard.ep_size == 1) {
      // Without ep, tp shards every expert's columns (and the shared
      // expert's): one all-reduce sums both partial outputs.
      if (c.has_shared_expert()) cpu::add(act_.proj.data(), act_.proj.data(), act_.shared.data(), n * d);
      all_reduce_tp(act_.proj.data(), count);
    } else if (c.has_shared_expert()) {
      // With ep the routed output is already whole; the shared expert's tp
      // partial sums are reduced on their own.
      all_reduce_tp(act_.shared.data(), count);
      cpu::add(act_.proj.data(), act_.proj.data(), act_.shared.data(), n * d);
    }
  } else {
    dense_ffn(act_.proj.data(), w.w_gate, w.w_up, w.w_down, shape_.n_ff_dense_local, n, pool);
    all_reduce_tp(act_.proj.data(), count);
  }
  over_tokens(pool, n, [&](int64_t b, int64_t e) {
    if (w.post_ffn_norm != nullptr) {
      cpu::rmsnorm(act_.proj.data() + b * d, act_.proj.data() + b * d, w.post_ffn_norm, e - b, d, c.rms_eps);
    }
    cpu::add(x + b * d, x + b * d, act_.proj.data() + b * d, (e - b) * d);
  });
}

// Sums of final-norm rows, in token order: the same norm as the logits rows,
// so an embedding is the state the output matrix would read. Serial: a norm
// is ~n_embd multiply-adds per row, small beside the layers that made it.
void LlamaModel::pool_hidden(const ForwardBatch& batch, const float* hidden, float* pooled) {
  const ModelConfig& c = config_;
  const int64_t d = c.n_embd;
  PARALLM_CHECK(pooled != nullptr);
  grown(act_.pool_row, static_cast<size_t>(d));
  for (int64_t i = 0; i < batch.n_pooled(); ++i) {
    const int32_t begin = batch.pool_ranges[2 * i], end = batch.pool_ranges[2 * i + 1];
    PARALLM_CHECK(begin >= 0 && begin <= end && end <= batch.n_tokens());
    float* out = pooled + i * d;
    std::fill(out, out + d, 0.0f);
    for (int32_t t = begin; t < end; ++t) {
      cpu::rmsnorm(act_.pool_row.data(), hidden + t * d, output_norm_, 1, d, c.rms_eps);
      cpu::add(out, out, act_.pool_row.data(), d);
    }
  }
}

void LlamaModel::forward(const ForwardBatch& batch, KvPool& kv, float* hidden, float* logits, ThreadPool& pool,
                         float* pooled) {
  const ModelConfig& c = config_;
  const int64_t n = batch.n_tokens(), hd = c.head_dim;
  PARALLM_CHECK(n > 0);
  auto fit = [](HugeVector<float>& v, int64_t size) { grown(v, static_cast<size_t>(size)); };
  fit(act_.h, n * c.n_embd);
  fit(act_.q, n * shape_.n_head_local * hd);
  fit(act_.k, n * shape_.n_kv_head_local * hd);
  fit(act_.v, n * shape_.n_kv_head_local * hd);
  fit(act_.attn, n * shape_.n_head_local * std::max(hd, c.v_head_dim));
  fit(act_.proj, n * c.n_embd);
  const int64_t ff = std::max({shape_.n_ff_local, shape_.n_ff_shared_local, shape_.n_ff_dense_local});
  fit(act_.gate, n * ff);
  fit(act_.up, n * ff);
  if (c.has_shared_expert()) fit(act_.shared, n * c.n_embd);
  const int64_t rd = c.rope_dim();
  fit(act_.rope_cs, n * rd);
  // NOTE: once per forward, not per layer and per q / k: the sines and
  // cosines (in double) were ~4% of a 32-sequence decode step.
  cpu::rope_table(act_.rope_cs.data(), batch.positions.data(), n, rd, inv_freq_.data());
  if (const float m = c.rope_cos_sin_scale(); m != 1.0f) {  // LongRoPE, YaRN
    for (int64_t i = 0; i < n * rd; ++i) act_.rope_cs[static_cast<size_t>(i)] *= m;
  }
  if (!inv_freq_swa_.empty()) {
    fit(act_.rope_cs_swa, n * hd);
    cpu::rope_table(act_.rope_cs_swa.data(), batch.positions.data(), n, hd, inv_freq_swa_.data());
  }

  if (shape_.first_stage) embed(batch, hidden);
  for (int64_t l = 0; l < n_local_layers(); ++l) {
    attention_block(l, batch, kv, hidden, pool);
    ffn_block(l, n, hidden, pool);
  }
  if (!shape_.last_stage) return;
  if (batch.n_pooled() > 0) pool_hidden(batch, hidden, pooled);
  const int64_t n_logits = static_cast<int64_t>(batch.logit_rows.size());
  if (n_logits == 0) return;
  fit(act_.last, n_logits * c.n_embd);
  for (int64_t i = 0; i < n_logits; ++i) {
    const int32_t row = batch.logit_rows[i];
    PARALLM_CHECK(row >= 0 && row < n);
    cpu::rmsnorm(act_.last.data() + i * c.n_embd, hidden + row * c.n_embd, output_norm_, 1, c.n_embd, c.rms_eps);
  }
  linear_forward(logits, output_, act_.last.data(), n_logits, pool);
  if (c.final_softcap > 0.0f) cpu::softcap(logits, n_logits * c.n_vocab, c.final_softcap);
}

}  // namespace parallm
