// Per-key request rate limit (--rate-limit N requests per minute per API key,
// or per client address without one): a token bucket of capacity N refilled
// at N/60 per second. allow() answers whether a request may proceed and, if
// not, after how many seconds one will (the Retry-After header).
#pragma once
#include <chrono>
#include <mutex>
#include <string>
#include <unordered_map>

namespace parallm {

class RateLimiter {
 public:
  explicit RateLimiter(double per_minute) : per_minute_(per_minute) {}
  bool enabled() const { return per_minute_ > 0; }
  // now_s: seconds on any monotonic clock (tests pass their own).
  bool allow(const std::string& key, double now_s, double* retry_after_s);
  bool allow(const std::string& key, double* retry_after_s);

 private:
  struct Bucket {
    double tokens;
    double last_s;
  };
  double per_minute_;
  std::mutex mu_;
  std::unordered_map<std::string, Bucket> buckets_;
};

}  // namespace parallm
