// LeastOutstandingTokens (see least_outstanding_tokens.h).
#include "router/least_outstanding_tokens.h"

#include "util/check.h"

namespace parallm {

int LeastOutstandingTokens::choose(const std::vector<ReplicaLoad>& replicas) {
  const size_t n = replicas.size();
  if (n == 0) return -1;
  bool any_healthy = false;
  for (const auto& r : replicas) any_healthy = any_healthy || r.healthy;
  int best = -1;
  for (size_t k = 0; k < n; ++k) {
    const size_t i = (next_ + k) % n;
    const ReplicaLoad& r = replicas[i];
    if (any_healthy && !r.healthy) continue;
    if (best < 0 || r.outstanding_tokens < replicas[static_cast<size_t>(best)].outstanding_tokens)
      best = static_cast<int>(i);
  }
  next_ = (static_cast<size_t>(best) + 1) % n;
  return best;
}

std::unique_ptr<RoutingPolicy> make_routing_policy(const std::string& name) {
  if (name.empty() || name == "least-outstanding-tokens") return std::make_unique<LeastOutstandingTokens>();
  throw InputError("unknown routing policy '" + name + "' (known: least-outstanding-tokens)");
}

}  // namespace parallm
