// Token-bucket rate limiter (see rate_limiter.h). Idle buckets are dropped
// once they are full again so the map does not grow with every client.
#include "server/rate_limiter.h"

#include <algorithm>

namespace parallm {

bool RateLimiter::allow(const std::string& key, double now_s, double* retry_after_s) {
  if (!enabled()) return true;
  std::lock_guard<std::mutex> lock(mu_);
  const double rate_per_s = per_minute_ / 60.0;
  if (buckets_.size() > 100000) {
    for (auto it = buckets_.begin(); it != buckets_.end();) {
      if (it->second.tokens + (now_s - it->second.last_s) * rate_per_s >= per_minute_)
        it = buckets_.erase(it);
      else
        ++it;
    }
  }
  auto [it, inserted] = buckets_.try_emplace(key, Bucket{per_minute_, now_s});
  Bucket& b = it->second;
  b.tokens = std::min(per_minute_, b.tokens + (now_s - b.last_s) * rate_per_s);
  b.last_s = now_s;
  if (b.tokens >= 1.0) {
    b.tokens -= 1.0;
    return true;
  }
  if (retry_after_s) *retry_after_s = (1.0 - b.tokens) / rate_per_s;
  return false;
}

bool RateLimiter::allow(const std::string& key, double* retry_after_s) {
  const double now = std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  return allow(key, now, retry_after_s);
}

}  // namespace parallm
