// Router policies over HTTP backends (see backend_policies.h).
#include "router/backend_policies.h"

#include <limits>
#include <nlohmann/json.hpp>

#include "util/check.h"
#include "util/json_parse.h"

namespace parallm {

BackendPolicy parse_backend_policy(const std::string& name) {
  if (name == "least-tokens") return BackendPolicy::kLeastTokens;
  if (name == "prefix-affinity") return BackendPolicy::kPrefixAffinity;
  if (name == "round-robin") return BackendPolicy::kRoundRobin;
  throw InputError("unknown --policy '" + name + "' (known: least-tokens, prefix-affinity, round-robin)");
}

const char* backend_policy_name(BackendPolicy policy) {
  switch (policy) {
    case BackendPolicy::kLeastTokens:
      return "least-tokens";
    case BackendPolicy::kPrefixAffinity:
      return "prefix-affinity";
    case BackendPolicy::kRoundRobin:
      return "round-robin";
  }
  return "?";
}

uint64_t fnv1a64(std::string_view text) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

namespace {

// splitmix64 finalizer: spreads FNV's weak low bits over the ring.
uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

int choose_round_robin(const std::vector<ReplicaLoad>& loads, uint64_t& cursor) {
  const size_t n = loads.size();
  for (size_t k = 0; k < n; ++k) {
    const size_t i = (cursor + k) % n;
    if (!loads[i].healthy) continue;
    cursor = i + 1;
    return static_cast<int>(i);
  }
  return -1;
}

int choose_least_tokens(const std::vector<ReplicaLoad>& loads, uint64_t& cursor) {
  const size_t n = loads.size();
  int best = -1;
  for (size_t k = 0; k < n; ++k) {
    const size_t i = (cursor + k) % n;  // ties rotate so equal backends share a burst
    if (!loads[i].healthy) continue;
    if (best < 0 || loads[i].outstanding_tokens < loads[static_cast<size_t>(best)].outstanding_tokens)
      best = static_cast<int>(i);
  }
  if (best >= 0) cursor = static_cast<uint64_t>(best) + 1;
  return best;
}

int choose_prefix_affinity(const std::vector<ReplicaLoad>& loads, uint64_t prefix_hash, uint64_t& cursor) {
  // The owner: the healthy backend whose ring point follows the key's most
  // closely (distance measured clockwise, wrapping).
  const uint64_t key = mix64(prefix_hash);
  int owner = -1;
  uint64_t best_dist = std::numeric_limits<uint64_t>::max();
  int64_t min_load = std::numeric_limits<int64_t>::max();
  for (size_t i = 0; i < loads.size(); ++i) {
    if (!loads[i].healthy) continue;
    min_load = std::min(min_load, loads[i].outstanding_tokens);
    for (int v = 0; v < kVirtualNodes; ++v) {
      const uint64_t point = mix64((static_cast<uint64_t>(i) << 32) ^ static_cast<uint64_t>(v) ^ 0x5bd1e995ull);
      const uint64_t dist = point - key;  // unsigned wrap = clockwise distance
      if (dist < best_dist) {
        best_dist = dist;
        owner = static_cast<int>(i);
      }
    }
  }
  if (owner < 0) return -1;
  if (loads[static_cast<size_t>(owner)].outstanding_tokens > 2 * min_load + kAffinitySlackTokens)
    return choose_least_tokens(loads, cursor);
  return owner;
}

std::string affinity_text(std::string_view body, size_t n_chars) {
  // A client's body: bounded like the server's (util/json_parse.h).
  const auto parsed = try_parse_json<nlohmann::json>(body, JsonLimits{kRequestJsonDepth, kRequestJsonMembers});
  if (!parsed || !parsed->is_object()) return "";
  const nlohmann::json& j = *parsed;
  std::string text;
  if (auto it = j.find("prompt"); it != j.end()) {
    if (it->is_string())
      text = it->get<std::string>();
    else if (it->is_array() && !it->empty() && (*it)[0].is_string())
      text = (*it)[0].get<std::string>();
    else if (it->is_array())
      text = it->dump();  // token ids: their text form hashes as well
  } else if (auto m = j.find("messages"); m != j.end() && m->is_array()) {
    for (const auto& msg : *m) {
      if (text.size() >= n_chars) break;
      if (!msg.is_object()) continue;
      if (auto role = msg.find("role"); role != msg.end() && role->is_string()) text += role->get<std::string>() + ":";
      auto c = msg.find("content");
      if (c == msg.end()) continue;
      if (c->is_string()) {
        text += c->get<std::string>();
      } else if (c->is_array()) {
        for (const auto& part : *c)
          if (part.is_object() && part.contains("text") && part["text"].is_string())
            text += part["text"].get<std::string>();
      }
      text += "\n";
    }
  }
  if (text.size() > n_chars) text.resize(n_chars);
  return text;
}

}  // namespace parallm
