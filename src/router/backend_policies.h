// The router's three policies over HTTP backends, as pure functions of a load
// snapshot (ReplicaLoad per backend) so they are unit-tested with plain
// numbers:
//  - round-robin: the next healthy backend after the last one chosen;
//  - least-tokens: the healthy backend with the fewest outstanding tokens
//    (LeastOutstandingTokens, shared with `serve --dp`);
//  - prefix-affinity: consistent hashing of the request's prompt prefix over
//    the healthy backends (kVirtualNodes points per backend on a 64-bit ring,
//    so ejecting one backend moves only its own prefixes), unless the owner
//    is overloaded: more than 2x the least-loaded backend's outstanding tokens
//    plus kAffinitySlackTokens, then least-tokens.
// Each returns the chosen index, or -1 when no backend is healthy (the
// router answers 503 rather than trying a backend it knows is down).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "router/routing_policy.h"

namespace parallm {

enum class BackendPolicy { kLeastTokens, kPrefixAffinity, kRoundRobin };

// "least-tokens" | "prefix-affinity" | "round-robin"; throws InputError otherwise.
BackendPolicy parse_backend_policy(const std::string& name);
const char* backend_policy_name(BackendPolicy policy);

constexpr int kVirtualNodes = 64;
constexpr int64_t kAffinitySlackTokens = 1024;

uint64_t fnv1a64(std::string_view text);

int choose_round_robin(const std::vector<ReplicaLoad>& loads, uint64_t& cursor);
int choose_least_tokens(const std::vector<ReplicaLoad>& loads, uint64_t& cursor);
int choose_prefix_affinity(const std::vector<ReplicaLoad>& loads, uint64_t prefix_hash, uint64_t& cursor);

// The text prefix-affinity hashes: the first `n_chars` of the request's
// "prompt" (a string, or the first string of a list) or of the concatenated
// "messages" contents (text parts of content lists included). "" when the
// body is not JSON or holds neither.
std::string affinity_text(std::string_view body, size_t n_chars = 256);

}  // namespace parallm
