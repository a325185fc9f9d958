// profile_forward_s: see model_profile.h.
#include "planner/model_profile.h"

#include <algorithm>

namespace parallm::planner {

double profile_forward_s(const ModelProfile& p, double tokens) {
  const auto& t = p.forward_ms_by_tokens;
  if (t.empty()) return 0;
  if (t.size() == 1 || tokens <= t.front().first) return t.front().second * 1e-3;
  size_t i = 1;
  while (i + 1 < t.size() && tokens > t[i].first) ++i;
  const auto [n0, ms0] = t[i - 1];
  const auto [n1, ms1] = t[i];
  const double ms = ms0 + (tokens - n0) * (ms1 - ms0) / (n1 - n0);
  return std::max(ms0, ms) * 1e-3;
}

}  // namespace parallm::planner
