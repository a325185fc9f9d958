// Emulated KV write: the kernel's grid (kv_cache.cu) as one loop over its
// items, each math/kv_cache.h's per-item store (order does not matter: every
// item writes its own bytes).
#include "kernels/cuda/kv_cache.h"

#include <type_traits>

#include "kernels/cuda/attention_checks.h"
#include "kernels/cuda/emulated/launchers.h"
#include "kernels/cuda/math/kv_cache.h"

namespace parallm::cuda::emulated {

static_assert(std::is_same_v<decltype(&kv_write), decltype(&cuda::kv_write)>);

void kv_write(const PagedKv& kv, const float* k, const float* v, const int64_t* slots, int64_t n_tokens,
              StreamHandle /*stream*/) {
  check_kv_write_args(kv, k, v, n_tokens);
  if (kv.dtype == DType::kQ8_0) {
    const int64_t items = n_tokens * kv.n_kv_head * (kv.head_dim / kQK8_0);
    for (int64_t i = 0; i < items; ++i) {
      kv_write_q8_0_item(kv.k, kv.v, kv.block_size, kv.n_kv_head, kv.head_dim, k, v, slots, i);
    }
    return;
  }
  const int64_t items = n_tokens * kv.n_kv_head * kv.head_dim;
  for (int64_t i = 0; i < items; ++i) {
    kv_write_value_item(kv.k, kv.v, kv.dtype, kv.block_size, kv.n_kv_head, kv.head_dim, k, v, slots, i);
  }
}

}  // namespace parallm::cuda::emulated
