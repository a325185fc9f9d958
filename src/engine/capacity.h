// The one capacity check of a rank: does its share of the weights plus its
// KV cache fit the device's budget, and if not, what would. The engine runs
// it for every rank before loading (CPU) or uploading (devices); `serve`
// sizes its KV pool with the same numbers (apps/cmd_serve.cpp).
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "core/dtype.h"

namespace parallm {

struct RankNeed {
  size_t weights = 0;     // bytes of this rank's weights on its device
  size_t kv_cache = 0;    // bytes of its KV cache
  int64_t kv_tokens = 0;  // tokens that cache holds
};

struct LayoutAdvice {
  int tp = 1, pp = 1;
  std::optional<DType> weight_dtype;  // --dtype in force
};

// The advice for a need that does not fit: the smallest 2^k split of
// tp / pp that would (weights and KV shrink about 1/n), a quantized
// --dtype, else a smaller context.
std::string capacity_advice(size_t need, uint64_t budget, const LayoutAdvice& layout);

// Throws CapacityError ("needs 14.20 GiB per device at tp=1, pp=1 (weights
// ... + KV cache ... for N tokens), cuda:0 has 8.00 GiB: try --tp 2, ...")
// when weights + KV exceed the budget.
void check_rank_fits(const std::string& device, const RankNeed& need, uint64_t budget, const LayoutAdvice& layout);

}  // namespace parallm
