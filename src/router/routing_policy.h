// A routing policy picks the replica for a new request from a snapshot of
// every replica's load and health. Policies are pure functions of that
// snapshot (plus their own counters), one per file.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace parallm {

struct ReplicaLoad {
  int64_t outstanding_tokens = 0;  // prompt tokens not yet computed + tokens not yet generated
  int64_t requests = 0;            // requests in flight
  bool healthy = true;
};

class RoutingPolicy {
 public:
  virtual ~RoutingPolicy() = default;
  // Index of the chosen replica, or -1 when the list is empty.
  virtual int choose(const std::vector<ReplicaLoad>& replicas) = 0;
  virtual std::string name() const = 0;
};

// "least-outstanding-tokens" (the default).
std::unique_ptr<RoutingPolicy> make_routing_policy(const std::string& name);

}  // namespace parallm
