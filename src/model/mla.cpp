// Multi-head latent attention (see mla.h).
#include "model/mla.h"

#include <algorithm>
#include <cstring>

#include "kernels/cpu/ops.h"
#include "kernels/cpu/quant.h"
#include "util/check.h"

namespace parallm {

namespace {
std::string blk(int64_t l, const char* name) { return "blk." + std::to_string(l) + "." + name; }

// Row r of a matrix tensor [rows, cols] (any dtype) as f32.
void row_f32(const WeightTensor& t, int64_t r, float* out) {
  const int64_t cols = t.shape.back();
  cpu::dequantize_row(t.dtype, t.data + static_cast<size_t>(r) * dtype_row_bytes(t.dtype, cols), out, cols);
}
}  // namespace

MlaWeights load_mla(const ModelFile& file, WeightStore& store, const ModelConfig& c, const LocalShape& s, int64_t l) {
  MlaWeights w;
  const int64_t nope = c.qk_nope_dim, rope = c.qk_rope_dim, v = c.v_head_dim, lora = c.kv_lora_rank;
  const int64_t qh = nope + rope, h0 = s.head_begin, nh = s.n_head_local;
  if (c.q_lora_rank > 0) {
    w.wq_a = store.whole(file.get(blk(l, "attn_q_a.weight")));
    w.q_a_norm = store.vector(file.get(blk(l, "attn_q_a_norm.weight")));
    w.wq = store.column_parallel(file.get(blk(l, "attn_q_b.weight")), h0 * qh, (h0 + nh) * qh);
  } else {
    w.wq = store.column_parallel(file.get(blk(l, "attn_q.weight")), h0 * qh, (h0 + nh) * qh);
  }
  w.wkv_a = store.whole(file.get(blk(l, "attn_kv_a_mqa.weight")));
  w.kv_a_norm = store.vector(file.get(blk(l, "attn_kv_a_norm.weight")));
  w.uk_t.assign(static_cast<size_t>(nh * lora * nope), 0.0f);
  std::vector<float> row(static_cast<size_t>(std::max(lora, nope)));
  if (const WeightTensor* kv_b = file.find(blk(l, "attn_kv_b.weight"))) {
    // Head g's rows: nope of Wuk, then v of Wuv.
    for (int64_t h = 0; h < nh; ++h) {
      const int64_t r0 = (h0 + h) * (nope + v);
      float* uk_t = w.uk_t.data() + h * lora * nope;
      for (int64_t d = 0; d < nope; ++d) {
        row_f32(*kv_b, r0 + d, row.data());
        for (int64_t j = 0; j < lora; ++j) uk_t[j * nope + d] = row[static_cast<size_t>(j)];
      }
      w.uv.push_back(store.column_parallel(*kv_b, r0 + nope, r0 + nope + v));
    }
  } else {
    // llama.cpp's split form: attn_k_b [n_head, kv_lora, nope] is Wuk^T
    // already, attn_v_b [n_head, v, kv_lora] is Wuv.
    const WeightTensor& k_b = file.get(blk(l, "attn_k_b.weight"));
    const WeightTensor& v_b = file.get(blk(l, "attn_v_b.weight"));
    for (int64_t h = 0; h < nh; ++h) {
      float* uk_t = w.uk_t.data() + h * lora * nope;
      for (int64_t j = 0; j < lora; ++j) row_f32(k_b, (h0 + h) * lora + j, uk_t + j * nope);
      w.uv.push_back(store.slice(v_b.data, v_b.dtype, dtype_row_bytes(v_b.dtype, lora), (h0 + h) * v, (h0 + h + 1) * v,
                                 0, lora, v_b.name));
    }
  }
  return w;
}

void mla_attention(float* attn, const float* h, const MlaWeights& w, const ModelConfig& c, const LocalShape& s,
                   const ForwardBatch& batch, const cpu::PagedKv& kv, const float* rope_cs, MlaScratch& m,
                   ThreadPool& pool) {
  const int64_t n = batch.n_tokens(), nh = s.n_head_local;
  const int64_t nope = c.qk_nope_dim, rope = c.qk_rope_dim, v = c.v_head_dim, lora = c.kv_lora_rank;
  const int64_t qh = nope + rope, width = lora + rope;
  const int64_t gather = std::max({nope, lora, v});
  float* q = grown(m.q, static_cast<size_t>(n * nh * qh));
  grown(m.olat, static_cast<size_t>(n * nh * width));
  grown(m.kva, static_cast<size_t>(n * width));
  grown(m.row, static_cast<size_t>(n * width));
  grown(m.qlat, static_cast<size_t>(n * nh * width));
  grown(m.pe, static_cast<size_t>(n * nh * rope));
  grown(m.in, static_cast<size_t>(n * gather));
  grown(m.out, static_cast<size_t>(n * gather));

  // Queries [n, nh, nope + rope] and the latent projection [n, lora + rope].
  if (c.q_lora_rank > 0) {
    grown(m.qa, static_cast<size_t>(n * c.q_lora_rank));
    linear_forward(m.qa.data(), w.wq_a, h, n, pool);
    cpu::rmsnorm(m.qa.data(), m.qa.data(), w.q_a_norm, n, c.q_lora_rank, c.rms_eps);
    linear_forward(q, w.wq, m.qa.data(), n, pool);
  } else {
    linear_forward(q, w.wq, h, n, pool);
  }
  linear_forward(m.kva.data(), w.wkv_a, h, n, pool);

  // Cache rows: the normed latent, then the roped shared key part.
  float* pe = m.pe.data();
  for (int64_t t = 0; t < n; ++t) {
    cpu::rmsnorm(m.row.data() + t * width, m.kva.data() + t * width, w.kv_a_norm, 1, lora, c.rms_eps);
    std::memcpy(pe + t * rope, m.kva.data() + t * width + lora, static_cast<size_t>(rope) * 4);
  }
  cpu::rope_apply(pe, rope_cs, n, 1, rope, cpu::RopeStyle::kInterleaved);
  for (int64_t t = 0; t < n; ++t)
    std::memcpy(m.row.data() + t * width + lora, pe + t * rope, static_cast<size_t>(rope) * 4);

  // Absorbed queries [n, nh, lora + rope]: Wuk^T q_nope, then the roped q_pe.
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t hh = 0; hh < nh; ++hh) {
      std::memcpy(pe + (t * nh + hh) * rope, q + (t * nh + hh) * qh + nope, static_cast<size_t>(rope) * 4);
    }
  }
  cpu::rope_apply(pe, rope_cs, n, nh, rope, cpu::RopeStyle::kInterleaved);
  for (int64_t hh = 0; hh < nh; ++hh) {
    for (int64_t t = 0; t < n; ++t) {
      std::memcpy(m.in.data() + t * nope, q + (t * nh + hh) * qh, static_cast<size_t>(nope) * 4);
    }
    Linear uk;
    uk.data = reinterpret_cast<const uint8_t*>(w.uk_t.data() + hh * lora * nope);
    uk.dtype = DType::kF32;
    uk.row_stride_bytes = static_cast<size_t>(nope) * 4;
    uk.n_out = lora;
    uk.n_in = nope;
    linear_forward(m.out.data(), uk, m.in.data(), n, pool);
    for (int64_t t = 0; t < n; ++t) {
      float* ql = m.qlat.data() + (t * nh + hh) * width;
      std::memcpy(ql, m.out.data() + t * lora, static_cast<size_t>(lora) * 4);
      std::memcpy(ql + lora, pe + (t * nh + hh) * rope, static_cast<size_t>(rope) * 4);
    }
  }

  // One latent "KV head" for every query head; values are the same rows.
  const cpu::KvRows rows{m.row.data(), m.row.data(), batch.slots.data()};
  float* olat = m.olat.data();
  cpu::paged_attention(olat, m.qlat.data(), kv, batch.positions.data(), batch.seq_of_token.data(),
                       batch.block_tables.data(), n, nh, c.query_scale(), pool, &rows);

  // Each head's output: Wuv over the first lora entries of its attended row.
  for (int64_t hh = 0; hh < nh; ++hh) {
    for (int64_t t = 0; t < n; ++t) {
      std::memcpy(m.in.data() + t * lora, olat + (t * nh + hh) * width, static_cast<size_t>(lora) * 4);
    }
    linear_forward(m.out.data(), w.uv[static_cast<size_t>(hh)], m.in.data(), n, pool);
    for (int64_t t = 0; t < n; ++t) {
      std::memcpy(attn + (t * nh + hh) * v, m.out.data() + t * v, static_cast<size_t>(v) * 4);
    }
  }
}

}  // namespace parallm
