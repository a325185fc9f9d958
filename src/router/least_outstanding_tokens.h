// Policy: the healthy replica with the fewest outstanding tokens (work it
// still has to do), so long prompts and long generations count for what they
// cost, not as one request each. Ties go round-robin so equal replicas share
// a burst. If no replica is healthy, the least-loaded one is used anyway: a
// request is better tried than refused while replicas recover.
#pragma once
#include "router/routing_policy.h"

namespace parallm {

class LeastOutstandingTokens : public RoutingPolicy {
 public:
  int choose(const std::vector<ReplicaLoad>& replicas) override;
  std::string name() const override { return "least-outstanding-tokens"; }

 private:
  size_t next_ = 0;  // round-robin start among ties
};

}  // namespace parallm
