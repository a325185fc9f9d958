// The router's policies over plain load numbers.
#include "router/backend_policies.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

#include "util/check.h"

namespace parallm {
namespace {

std::vector<ReplicaLoad> loads(std::vector<int64_t> tokens) {
  std::vector<ReplicaLoad> out(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) out[i].outstanding_tokens = tokens[i];
  return out;
}

TEST(BackendPolicies, ParseNames) {
  EXPECT_EQ(parse_backend_policy("least-tokens"), BackendPolicy::kLeastTokens);
  EXPECT_EQ(parse_backend_policy("prefix-affinity"), BackendPolicy::kPrefixAffinity);
  EXPECT_EQ(parse_backend_policy("round-robin"), BackendPolicy::kRoundRobin);
  EXPECT_THROW(parse_backend_policy("random"), InputError);
}

TEST(BackendPolicies, RoundRobinCyclesAndSkipsEjected) {
  auto l = loads({0, 0, 0});
  uint64_t cursor = 0;
  std::vector<int> order;
  for (int k = 0; k < 6; ++k) order.push_back(choose_round_robin(l, cursor));
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 0, 1, 2}));
  l[1].healthy = false;  // ejected
  order.clear();
  for (int k = 0; k < 4; ++k) order.push_back(choose_round_robin(l, cursor));
  EXPECT_EQ(order, (std::vector<int>{0, 2, 0, 2}));
  l[1].healthy = true;  // re-admitted
  std::set<int> seen;
  for (int k = 0; k < 3; ++k) seen.insert(choose_round_robin(l, cursor));
  EXPECT_EQ(seen.size(), 3u);
  for (auto& x : l) x.healthy = false;
  EXPECT_EQ(choose_round_robin(l, cursor), -1);
}

TEST(BackendPolicies, LeastTokensPicksLeastLoaded) {
  uint64_t cursor = 0;
  EXPECT_EQ(choose_least_tokens(loads({500, 20, 300}), cursor), 1);
  EXPECT_EQ(choose_least_tokens(loads({5, 20, 300}), cursor), 0);
  auto l = loads({500, 20, 300});
  l[1].healthy = false;
  EXPECT_EQ(choose_least_tokens(l, cursor), 2);
  // Ties share: equal backends take turns.
  std::set<int> seen;
  for (int k = 0; k < 3; ++k) seen.insert(choose_least_tokens(loads({7, 7, 7}), cursor));
  EXPECT_EQ(seen.size(), 3u);
  EXPECT_EQ(choose_least_tokens({}, cursor), -1);
}

TEST(BackendPolicies, PrefixAffinitySameKeySameBackend) {
  uint64_t cursor = 0;
  const auto l = loads({0, 0, 0});
  const uint64_t h = fnv1a64("Once upon a time there was a dragon");
  const int first = choose_prefix_affinity(l, h, cursor);
  for (int k = 0; k < 20; ++k) EXPECT_EQ(choose_prefix_affinity(l, h, cursor), first);
}

TEST(BackendPolicies, PrefixAffinitySpreadsDifferentPrefixes) {
  uint64_t cursor = 0;
  const auto l = loads({0, 0, 0});
  std::map<int, int> count;
  for (int k = 0; k < 300; ++k) count[choose_prefix_affinity(l, fnv1a64("prefix " + std::to_string(k)), cursor)]++;
  ASSERT_EQ(count.size(), 3u);
  for (auto& [b, n] : count) EXPECT_GT(n, 50) << "backend " << b;
}

TEST(BackendPolicies, PrefixAffinityFallsBackWhenOverloaded) {
  uint64_t cursor = 0;
  const uint64_t h = fnv1a64("shared system prompt");
  const int owner = choose_prefix_affinity(loads({0, 0, 0}), h, cursor);
  auto l = loads({100, 100, 100});
  l[static_cast<size_t>(owner)].outstanding_tokens = 2 * 100 + kAffinitySlackTokens;  // at the limit: still owner
  EXPECT_EQ(choose_prefix_affinity(l, h, cursor), owner);
  l[static_cast<size_t>(owner)].outstanding_tokens += 1;  // past it: least-tokens
  const int other = choose_prefix_affinity(l, h, cursor);
  EXPECT_NE(other, owner);
  EXPECT_GE(other, 0);
}

TEST(BackendPolicies, PrefixAffinityEjectionMovesOnlyTheOwnersKeys) {
  uint64_t cursor = 0;
  auto l = loads({0, 0, 0});
  std::vector<int> before;
  for (int k = 0; k < 200; ++k) before.push_back(choose_prefix_affinity(l, fnv1a64("p" + std::to_string(k)), cursor));
  l[0].healthy = false;
  for (int k = 0; k < 200; ++k) {
    const int now = choose_prefix_affinity(l, fnv1a64("p" + std::to_string(k)), cursor);
    EXPECT_NE(now, 0);
    if (before[static_cast<size_t>(k)] != 0) {
      EXPECT_EQ(now, before[static_cast<size_t>(k)]);
    }
  }
  l[0].healthy = true;  // re-admitted: the old owners again
  for (int k = 0; k < 200; ++k)
    EXPECT_EQ(choose_prefix_affinity(l, fnv1a64("p" + std::to_string(k)), cursor), before[static_cast<size_t>(k)]);
  for (auto& x : l) x.healthy = false;
  EXPECT_EQ(choose_prefix_affinity(l, 1, cursor), -1);
}

TEST(BackendPolicies, AffinityTextFromPromptAndMessages) {
  EXPECT_EQ(affinity_text(R"({"prompt": "abcdef"})", 4), "abcd");
  EXPECT_EQ(affinity_text(R"({"prompt": ["xyz", "q"]})"), "xyz");
  EXPECT_EQ(affinity_text(R"({"messages": [{"role": "system", "content": "be nice"},
                                         {"role": "user", "content": [{"type": "text", "text": "hi"}]}]})"),
            "system:be nice\nuser:hi\n");
  EXPECT_EQ(affinity_text("not json"), "");
}

}  // namespace
}  // namespace parallm
