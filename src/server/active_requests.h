// ActiveRequests: the requests the server is generating for, so that the
// server can tick them (take late tokens, send heartbeats) and end them all
// with an error when the backend dies or the server stops. Each request
// removes itself once its response is queued whole or its client left.
#pragma once
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace parallm {

class ActiveRequest {
 public:
  virtual ~ActiveRequest() = default;
  // On the HTTP loop thread about every 100 ms: schedule work if any is due.
  virtual void tick(std::chrono::steady_clock::time_point now) = 0;
  // Ends the request with an error (a 5xx body, or an SSE error event and
  // [DONE]), aborting what it still generates. Runs on a worker thread.
  virtual void fail(int status, const std::string& message) = 0;
  // Ends the request now with what it has (a graceful shutdown past its
  // timeout): each unfinished choice gets finish_reason `reason`, a stream
  // its final chunks and [DONE]. Runs on a worker thread.
  virtual void finish_now(const std::string& reason) = 0;
};

class ActiveRequests {
 public:
  void add(const std::shared_ptr<ActiveRequest>& r) {
    std::lock_guard<std::mutex> lock(mu_);
    live_[r.get()] = r;
  }
  void remove(const ActiveRequest* r) {
    std::shared_ptr<ActiveRequest> keep;  // destroyed outside the lock
    std::lock_guard<std::mutex> lock(mu_);
    auto it = live_.find(r);
    if (it == live_.end()) return;
    keep = std::move(it->second);
    live_.erase(it);
  }
  std::vector<std::shared_ptr<ActiveRequest>> snapshot() const {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<std::shared_ptr<ActiveRequest>> out;
    out.reserve(live_.size());
    for (const auto& kv : live_) out.push_back(kv.second);
    return out;
  }
  size_t size() const {
    std::lock_guard<std::mutex> lock(mu_);
    return live_.size();
  }

 private:
  mutable std::mutex mu_;
  std::unordered_map<const ActiveRequest*, std::shared_ptr<ActiveRequest>> live_;
};

}  // namespace parallm
