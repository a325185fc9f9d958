// KvPool: the tensor side of the paged KV cache on one rank: for each of the
// rank's layers, K and V pools of [n_blocks, block_size, n_kv_head_local, head_dim]
// in the cache dtype. Which block belongs to which sequence is decided by the
// (tensor-free) block manager; this class only holds the memory.
#pragma once
#include <cstdint>
#include <vector>

#include "core/dtype.h"
#include "kernels/cpu/attention.h"

namespace parallm {

class KvPool {
 public:
  KvPool(int64_t n_layers, int64_t n_blocks, int64_t block_size, int64_t n_kv_head, int64_t head_dim, DType dtype);

  cpu::PagedKv layer(int64_t local_layer);
  int64_t n_blocks() const { return n_blocks_; }
  int64_t block_size() const { return block_size_; }
  size_t bytes() const;
  // Bytes one token's K and V take across this rank's layers.
  static size_t bytes_per_token(int64_t n_layers, int64_t n_kv_head, int64_t head_dim, DType dtype);

 private:
  int64_t n_layers_, n_blocks_, block_size_, n_kv_head_, head_dim_;
  DType dtype_;
  std::vector<std::vector<uint8_t>> k_, v_;  // [n_layers][n_blocks * block_size * n_kv_head * head_dim * elem]
};

}  // namespace parallm
