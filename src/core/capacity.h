// The one capacity rule of a device, for the engine (does a rank's share of
// the weights and its KV pool fit, before anything is loaded or uploaded),
// `serve` (how many KV blocks a device holds after its profiled step) and
// the planner (does a layout fit a GPU, how many tokens of KV it keeps):
//   usable = budget x utilization
//   left   = usable - weights - activations - overhead
//   KV     = max(0, left) in whole units (a block, a token, a pool)
// and it fits when left > 0 and the KV holds the units asked for. When it
// does not, capacity_advice says what would.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "core/dtype.h"

namespace parallm {

struct DeviceFit {
  double usable = 0;         // budget x utilization
  double left = 0;           // usable - weights - activations - overhead (may be < 0)
  double kv_bytes = 0;       // max(0, left)
  int64_t kv_units = 0;      // whole units of kv_unit_bytes in kv_bytes (0 when the unit is 0)
  bool weights_fit = false;  // left > 0
  bool fits = false;         // and kv_units >= max(1, needed_units)
};

DeviceFit fit_device(double budget, double utilization, double weights, double activations, double overhead,
                     double kv_unit_bytes, int64_t needed_units);

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
