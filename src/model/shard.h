// ShardSpec: which piece of the model one rank holds. Tensor parallel splits
// heads and FFN columns (Megatron: column-parallel QKV and gate/up, row-parallel
// O and down); pipeline parallel gives each stage a contiguous layer range;
// expert parallel gives each rank a subset of experts. All "local" sizes in
// model code are per rank and derived here, in one place.
#pragma once
#include <cstdint>
#include <string>

#include "config/model_config.h"

namespace parallm {

struct ShardSpec {
  int tp_rank = 0;
  int tp_size = 1;
  int64_t layer_begin = 0;
  int64_t layer_end = -1;  // -1: through the last layer
  int ep_rank = 0;
  int ep_size = 1;
};

// Per-rank sizes for one model and shard, validated.
struct LocalShape {
  int64_t n_head_local = 0;     // query heads on this rank
  int64_t n_kv_head_local = 0;  // KV heads on this rank (replicated when tp > n_kv_head; MLA: its one latent)
  int64_t head_begin = 0;       // first global query head
  int64_t kv_head_begin = 0;    // first global KV head
  int64_t n_ff_local = 0;       // FFN columns on this rank (each expert's for MoE)
  int64_t ff_begin = 0;
  int64_t n_ff_dense_local = 0;  // the dense layers' FFN columns (the leading dense layers of a MoE)
  int64_t ff_dense_begin = 0;
  int64_t n_ff_shared_local = 0;  // shared-expert FFN columns on this rank (tp splits them like a dense FFN)
  int64_t ff_shared_begin = 0;
  int64_t layer_begin = 0, layer_end = 0;
  int64_t expert_begin = 0, expert_end = 0;  // experts owned by this rank (ep)
  bool first_stage = true, last_stage = true;
};

// Throws InputError when the model cannot be split this way (e.g. tp does not
// divide the heads), naming the valid choices.
LocalShape local_shape(const ModelConfig& c, const ShardSpec& s);

}  // namespace parallm
