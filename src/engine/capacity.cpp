#include "engine/capacity.h"

#include "util/check.h"
#include "util/log.h"

namespace parallm {

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
  const size_t total = need.weights + need.kv_cache;
  if (total <= budget) return;
  throw CapacityError(
      strfmt("needs %s per device at tp=%d, pp=%d (weights %s + KV cache %s for %lld tokens), %s has %s: %s",
             format_bytes(static_cast<double>(total)).c_str(), layout.tp, layout.pp,
             format_bytes(static_cast<double>(need.weights)).c_str(),
             format_bytes(static_cast<double>(need.kv_cache)).c_str(), (long long)need.kv_tokens, device.c_str(),
             format_bytes(static_cast<double>(budget)).c_str(), capacity_advice(total, budget, layout).c_str()));
}

}  // namespace parallm
