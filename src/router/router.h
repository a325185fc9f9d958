// Router: the bookkeeping in front of --dp replicas. route() picks a replica
// with the policy and charges it the request's tokens; progress() and
// finish() give them back as the replica works; health marks come from the
// caller (a replica whose requests fail is skipped for a cool-down).
// Thread-safe; no engine types, so it is tested with plain numbers.
#pragma once
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "router/routing_policy.h"

namespace parallm {

class Router {
 public:
  Router(int n_replicas, std::unique_ptr<RoutingPolicy> policy);

  // Chooses a replica for a request that will cost `tokens` and charges it.
  int route(int64_t tokens);
  // `tokens` of a request on `replica` are done (computed or generated).
  void progress(int replica, int64_t tokens);
  // A request ended with `remaining` tokens still charged.
  void finish(int replica, int64_t remaining);
  // now_s: a monotonic clock in seconds; unhealthy until now_s + cooldown_s.
  void mark_unhealthy(int replica, double now_s, double cooldown_s);
  void refresh_health(double now_s);
  std::vector<ReplicaLoad> loads() const;

 private:
  mutable std::mutex mu_;
  std::unique_ptr<RoutingPolicy> policy_;
  std::vector<ReplicaLoad> loads_;
  std::vector<double> unhealthy_until_s_;
};

}  // namespace parallm
