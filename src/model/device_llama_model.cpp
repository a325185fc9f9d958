#include "model/device_llama_model.h"

#include <algorithm>
#include <cstring>

#include "kernels/cpu/attention.h"
#include "kernels/cpu/ops.h"
#include "kernels/cuda/math/embedding.h"
#include "model/kv_pool.h"
#include "util/check.h"

namespace parallm {

void check_device_support(const ModelConfig& c, const ModelOptions& o, const std::string& device) {
  auto refuse = [&](const std::string& what) {
    throw InputError(what + " is not on CUDA devices yet (" + device +
                     "); run this model on CPU devices (--devices cpu:0)");
  };
  if (c.mla()) refuse("DeepSeek's latent attention (MLA)");
  if (c.post_norms || c.embd_scale > 0.0f) refuse("Gemma's post-norms and scaled embeddings");
  if (c.ffn_act != FfnActivation::kSilu) refuse("a GeGLU feed-forward");
  if (c.has_shared_expert()) refuse("a shared expert");
  if (c.n_expert_groups > 1) refuse("grouped expert routing");
  if (c.rope_dim() != c.head_dim) refuse("partial rotary embeddings");
  if (c.head_dim > 256 || c.head_dim % 2 != 0)
    refuse("a head size of " + std::to_string(c.head_dim) + " (even, up to 256)");
  if (c.n_expert > 256) refuse(std::to_string(c.n_expert) + " experts (up to 256)");
  if (o.weight_dtype) refuse("--dtype conversion at load");
}

cuda::PagedKv DeviceKvCache::layer(int64_t l) const {
  uint8_t* base = memory.data() + static_cast<size_t>(l) * 2 * layer_bytes;
  return cuda::PagedKv{base, base + layer_bytes, dtype, block_size, n_kv_head, head_dim};
}

DeviceLlamaModel::DeviceLlamaModel(const ModelFile& file, const ModelOptions& options, DeviceBackend& backend)
    : config_(file.config), options_(options), backend_(backend), synthetic_(file.synthetic) {
  const ModelConfig& c = config_;
  check_device_support(c, options, backend.name());
  shape_ = local_shape(c, options.shard);
  if (options.tp_comm) PARALLM_CHECK(options.tp_comm->size() == options.shard.tp_size);
  const WeightPlan plan = plan_weights(file, shape_, options.shard);
  const int64_t hd = c.head_dim, d = c.n_embd;
  for (const LayerPlan& lp : plan.layers) {
    DeviceLayer w;
    const std::string name = "blk." + std::to_string(lp.layer);
    upload_vector(w.attn_norm, lp.attn_norm, d, name + ".attn_norm");
    upload_vector(w.q_norm, lp.q_norm, hd, name + ".attn_q_norm");
    upload_vector(w.k_norm, lp.k_norm, hd, name + ".attn_k_norm");
    upload_vector(w.ffn_norm, lp.ffn_norm, d, name + ".ffn_norm");
    upload_matrix(w.wq, lp.wq);
    upload_matrix(w.wk, lp.wk);
    upload_matrix(w.wv, lp.wv);
    upload_matrix(w.wo, lp.wo);
    w.moe_layer = lp.moe_layer;
    if (lp.moe_layer) {
      upload_matrix(w.router, lp.router);
      upload_vector(w.router_bias, lp.router_bias, c.n_expert, name + ".exp_probs_b", 0.0f);
      w.expert_begin = lp.expert_begin;
      w.expert_gate.resize(lp.expert_gate.size());
      w.expert_up.resize(lp.expert_up.size());
      w.expert_down.resize(lp.expert_down.size());
      for (size_t e = 0; e < lp.expert_gate.size(); ++e) {
        upload_matrix(w.expert_gate[e], lp.expert_gate[e]);
        upload_matrix(w.expert_up[e], lp.expert_up[e]);
        upload_matrix(w.expert_down[e], lp.expert_down[e]);
      }
    } else {
      upload_matrix(w.w_gate, lp.w_gate);
      upload_matrix(w.w_up, lp.w_up);
      upload_matrix(w.w_down, lp.w_down);
    }
    layers_.push_back(std::move(w));
  }
  if (plan.token_embd != nullptr) {
    const WeightTensor& e = *plan.token_embd;
    embd_dtype_ = cuda::embedding_dtype_supported(e.dtype) ? e.dtype : DType::kF16;
    if (synthetic_ && cuda::embedding_dtype_supported(e.dtype)) {
      token_embd_ = DeviceArray<uint8_t>(backend_, e.nbytes, MemoryCategory::kWeights, e.name);
      fill_synthetic(token_embd_.data(), e.dtype, e.nbytes);
      weight_bytes_ += e.nbytes;
    } else if (cuda::embedding_dtype_supported(e.dtype)) {
      token_embd_.bind(backend_, MemoryCategory::kWeights, e.name);
      token_embd_.assign(e.data, e.nbytes);
      weight_bytes_ += e.nbytes;
    } else {  // dequantized once on the device
      DeviceMatrix m;
      upload_matrix(m, MatrixPiece{e.data, e.dtype, e.row_bytes(), 0, e.rows(), 0, e.cols(), e.name, nullptr});
      token_embd_ = std::move(m.data);
    }
  }
  if (shape_.last_stage) {
    upload_vector(output_norm_, plan.output_norm, d, "output_norm");
    // Tied embeddings on a rank that holds both: one copy serves both.
    output_is_embedding_ = plan.token_embd != nullptr && plan.output.data == plan.token_embd->data &&
                           cuda::linear_dtype_supported(embd_dtype_);
    if (output_is_embedding_) {
      output_.dtype = embd_dtype_;
      output_.n_out = c.n_vocab;
      output_.n_in = d;
    } else {
      upload_matrix(output_, plan.output);
    }
  }
  inv_freq_ = c.rope_inv_freq(options.n_ctx);
  const WeightTensor* freqs = synthetic_ ? nullptr : file.find("rope_freqs.weight");  // synthetic: no values
  if (const WeightTensor* f = freqs) {
    const float* div = reinterpret_cast<const float*>(f->data);
    for (size_t i = 0; i < inv_freq_.size(); ++i) inv_freq_[i] /= div[i];
  }
  if (c.rope_theta_swa > 0.0f) inv_freq_swa_ = c.rope_inv_freq_swa();
  rope_style_ = c.rope_style == RopeStyle::kHalf ? cuda::RopeStyle::kHalf : cuda::RopeStyle::kInterleaved;

  Step& s = s_;
  for (DeviceArray<int32_t>* a :
       {&s.tokens, &s.positions, &s.seq_of_token, &s.tables, &s.logit_rows, &s.topk_ids, &s.expert_rows}) {
    a->bind(backend_, MemoryCategory::kActivations, "step inputs");
  }
  s.slots.bind(backend_, MemoryCategory::kActivations, "step slots");
  for (DeviceArray<float>* a :
       {&s.rope_cs, &s.rope_cs_swa, &s.x, &s.h, &s.q, &s.k, &s.v, &s.attn, &s.proj, &s.gate, &s.up, &s.last, &s.logits,
        &s.router_logits, &s.topk_weights, &s.expert_weights, &s.expert_x, &s.expert_out}) {
    a->bind(backend_, MemoryCategory::kActivations, "activations");
  }
  backend_.synchronize();
}

void DeviceLlamaModel::upload_vector(DeviceArray<float>& v, const VectorPiece& p, int64_t n, const std::string& what,
                                     float synthetic_value) {
  if (!p.present()) return;
  PARALLM_CHECK(p.begin + n <= p.tensor->shape[0]);
  v.bind(backend_, MemoryCategory::kWeights, what);
  if (synthetic_) {
    const std::vector<float> host(static_cast<size_t>(n), synthetic_value);
    v.assign(host.data(), host.size());
  } else {
    v.assign(p.data(), static_cast<size_t>(n));
  }
  weight_bytes_ += static_cast<size_t>(n) * 4;
}

void DeviceLlamaModel::upload_matrix(DeviceMatrix& m, const MatrixPiece& p) {
  if (!p.present()) return;
  const int64_t rows = p.n_out(), cols = p.n_in();
  if (p.col_begin % dtype_block_elems(p.dtype) != 0 || cols % dtype_block_elems(p.dtype) != 0) {
    throw InputError(p.what + ": a " + dtype_name(p.dtype) + " matrix cannot be split at column " +
                     std::to_string(p.col_begin) + " (its blocks are " + std::to_string(dtype_block_elems(p.dtype)) +
                     " wide); choose another --tp");
  }
  // This rank's rows and columns, contiguous, in the stored dtype.
  const size_t row_bytes = dtype_row_bytes(p.dtype, cols), skip = dtype_row_bytes(p.dtype, p.col_begin);
  if (synthetic_) {
    m.n_out = rows;
    m.n_in = cols;
    m.dtype = p.dtype;
    m.data = DeviceArray<uint8_t>(backend_, row_bytes * static_cast<size_t>(rows), MemoryCategory::kWeights, p.what);
    fill_synthetic(m.data.data(), p.dtype, m.data.bytes());
    weight_bytes_ += m.data.bytes();
    if (p.bias != nullptr) {
      const std::vector<float> zeros(static_cast<size_t>(rows), 0.0f);
      m.bias = DeviceArray<float>(backend_, zeros.size(), MemoryCategory::kWeights, p.bias->name);
      m.bias.assign(zeros.data(), zeros.size());
      weight_bytes_ += zeros.size() * 4;
    }
    return;
  }
  std::vector<uint8_t> host;
  const uint8_t* src = p.data + static_cast<size_t>(p.row_begin) * p.full_row_bytes;
  if (skip != 0 || row_bytes != p.full_row_bytes) {
    host.resize(row_bytes * static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r) {
      std::memcpy(host.data() + static_cast<size_t>(r) * row_bytes,
                  p.data + static_cast<size_t>(p.row_begin + r) * p.full_row_bytes + skip, row_bytes);
    }
    src = host.data();
  }
  m.n_out = rows;
  m.n_in = cols;
  m.data.bind(backend_, MemoryCategory::kWeights, p.what);
  if (cuda::linear_dtype_supported(p.dtype)) {
    m.dtype = p.dtype;
    m.data.assign(src, row_bytes * static_cast<size_t>(rows));
  } else {
    // Dequantized to f16 on the device, from a transient copy of the blocks.
    DeviceArray<uint8_t> raw(backend_, row_bytes * static_cast<size_t>(rows), MemoryCategory::kWeights, p.what);
    backend_.upload(raw.data(), src, raw.bytes());
    m.dtype = DType::kF16;
    m.data.grow(static_cast<size_t>(rows * cols) * 2);
    backend_.kernels().dequantize_rows_f16(reinterpret_cast<uint16_t*>(m.data.data()), raw.data(), p.dtype, rows, cols,
                                           backend_.stream());
    backend_.synchronize();
  }
  weight_bytes_ += m.data.bytes();
  if (p.bias != nullptr) {
    PARALLM_CHECK(p.bias->dtype == DType::kF32 && p.row_end <= p.bias->shape[0]);
    m.bias.bind(backend_, MemoryCategory::kWeights, p.bias->name);
    m.bias.assign(reinterpret_cast<const float*>(p.bias->data) + p.row_begin, static_cast<size_t>(rows));
    weight_bytes_ += static_cast<size_t>(rows) * 4;
  }
}

void DeviceLlamaModel::fill_synthetic(void* dst, DType dtype, size_t bytes) {
  DeviceArray<uint8_t>& pool = synthetic_pools_[dtype];
  if (pool.size() == 0) {
    // About 1 MiB of whole blocks (q8_0) or values, small and uniform in
    // [-0.05, 0.05): activations stay finite through any depth.
    const size_t block = dtype_block_bytes(dtype), per_block = static_cast<size_t>(dtype_block_elems(dtype));
    const size_t n_blocks = (size_t{1} << 20) / block;
    std::vector<uint8_t> host(n_blocks * block);
    uint64_t state = 0x9e3779b97f4a7c15ull ^ static_cast<uint64_t>(dtype);
    auto uniform = [&] {  // splitmix64 -> [-0.05, 0.05)
      state += 0x9e3779b97f4a7c15ull;
      uint64_t z = state;
      z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
      z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
      z ^= z >> 31;
      return (static_cast<float>(z >> 40) / static_cast<float>(1 << 24) - 0.5f) * 0.1f;
    };
    for (size_t b = 0; b < n_blocks; ++b) {
      uint8_t* out = host.data() + b * block;
      if (dtype == DType::kQ8_0) {  // scale then 32 quants
        const uint16_t d = fp32_to_fp16(0.05f / 127.0f);
        std::memcpy(out, &d, 2);
        for (size_t i = 0; i < per_block; ++i) out[2 + i] = static_cast<uint8_t>(static_cast<int8_t>(uniform() * 2540));
      } else if (dtype == DType::kF32) {
        const float v = uniform();
        std::memcpy(out, &v, 4);
      } else {
        const float v = uniform();
        const uint16_t h = dtype == DType::kF16 ? fp32_to_fp16(v) : fp32_to_bf16(v);
        std::memcpy(out, &h, 2);
      }
    }
    pool = DeviceArray<uint8_t>(backend_, host.size(), MemoryCategory::kWeights, "synthetic weight pool");
    pool.assign(host.data(), host.size());
  }
  // Every matrix starts at a block boundary and the pool is whole blocks,
  // so tiling keeps each block intact.
  auto* out = static_cast<uint8_t*>(dst);
  for (size_t at = 0; at < bytes; at += pool.size()) {
    backend_.copy(out + at, pool.data(), std::min(pool.size(), bytes - at));
  }
}

void DeviceLlamaModel::make_kv_cache(int64_t n_blocks, int64_t block_size, DType dtype) {
  const ModelConfig& c = config_;
  backend_.make_current();
  kv_.memory = DeviceArray<uint8_t>();  // the old cache goes first
  cpu::PagedKv probe{nullptr, nullptr, dtype, block_size, shape_.n_kv_head_local, c.head_dim};
  if (!cpu::kv_dtype_supported(dtype, c.head_dim)) {
    throw InputError(std::string("a ") + dtype_name(dtype) + " KV cache cannot hold heads of " +
                     std::to_string(c.head_dim) + " values");
  }
  kv_.n_blocks = n_blocks;
  kv_.block_size = block_size;
  kv_.n_kv_head = shape_.n_kv_head_local;
  kv_.head_dim = c.head_dim;
  kv_.dtype = dtype;
  kv_.layer_bytes = static_cast<size_t>(n_blocks * shape_.n_kv_head_local * block_size) * cpu::kv_row_bytes(probe);
  const size_t total = kv_.layer_bytes * 2 * static_cast<size_t>(n_local_layers());
  kv_.memory = DeviceArray<uint8_t>(backend_, total, MemoryCategory::kKvCache, "KV cache");
  backend_.zero(kv_.memory.data(), total);
}

void DeviceLlamaModel::linear(float* out, const DeviceMatrix& m, const float* x, int64_t n) {
  const void* w = output_is_embedding_ && &m == &output_ ? token_embd_.data() : m.data.data();
  backend_.kernels().linear(out, w, m.dtype, m.bias_ptr(), x, n, m.n_out, m.n_in, backend_.stream());
}

void DeviceLlamaModel::all_reduce(Communicator* comm, float* data, size_t count) {
  if (comm != nullptr) backend_.all_reduce_sum(*comm, data, count);
}

void DeviceLlamaModel::upload_batch(const ForwardBatch& batch) {
  const ModelConfig& c = config_;
  Step& s = s_;
  const int64_t n = batch.n_tokens(), hd = c.head_dim, bs = kv_.block_size;
  for (int32_t id : batch.tokens) {
    if (id < 0 || id >= c.n_vocab) throw InputError("token id " + std::to_string(id) + " is outside the vocabulary");
  }
  s.tokens.assign(batch.tokens.data(), batch.tokens.size());
  s.positions.assign(batch.positions.data(), batch.positions.size());
  s.seq_of_token.assign(batch.seq_of_token.data(), batch.seq_of_token.size());
  s.slots.assign(batch.slots.data(), batch.slots.size());
  if (!batch.logit_rows.empty()) s.logit_rows.assign(batch.logit_rows.data(), batch.logit_rows.size());
  // Block tables, flat: each sequence's blocks through its last position in the batch.
  const size_t n_seqs = batch.block_tables.size();
  std::vector<int64_t>& used = s.host_used;
  used.assign(n_seqs, 0);
  for (int64_t t = 0; t < n; ++t) {
    int64_t& u = used[static_cast<size_t>(batch.seq_of_token[t])];
    u = std::max<int64_t>(u, batch.positions[t] / bs + 1);
  }
  s.max_blocks_per_seq = std::max<int64_t>(1, *std::max_element(used.begin(), used.end()));
  s.host_tables.assign(n_seqs * static_cast<size_t>(s.max_blocks_per_seq), 0);
  for (size_t q = 0; q < n_seqs; ++q) {
    for (int64_t b = 0; b < used[q]; ++b) {
      const int32_t block = batch.block_tables[q][b];
      PARALLM_CHECK(block >= 0 && block < kv_.n_blocks);
      s.host_tables[q * static_cast<size_t>(s.max_blocks_per_seq) + static_cast<size_t>(b)] = block;
    }
  }
  s.tables.assign(s.host_tables.data(), s.host_tables.size());
  // RoPE's cos / sin per token, on the host exactly as the CPU model makes
  // them (double-precision angles), once per step for every layer.
  auto table = [&](std::vector<float>& host, DeviceArray<float>& dev, const std::vector<float>& inv_freq) {
    host.resize(static_cast<size_t>(n * hd));
    cpu::rope_table(host.data(), batch.positions.data(), n, hd, inv_freq.data());
    if (const float m = c.rope_cos_sin_scale(); m != 1.0f) {
      for (float& v : host) v *= m;
    }
    dev.assign(host.data(), host.size());
  };
  table(s.host_cs, s.rope_cs, inv_freq_);
  if (!inv_freq_swa_.empty()) {
    s.host_cs_swa.resize(static_cast<size_t>(n * hd));
    cpu::rope_table(s.host_cs_swa.data(), batch.positions.data(), n, hd, inv_freq_swa_.data());
    s.rope_cs_swa.assign(s.host_cs_swa.data(), s.host_cs_swa.size());
  }
}

void DeviceLlamaModel::attention(int64_t l, const ForwardBatch& batch) {
  const ModelConfig& c = config_;
  const DeviceLayer& w = layers_[static_cast<size_t>(l)];
  const cuda::KernelSet& k = backend_.kernels();
  const cuda::StreamHandle st = backend_.stream();
  Step& s = s_;
  const int64_t n = batch.n_tokens(), hd = c.head_dim;
  const int64_t nh = shape_.n_head_local, nkv = shape_.n_kv_head_local;
  linear(s.q.data(), w.wq, s.h.data(), n);
  linear(s.k.data(), w.wk, s.h.data(), n);
  linear(s.v.data(), w.wv, s.h.data(), n);
  if (w.q_norm.size() > 0) {
    k.rmsnorm(s.q.data(), s.q.data(), nullptr, w.q_norm.data(), n * nh, hd, c.rms_eps, st);
    k.rmsnorm(s.k.data(), s.k.data(), nullptr, w.k_norm.data(), n * nkv, hd, c.rms_eps, st);
  }
  const bool sliding = c.is_sliding(shape_.layer_begin + l);
  const float* cs = sliding && !inv_freq_swa_.empty() ? s.rope_cs_swa.data() : s.rope_cs.data();
  k.rope_apply(s.q.data(), cs, n, nh, hd, rope_style_, st);
  k.rope_apply(s.k.data(), cs, n, nkv, hd, rope_style_, st);
  const cuda::PagedKv kv = kv_.layer(l);
  k.kv_write(kv, s.k.data(), s.v.data(), s.slots.data(), n, st);
  const cuda::AttendLimits limits{sliding ? c.sliding_window : 0, c.attn_softcap};
  k.paged_attention(s.attn.data(), s.q.data(), kv, s.positions.data(), s.seq_of_token.data(), s.tables.data(),
                    s.max_blocks_per_seq, n, nh, c.query_scale(), limits, st);
  linear(s.proj.data(), w.wo, s.attn.data(), n);
  all_reduce(options_.tp_comm, s.proj.data(), static_cast<size_t>(n * c.n_embd));
}

void DeviceLlamaModel::dense_ffn(const DeviceLayer& w, int64_t n) {
  Step& s = s_;
  const int64_t f = w.w_gate.n_out;
  linear(s.gate.data(), w.w_gate, s.h.data(), n);
  linear(s.up.data(), w.w_up, s.h.data(), n);
  backend_.kernels().swiglu(s.gate.data(), s.gate.data(), s.up.data(), n * f, backend_.stream());
  linear(s.proj.data(), w.w_down, s.gate.data(), n);
  all_reduce(options_.tp_comm, s.proj.data(), static_cast<size_t>(n * config_.n_embd));
}

// Routing on the device, the token lists per expert on the host (a few
// hundred bytes a step), the experts one after the other.
void DeviceLlamaModel::moe_ffn(const DeviceLayer& w, int64_t n) {
  const ModelConfig& c = config_;
  const cuda::KernelSet& k = backend_.kernels();
  const cuda::StreamHandle st = backend_.stream();
  Step& s = s_;
  const int64_t d = c.n_embd, n_exp = c.n_expert, k_used = c.n_expert_used;
  s.router_logits.grow(static_cast<size_t>(n * n_exp));
  s.topk_ids.grow(static_cast<size_t>(n * k_used));
  s.topk_weights.grow(static_cast<size_t>(n * k_used));
  linear(s.router_logits.data(), w.router, s.h.data(), n);
  const cuda::TopKRule rule{c.router_scoring == RouterScoring::kSigmoid, c.norm_topk_prob, c.routed_scale};
  k.moe_topk(s.topk_ids.data(), s.topk_weights.data(), s.router_logits.data(),
             w.router_bias.size() > 0 ? w.router_bias.data() : nullptr, n, n_exp, k_used, rule, st);
  s.host_ids.resize(static_cast<size_t>(n * k_used));
  s.host_weights.resize(s.host_ids.size());
  backend_.download(s.host_ids.data(), s.topk_ids.data(), s.host_ids.size() * 4);
  backend_.download(s.host_weights.data(), s.topk_weights.data(), s.host_weights.size() * 4);
  if (moe_stats_.tokens_per_expert.empty()) moe_stats_.tokens_per_expert.assign(static_cast<size_t>(n_exp), 0);
  backend_.zero(s.proj.data(), static_cast<size_t>(n * d) * 4);
  const int64_t n_local = static_cast<int64_t>(w.expert_gate.size());
  // Under tp (ep == 1) every rank runs every expert's columns: only one counts.
  const bool count = options_.shard.ep_size > 1 || options_.shard.tp_rank == 0;
  std::vector<int32_t>& rows = s.host_rows;
  std::vector<float>& weights = s.host_row_weights;
  for (int64_t e = 0; e < n_local; ++e) {
    const int32_t global = static_cast<int32_t>(w.expert_begin + e);
    rows.clear();
    weights.clear();
    for (int64_t i = 0; i < n * k_used; ++i) {
      if (s.host_ids[static_cast<size_t>(i)] != global) continue;
      rows.push_back(static_cast<int32_t>(i / k_used));
      weights.push_back(s.host_weights[static_cast<size_t>(i)]);
    }
    if (rows.empty()) continue;
    if (count) moe_stats_.tokens_per_expert[static_cast<size_t>(global)] += rows.size();
    const auto m = static_cast<int64_t>(rows.size());
    const int64_t f = w.expert_gate[e].n_out;
    s.expert_rows.assign(rows.data(), rows.size());
    s.expert_weights.assign(weights.data(), weights.size());
    s.expert_x.grow(static_cast<size_t>(m * d));
    s.expert_out.grow(static_cast<size_t>(m * d));
    k.gather_rows(s.expert_x.data(), s.h.data(), s.expert_rows.data(), m, d, st);
    linear(s.gate.data(), w.expert_gate[e], s.expert_x.data(), m);
    linear(s.up.data(), w.expert_up[e], s.expert_x.data(), m);
    k.swiglu(s.gate.data(), s.gate.data(), s.up.data(), m * f, st);
    linear(s.expert_out.data(), w.expert_down[e], s.gate.data(), m);
    k.scatter_add_rows(s.proj.data(), s.expert_out.data(), s.expert_rows.data(), s.expert_weights.data(), m, d, st);
    // NOTE: the next expert's row list overwrites this one's on the same
    // stream, after this expert's kernels (copies are stream-ordered), and a
    // buffer that grows is released only once the stream is idle.
  }
  Communicator* group = options_.shard.ep_size > 1 ? options_.ep_comm : options_.tp_comm;
  all_reduce(group, s.proj.data(), static_cast<size_t>(n * d));
}

void DeviceLlamaModel::forward(const ForwardBatch& batch, float* hidden, float* logits, float* pooled) {
  const ModelConfig& c = config_;
  const cuda::KernelSet& k = backend_.kernels();
  const cuda::StreamHandle st = backend_.stream();
  Step& s = s_;
  const int64_t n = batch.n_tokens(), d = c.n_embd, hd = c.head_dim;
  PARALLM_CHECK(n > 0);
  PARALLM_CHECK_MSG(kv_.n_blocks > 0, "DeviceLlamaModel::forward before make_kv_cache");
  backend_.make_current();
  auto fit = [](DeviceArray<float>& a, int64_t size) { a.grow(static_cast<size_t>(size)); };
  fit(s.x, n * d);
  fit(s.h, n * d);
  fit(s.q, n * shape_.n_head_local * hd);
  fit(s.k, n * shape_.n_kv_head_local * hd);
  fit(s.v, n * shape_.n_kv_head_local * hd);
  fit(s.attn, n * shape_.n_head_local * hd);
  fit(s.proj, n * d);
  const int64_t ff = std::max(shape_.n_ff_local, shape_.n_ff_dense_local);
  fit(s.gate, n * ff);
  fit(s.up, n * ff);
  upload_batch(batch);

  if (shape_.first_stage) {
    k.embedding_rows(s.x.data(), token_embd_.data(), embd_dtype_, s.tokens.data(), n, d, c.n_vocab, st);
  } else {
    backend_.upload(s.x.data(), hidden, static_cast<size_t>(n * d) * 4);
  }
  const int64_t n_layers = n_local_layers();
  if (n_layers > 0) k.rmsnorm(s.h.data(), s.x.data(), nullptr, layers_[0].attn_norm.data(), n, d, c.rms_eps, st);
  for (int64_t l = 0; l < n_layers; ++l) {
    const DeviceLayer& w = layers_[static_cast<size_t>(l)];
    attention(l, batch);
    k.rmsnorm(s.h.data(), s.x.data(), s.proj.data(), w.ffn_norm.data(), n, d, c.rms_eps, st);  // x += attention
    if (w.moe_layer) {
      moe_ffn(w, n);
    } else {
      dense_ffn(w, n);
    }
    // x += ffn, and the norm the next reader wants: the next layer's, the
    // output's on the last stage; a stage that hands x on only needs the add
    // (its norm output is not read).
    const float* next_norm = l + 1 < n_layers    ? layers_[static_cast<size_t>(l + 1)].attn_norm.data()
                             : shape_.last_stage ? output_norm_.data()
                                                 : w.ffn_norm.data();
    k.rmsnorm(s.h.data(), s.x.data(), s.proj.data(), next_norm, n, d, c.rms_eps, st);
  }
  if (!shape_.last_stage) {
    backend_.download(hidden, s.x.data(), static_cast<size_t>(n * d) * 4);
    return;
  }
  if (n_layers == 0) k.rmsnorm(s.h.data(), s.x.data(), nullptr, output_norm_.data(), n, d, c.rms_eps, st);
  if (batch.n_pooled() > 0) {
    PARALLM_CHECK(pooled != nullptr);
    s.host_h.resize(static_cast<size_t>(n * d));
    backend_.download(s.host_h.data(), s.h.data(), s.host_h.size() * 4);
    for (int64_t i = 0; i < batch.n_pooled(); ++i) {
      const int32_t begin = batch.pool_ranges[2 * i], end = batch.pool_ranges[2 * i + 1];
      PARALLM_CHECK(begin >= 0 && begin <= end && end <= n);
      float* out = pooled + i * d;
      std::fill(out, out + d, 0.0f);
      for (int32_t t = begin; t < end; ++t) cpu::add(out, out, s.host_h.data() + static_cast<size_t>(t) * d, d);
    }
  }
  const auto n_logits = static_cast<int64_t>(batch.logit_rows.size());
  if (n_logits == 0) {
    backend_.synchronize();
    return;
  }
  for (int32_t row : batch.logit_rows) PARALLM_CHECK(row >= 0 && row < n);
  fit(s.last, n_logits * d);
  fit(s.logits, n_logits * c.n_vocab);
  k.gather_rows(s.last.data(), s.h.data(), s.logit_rows.data(), n_logits, d, st);
  linear(s.logits.data(), output_, s.last.data(), n_logits);
  backend_.download(logits, s.logits.data(), static_cast<size_t>(n_logits * c.n_vocab) * 4);
  if (c.final_softcap > 0.0f) cpu::softcap(logits, n_logits * c.n_vocab, c.final_softcap);
}

}  // namespace parallm
