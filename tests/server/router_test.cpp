// Router: the least-outstanding-tokens policy and the bookkeeping of
// ReplicaSetBackend over scripted replicas.
#include "router/router.h"

#include <gtest/gtest.h>

#include <future>

#include "router/least_outstanding_tokens.h"
#include "scripted_backend.h"
#include "server/replica_set_backend.h"
#include "util/check.h"

namespace parallm {
namespace {

TEST(LeastOutstandingTokens, PicksFewestTokensSkipsUnhealthy) {
  LeastOutstandingTokens p;
  EXPECT_EQ(p.choose({}), -1);
  EXPECT_EQ(p.choose({{100, 1, true}, {30, 5, true}, {60, 0, true}}), 1);
  EXPECT_EQ(p.choose({{100, 1, true}, {30, 5, false}, {60, 0, true}}), 2);
  EXPECT_EQ(p.choose({{100, 1, false}, {30, 5, false}}), 1);  // none healthy: least loaded anyway
  // Ties rotate.
  std::vector<ReplicaLoad> eq(3);
  EXPECT_NE(p.choose(eq), p.choose(eq));
}

TEST(Router, ChargesAndReleasesTokens) {
  Router r(2, make_routing_policy("least-outstanding-tokens"));
  const int a = r.route(100);
  const int b = r.route(10);
  EXPECT_NE(a, b);
  EXPECT_EQ(r.route(5), b);  // b has 10 < 100
  r.progress(a, 95);
  EXPECT_EQ(r.loads()[static_cast<size_t>(a)].outstanding_tokens, 5);
  r.finish(a, 5);
  EXPECT_EQ(r.loads()[static_cast<size_t>(a)].outstanding_tokens, 0);
  EXPECT_EQ(r.loads()[static_cast<size_t>(a)].requests, 0);
  r.mark_unhealthy(a, 100.0, 10.0);
  r.refresh_health(105.0);
  EXPECT_FALSE(r.loads()[static_cast<size_t>(a)].healthy);
  EXPECT_EQ(r.route(1), b);
  r.refresh_health(111.0);
  EXPECT_TRUE(r.loads()[static_cast<size_t>(a)].healthy);
  EXPECT_THROW(make_routing_policy("random"), InputError);
}

TEST(ReplicaSetBackend, SpreadsRequestsAndReturnsToZero) {
  std::vector<std::unique_ptr<CompletionBackend>> reps;
  auto* r0 = new ScriptedBackend(std::chrono::milliseconds(2));
  auto* r1 = new ScriptedBackend(std::chrono::milliseconds(2));
  reps.emplace_back(r0);
  reps.emplace_back(r1);
  ReplicaSetBackend set(std::move(reps));
  std::vector<std::shared_ptr<std::promise<std::string>>> done;
  for (int i = 0; i < 8; ++i) {
    ServingRequest q;
    q.prompt = {1, 2, 3};
    q.max_tokens = 10;
    q.sampling.seed = static_cast<uint64_t>(i);
    auto p = std::make_shared<std::promise<std::string>>();
    done.push_back(p);
    uint64_t id = 0;
    ASSERT_EQ(set.submit(
                  q,
                  [p](const TokenEvent& e) {
                    if (e.finished) p->set_value(e.finish_reason);
                  },
                  &id),
              SubmitStatus::kOk);
  }
  EXPECT_EQ(r0->submitted.load(), 4);
  EXPECT_EQ(r1->submitted.load(), 4);
  for (auto& p : done) EXPECT_EQ(p->get_future().get(), "length");
  for (const auto& l : set.loads()) {
    EXPECT_EQ(l.outstanding_tokens, 0);
    EXPECT_EQ(l.requests, 0);
  }
  EXPECT_EQ(set.device_stats().size(), 2u);
}

}  // namespace
}  // namespace parallm
