#include "core/capacity.h"

#include <algorithm>
#include <cmath>

#include "util/check.h"
#include "util/log.h"

namespace parallm {

DeviceFit fit_device(double budget, double utilization, double weights, double activations, double overhead,
                     double kv_unit_bytes, int64_t needed_units) {
  DeviceFit f;
  f.usable = budget * utilization;
  f.left = f.usable - weights - activations - overhead;
  f.weights_fit = f.left > 0;
  f.kv_bytes = std::max(0.0, f.left);
  f.kv_units = kv_unit_bytes > 0 ? static_cast<int64_t>(std::floor(f.kv_bytes / kv_unit_bytes)) : 0;
  f.fits = f.weights_fit && f.kv_units >= std::max<int64_t>(1, needed_units);
  return f;
}

std::string capacity_advice(size_t need, uint64_t budget, const LayoutAdvice& layout) {
  std::string advice;
  for (int n = 2; n <= 64; n *= 2) {
    if (need / static_cast<size_t>(n) <= budget) {
      advice = strfmt("try --tp %d, --pp %d", n * layout.tp, n * layout.pp);
      break;
    }
  }
  const bool can_quantize = !layout.weight_dtype || *layout.weight_dtype != DType::kQ4_0;
  if (can_quantize) advice += advice.empty() ? "try --dtype q4_0" : " or --dtype q8_0";
  if (advice.empty()) advice = "use a smaller --ctx-size or more devices";
  return advice;
}

void check_rank_fits(const std::string& device, const RankNeed& need, uint64_t budget, const LayoutAdvice& layout) {
  // The pool asked for is one unit: it fits when budget - weights holds it.
  const DeviceFit fit = fit_device(static_cast<double>(budget), 1.0, static_cast<double>(need.weights), 0, 0,
                                   static_cast<double>(need.kv_cache), 1);
  const size_t total = need.weights + need.kv_cache;
  if (fit.fits || (need.kv_cache == 0 && fit.left >= 0)) return;
  throw CapacityError(
      strfmt("needs %s per device at tp=%d, pp=%d (weights %s + KV cache %s for %lld tokens), %s has %s: %s",
             format_bytes(static_cast<double>(total)).c_str(), layout.tp, layout.pp,
             format_bytes(static_cast<double>(need.weights)).c_str(),
             format_bytes(static_cast<double>(need.kv_cache)).c_str(), (long long)need.kv_tokens, device.c_str(),
             format_bytes(static_cast<double>(budget)).c_str(), capacity_advice(total, budget, layout).c_str()));
}

}  // namespace parallm
