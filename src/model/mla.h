// Multi-head latent attention (DeepSeek-V2 / V3), in its absorbed form, so
// that the paged cache holds only the compressed latent:
//
//   q        = h Wq                  (or rmsnorm(h Wq_a) Wq_b)    [n_head, nope + rope]
//   c, k_pe  = h Wkv_a                                            [kv_lora], [rope]
//   c        = rmsnorm(c) ; k_pe = rope(k_pe) ; q_pe = rope(q_pe)
//   cache row: [c | k_pe]                                         one per token, shared by every head
//   per head: k_nope = Wuk c, v = Wuv c ; scores q_nope.k_nope + q_pe.k_pe
//            = (Wuk^T q_nope).c + q_pe.k_pe : the query absorbs Wuk, so the
//   attention runs over the cache rows as one KV head (values: the same rows,
//   of which the first kv_lora entries count), and out = Wuv (attn over c).
//
// Wuk, Wuv are each head's rows of kv_b [n_head (nope + v), kv_lora] (older
// GGUFs, Hugging Face), or the split attn_k_b [n_head, kv_lora, nope] and
// attn_v_b [n_head, v, kv_lora] of newer llama.cpp files. Tensor parallel
// splits the heads; every rank computes and caches the whole latent.
#pragma once
#include <vector>

#include "config/model_config.h"
#include "kernels/cpu/attention.h"
#include "loader/model_file.h"
#include "model/forward_batch.h"
#include "model/linear.h"
#include "model/shard.h"
#include "util/huge_pages.h"
#include "util/thread_pool.h"

namespace parallm {

struct MlaWeights {
  Linear wq;                         // column-parallel [n_head_local (nope + rope), n_embd or q_lora]
  Linear wq_a;                       // q_lora > 0: [q_lora, n_embd], replicated
  const float* q_a_norm = nullptr;   // [q_lora]
  Linear wkv_a;                      // [kv_lora + rope, n_embd], replicated
  const float* kv_a_norm = nullptr;  // [kv_lora]
  std::vector<float> uk_t;           // [n_head_local, kv_lora, nope] f32: Wuk^T of each local head
  std::vector<Linear> uv;            // per local head [v, kv_lora]
};

// Intermediates of one MLA forward (sized to the largest batch seen).
struct MlaScratch {
  HugeVector<float> q;        // [n_tokens, n_head_local, nope + rope]
  HugeVector<float> qa;       // [n_tokens, q_lora]
  HugeVector<float> kva;      // [n_tokens, kv_lora + rope] h Wkv_a
  HugeVector<float> row;      // [n_tokens, kv_lora + rope] the cache rows
  HugeVector<float> qlat;     // [n_tokens, n_head_local, kv_lora + rope] absorbed queries
  HugeVector<float> olat;     // [n_tokens, n_head_local, kv_lora + rope] attention over the rows
  HugeVector<float> pe;       // [n_tokens, n_head_local, rope]
  HugeVector<float> in, out;  // [n_tokens, max(nope, kv_lora, v)] one head's rows, gathered
};

MlaWeights load_mla(const ModelFile& file, WeightStore& store, const ModelConfig& c, const LocalShape& s,
                    int64_t layer);

// attn [n_tokens, n_head_local * v_head_dim] = MLA(h [n_tokens, n_embd]),
// before the output projection; writes the batch's rows into kv.
// rope_cs: [n_tokens, rope] cos / sin of the batch's positions (ops.h).
void mla_attention(float* attn, const float* h, const MlaWeights& w, const ModelConfig& c, const LocalShape& s,
                   const ForwardBatch& batch, const cpu::PagedKv& kv, const float* rope_cs, MlaScratch& scratch,
                   ThreadPool& pool);

}  // namespace parallm
