// KvPool: the tensor side of the paged KV cache on one rank: for each of the
// rank's layers, K and V pools of [n_blocks, n_kv_head_local, block_size, row_dim]
// (MLA: one pool, its latent rows read as both keys and values)
// in the cache dtype (f32, f16, bf16 or q8_0; kernels/cpu/attention.h), all
// in one zero-filled mapping (util/zeroed_memory.h). Which block belongs to
// which sequence is decided by the (tensor-free) block manager; this class
// only holds the memory.
#pragma once
#include <cstdint>

#include "core/dtype.h"
#include "kernels/cpu/attention.h"
#include "util/zeroed_memory.h"

namespace parallm {

class KvPool {
 public:
  KvPool(int64_t n_layers, int64_t n_blocks, int64_t block_size, int64_t n_kv_head, int64_t head_dim, DType dtype,
         bool values_in_keys = false);

  cpu::PagedKv layer(int64_t local_layer);
  int64_t n_blocks() const { return n_blocks_; }
  int64_t block_size() const { return block_size_; }
  size_t bytes() const;
  // Bytes one token's K and V take across this rank's layers.
  static size_t bytes_per_token(int64_t n_layers, int64_t n_kv_head, int64_t head_dim, DType dtype,
                                bool values_in_keys = false);

 private:
  int64_t n_layers_, n_blocks_, block_size_, n_kv_head_, head_dim_;
  DType dtype_;
  bool values_in_keys_ = false;
  size_t layer_bytes_ = 0;  // one layer's K (or V): n_blocks * n_kv_head * block_size * head_dim * elem
  ZeroedMemory memory_;     // [n_layers][K, V][layer_bytes_] ([n_layers][K] when values are in the keys)
};

}  // namespace parallm
