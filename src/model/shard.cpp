#include "model/shard.h"

#include "util/check.h"
#include "util/log.h"

namespace parallm {

LocalShape local_shape(const ModelConfig& c, const ShardSpec& s) {
  LocalShape ls;
  const int64_t tp = s.tp_size;
  if (tp < 1 || s.tp_rank < 0 || s.tp_rank >= tp) throw InputError("invalid tensor-parallel rank");
  if (c.n_head % tp != 0) {
    throw InputError(
        strfmt("--tp %lld does not divide the model's %lld attention heads", (long long)tp, (long long)c.n_head));
  }
  ls.n_head_local = c.n_head / tp;
  ls.head_begin = s.tp_rank * ls.n_head_local;
  if (c.mla()) {
    // Every rank caches the whole latent row its heads decompress.
    ls.n_kv_head_local = 1;
    ls.kv_head_begin = 0;
  } else if (tp <= c.n_kv_head) {
    if (c.n_kv_head % tp != 0) {
      throw InputError(
          strfmt("--tp %lld does not divide the model's %lld KV heads", (long long)tp, (long long)c.n_kv_head));
    }
    ls.n_kv_head_local = c.n_kv_head / tp;
    ls.kv_head_begin = s.tp_rank * ls.n_kv_head_local;
  } else {
    // More ranks than KV heads: each rank keeps the one KV head its query heads use.
    if (tp % c.n_kv_head != 0) {
      throw InputError(strfmt("--tp %lld must be a multiple of the model's %lld KV heads when larger", (long long)tp,
                              (long long)c.n_kv_head));
    }
    ls.n_kv_head_local = 1;
    ls.kv_head_begin = ls.head_begin / (c.n_head / c.n_kv_head);
  }
  if (c.n_ff % tp != 0) {
    throw InputError(strfmt("--tp %lld does not divide the FFN width %lld", (long long)tp, (long long)c.n_ff));
  }
  ls.n_ff_local = c.n_ff / tp;
  ls.ff_begin = s.tp_rank * ls.n_ff_local;
  if (c.n_ff_shared % tp != 0) {
    throw InputError(strfmt("--tp %lld does not divide the shared expert's FFN width %lld", (long long)tp,
                            (long long)c.n_ff_shared));
  }
  ls.n_ff_shared_local = c.n_ff_shared / tp;
  if (c.dense_ff() % tp != 0) {
    throw InputError(
        strfmt("--tp %lld does not divide the dense FFN width %lld", (long long)tp, (long long)c.dense_ff()));
  }
  ls.n_ff_dense_local = c.dense_ff() / tp;
  ls.ff_dense_begin = s.tp_rank * ls.n_ff_dense_local;
  ls.ff_shared_begin = s.tp_rank * ls.n_ff_shared_local;
  ls.layer_begin = s.layer_begin;
  ls.layer_end = s.layer_end < 0 ? c.n_layer : s.layer_end;
  if (ls.layer_begin < 0 || ls.layer_begin >= ls.layer_end || ls.layer_end > c.n_layer) {
    throw InputError("invalid pipeline layer range");
  }
  ls.first_stage = ls.layer_begin == 0;
  ls.last_stage = ls.layer_end == c.n_layer;
  if (c.is_moe()) {
    if (s.ep_size < 1 || c.n_expert % s.ep_size != 0) {
      throw InputError(strfmt("--ep %d does not divide the model's %lld experts", s.ep_size, (long long)c.n_expert));
    }
    const int64_t per = c.n_expert / s.ep_size;
    ls.expert_begin = s.ep_rank * per;
    ls.expert_end = ls.expert_begin + per;
  } else if (s.ep_size > 1) {
    throw InputError("--ep needs a mixture-of-experts model; this model is dense");
  }
  return ls;
}

}  // namespace parallm
