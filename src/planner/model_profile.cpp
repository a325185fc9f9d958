// profile_forward_s, profile_decode_kv_s, ColdDecode: see model_profile.h.
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

double profile_decode_kv_s(const ModelProfile& p, double ctx_tokens) {
  const auto& t = p.decode_kv_ms_by_ctx;
  if (t.empty()) return ctx_tokens * p.decode_kv_token_ns * 1e-9;
  if (ctx_tokens <= 0) return 0;
  double n0 = 0, ms0 = 0;
  size_t i = 0;
  while (i + 1 < t.size() && ctx_tokens > t[i].first) {
    n0 = t[i].first, ms0 = t[i].second;
    ++i;
  }
  const auto [n1, ms1] = t[i];
  return (ms0 + (ctx_tokens - n0) * (ms1 - ms0) / (n1 - n0)) * 1e-3;
}

double ColdDecode::extra_s(int64_t k, double prompt, double ctx_tokens) const {
  const auto& curves = extra_ms;
  if (curves.empty() || k < 0 || prompt <= 0 || prompt_tokens <= 0) return 0;
  auto at = [k](const std::vector<double>& extra) {
    return k < static_cast<int64_t>(extra.size()) ? extra[static_cast<size_t>(k)] : 0.0;
  };
  double ms = 0;
  if (ctx_tokens <= curves.front().first) {
    ms = at(curves.front().second) * std::max(0.0, ctx_tokens) / curves.front().first;
  } else if (ctx_tokens >= curves.back().first) {
    ms = at(curves.back().second);
  } else {
    size_t i = 1;
    while (ctx_tokens > curves[i].first) ++i;
    const double w = (ctx_tokens - curves[i - 1].first) / (curves[i].first - curves[i - 1].first);
    ms = (1 - w) * at(curves[i - 1].second) + w * at(curves[i].second);
  }
  return ms * std::min(1.0, prompt / prompt_tokens) * 1e-3;
}

}  // namespace parallm::planner
