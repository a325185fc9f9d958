// Router bookkeeping (see router.h).
#include "router/router.h"

#include "util/check.h"

namespace parallm {

Router::Router(int n_replicas, std::unique_ptr<RoutingPolicy> policy)
    : policy_(std::move(policy)),
      loads_(static_cast<size_t>(n_replicas)),
      unhealthy_until_s_(static_cast<size_t>(n_replicas), 0) {
  PARALLM_CHECK(n_replicas > 0 && policy_);
}

int Router::route(int64_t tokens) {
  std::lock_guard<std::mutex> lock(mu_);
  const int r = policy_->choose(loads_);
  PARALLM_CHECK(r >= 0 && r < static_cast<int>(loads_.size()));
  loads_[static_cast<size_t>(r)].outstanding_tokens += tokens;
  loads_[static_cast<size_t>(r)].requests += 1;
  return r;
}

void Router::progress(int replica, int64_t tokens) {
  std::lock_guard<std::mutex> lock(mu_);
  loads_.at(static_cast<size_t>(replica)).outstanding_tokens -= tokens;
}

void Router::finish(int replica, int64_t remaining) {
  std::lock_guard<std::mutex> lock(mu_);
  ReplicaLoad& l = loads_.at(static_cast<size_t>(replica));
  l.outstanding_tokens -= remaining;
  l.requests -= 1;
}

void Router::mark_unhealthy(int replica, double now_s, double cooldown_s) {
  std::lock_guard<std::mutex> lock(mu_);
  unhealthy_until_s_.at(static_cast<size_t>(replica)) = now_s + cooldown_s;
  loads_[static_cast<size_t>(replica)].healthy = false;
}

void Router::refresh_health(double now_s) {
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t i = 0; i < loads_.size(); ++i) loads_[i].healthy = now_s >= unhealthy_until_s_[i];
}

std::vector<ReplicaLoad> Router::loads() const {
  std::lock_guard<std::mutex> lock(mu_);
  return loads_;
}

}  // namespace parallm
