#include "model/kv_pool.h"

#include <string>

#include "util/check.h"

namespace parallm {

namespace {
// Bytes of one head's row of head_dim values in the cache.
size_t row_bytes(DType t, int64_t head_dim) {
  if (!cpu::kv_dtype_supported(t, head_dim)) {
    if (t == DType::kQ8_0) {
      throw InputError("a q8_0 KV cache needs a head size that is a multiple of 32 (this model's is " +
                       std::to_string(head_dim) + "); use --kv-dtype f16");
    }
    throw InputError(std::string("KV cache dtype must be f32, f16, bf16 or q8_0, not ") + dtype_name(t));
  }
  return dtype_row_bytes(t, head_dim);
}
}  // namespace

KvPool::KvPool(int64_t n_layers, int64_t n_blocks, int64_t block_size, int64_t n_kv_head, int64_t head_dim, DType dtype,
               bool values_in_keys)
    : n_layers_(n_layers),
      n_blocks_(n_blocks),
      block_size_(block_size),
      n_kv_head_(n_kv_head),
      head_dim_(head_dim),
      dtype_(dtype),
      values_in_keys_(values_in_keys) {
  PARALLM_CHECK(n_layers > 0 && n_blocks > 0 && block_size > 0);
  layer_bytes_ = static_cast<size_t>(n_blocks * block_size * n_kv_head) * row_bytes(dtype, head_dim);
  memory_ = ZeroedMemory((values_in_keys ? 1 : 2) * static_cast<size_t>(n_layers) * layer_bytes_);
  memory_.prefault();
}

cpu::PagedKv KvPool::layer(int64_t l) {
  PARALLM_CHECK(l >= 0 && l < n_layers_);
  cpu::PagedKv kv;
  const size_t pools = values_in_keys_ ? 1 : 2;
  uint8_t* base = static_cast<uint8_t*>(memory_.data()) + pools * static_cast<size_t>(l) * layer_bytes_;
  kv.k = base;
  kv.v = values_in_keys_ ? base : base + layer_bytes_;
  kv.dtype = dtype_;
  kv.block_size = block_size_;
  kv.n_kv_head = n_kv_head_;
  kv.head_dim = head_dim_;
  return kv;
}

size_t KvPool::bytes() const { return memory_.size(); }

size_t KvPool::bytes_per_token(int64_t n_layers, int64_t n_kv_head, int64_t head_dim, DType dtype,
                               bool values_in_keys) {
  return (values_in_keys ? 1 : 2) * static_cast<size_t>(n_layers * n_kv_head) * row_bytes(dtype, head_dim);
}

}  // namespace parallm
