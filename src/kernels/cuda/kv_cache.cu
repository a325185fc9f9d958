// KV write: one thread per value of the batch's K and V rows (f32, f16,
// bf16), or per 32-value block (q8_0: the block's amax, scale and quants),
// grid-stride; per-item math: math/kv_cache.h.
#include "kernels/cuda/attention_checks.h"
#include "kernels/cuda/kv_cache.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/math/kv_cache.h"

namespace parallm::cuda {

namespace {

// k, v: [n_tokens, n_kv_head * head_dim]; slots: [n_tokens]; items: the
// grid's n_tokens * n_kv_head * head_dim values.
__global__ void kv_write_values_kernel(void* k_pool, void* v_pool, DType t, int64_t block_size, int64_t n_kv_head,
                                       int64_t head_dim, const float* k, const float* v, const int64_t* slots,
                                       int64_t items) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < items;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    kv_write_value_item(k_pool, v_pool, t, block_size, n_kv_head, head_dim, k, v, slots, i);
  }
}

// As above; items: n_tokens * n_kv_head * (head_dim / 32) q8_0 blocks.
__global__ void kv_write_q8_0_kernel(void* k_pool, void* v_pool, int64_t block_size, int64_t n_kv_head,
                                     int64_t head_dim, const float* k, const float* v, const int64_t* slots,
                                     int64_t items) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < items;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    kv_write_q8_0_item(k_pool, v_pool, block_size, n_kv_head, head_dim, k, v, slots, i);
  }
}

}  // namespace

void kv_write(const PagedKv& kv, const float* k, const float* v, const int64_t* slots, int64_t n_tokens,
              StreamHandle stream) {
  check_kv_write_args(kv, k, v, n_tokens);
  if (n_tokens == 0) return;
  if (kv.dtype == DType::kQ8_0) {
    const int64_t items = n_tokens * kv.n_kv_head * (kv.head_dim / kQK8_0);
    kv_write_q8_0_kernel<<<blocks_for(items), kItemThreads, 0, stream>>>(kv.k, kv.v, kv.block_size, kv.n_kv_head,
                                                                         kv.head_dim, k, v, slots, items);
    check_launch("kv_write_q8_0_kernel");
    return;
  }
  const int64_t items = n_tokens * kv.n_kv_head * kv.head_dim;
  kv_write_values_kernel<<<blocks_for(items), kItemThreads, 0, stream>>>(kv.k, kv.v, kv.dtype, kv.block_size,
                                                                         kv.n_kv_head, kv.head_dim, k, v, slots, items);
  check_launch("kv_write_values_kernel");
}

}  // namespace parallm::cuda
