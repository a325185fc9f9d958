// The paged KV cache on a CUDA device: the same layout, block ids and slots
// as the CPU's (kernels/cpu/attention.h), so a block table means the same
// rows on either backend and a cache written by one reads back identically
// through the other. Per-row math: math/kv_cache.h.
#pragma once
#include <cstdint>

#include "core/dtype.h"
#include "device/stream_handle.h"

namespace parallm::cuda {

// One layer's pools in device memory, field for field cpu::PagedKv:
// [n_blocks, n_kv_head] chunks of block_size rows in the cache dtype
// (f32, f16, bf16: [block_size, head_dim] values; q8_0: the quants
// [block_size, head_dim], then the f16 scales [head_dim / 32, block_size]).
struct PagedKv {
  void* k = nullptr;
  void* v = nullptr;
  DType dtype = DType::kF32;
  int64_t block_size = 16;
  int64_t n_kv_head = 0;
  int64_t head_dim = 0;
};

// Stores k / v rows [n_tokens, n_kv_head * head_dim] at slots [n_tokens]
// (slot = block * block_size + row), bit-identical to cpu::kv_write. A
// cache dtype other than f32 / f16 / bf16 / q8_0, or q8_0 with head_dim not
// a multiple of 32, is an InputError. A negative slot (padding) is skipped;
// with kv.v == kv.k (one pool read as keys and values, MLA's latent) v must
// be k and each row is stored once. One thread per value (per 32-value block
// for q8_0); q8_0 rounds x / d's ties to even, as the CPU's AVX-512 path.
void kv_write(const PagedKv& kv, const float* k, const float* v, const int64_t* slots, int64_t n_tokens,
              StreamHandle stream);

}  // namespace parallm::cuda
