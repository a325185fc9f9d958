// The worked examples of the deployment playbook (shared/seeds/), with the
// answers an engineer who has served these models would give; each case says
// why. Layouts, verdicts and replica counts only: the launch lines are
// launch_commands' tests.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "planner/catalog_request.h"
#include "planner/model_catalog.h"
#include "planner/plan.h"

namespace parallm::planner {
namespace {

void at_concurrency(PlanRequest* r, double c) {
  r->workload.mode = LoadMode::kConcurrency;
  r->workload.concurrency = c;
  r->workload.load_given = true;
}

// One answer to "how many GPUs" (issue #27): the recommendation runs the
// capacity line's replicas, or all the devices given hold when the peak needs
// more than that.
void expect_consistent(const Plan& p) {
  ASSERT_GE(p.best, 0);
  EXPECT_EQ(p.recommended.dp, std::min<int64_t>(p.capacity.replicas, p.candidates[p.best].layout.dp));
  EXPECT_EQ(p.capacity.gpus, p.capacity.replicas * p.recommended.gpus_per_replica());
  for (const Candidate& c : p.candidates) EXPECT_EQ(c.has_cost, !std::isnan(c.cost_per_million_output_tokens));
}

// Seed 000, 3.3: 13B fp16 (26 GB) on two 24 GB cards over PCIe, 50 users,
// TTFT < 600 ms. It does not fit one card, so data parallel is out; it must be
// split over the two, tensor parallel over PCIe being acceptable only because
// it must. Two cards hold ~14 such sequences: the 50 users need more pairs.
TEST(Seeds, ThirteenBOnTwo24GbCardsOverPcie) {
  PlanRequest r = catalog_request("llama-2-13b", "fp16", "RTX-4090", 2, "pcie4");
  at_concurrency(&r, 50);
  r.workload.ttft_slo_ms = 600;
  const Plan p = make_plan(r);
  EXPECT_EQ(p.verdict, Verdict::kDoesntFit);
  expect_consistent(p);
  EXPECT_EQ(p.recommended.tp * p.recommended.pp, 2);
  EXPECT_FALSE(p.candidates[p.best].tp_link.fast);
  EXPECT_TRUE(p.candidates[p.best].meets_slo);
  EXPECT_LE(p.candidates[p.best].at_load.ttft_p95_ms, 600);
  EXPECT_GT(p.capacity.replicas, 1);  // 50 users do not fit one pair's KV cache
}

// 70B fp16 on 4 x A100-80G over NVLink. At one user, latency is what there is
// to buy: TP4 halves the time per token of TP2 x PP2 on the same four cards
// (the old ranking picked TP2 x PP2 by cost at full capacity: issue #27).
TEST(Seeds, SeventyBOnFourA100sAtLowConcurrency) {
  PlanRequest r = catalog_request("llama-2-70b", "fp16", "A100-80G", 4, "nvlink");
  at_concurrency(&r, 1);
  r.workload.tpot_slo_ms = 30;  // interactive
  const Plan p = make_plan(r);
  expect_consistent(p);
  EXPECT_EQ(p.recommended.tp, 4);
  EXPECT_EQ(p.recommended.pp, 1);
  EXPECT_EQ(p.capacity.gpus, 4);

  // Without an SLO the cheapest way to serve one user is one TP2 pair: half
  // the cards, and never TP2 x PP2 (as slow as TP2, on twice the cards).
  r.workload.tpot_slo_ms = 0;
  const Plan q = make_plan(r);
  expect_consistent(q);
  EXPECT_FALSE(q.recommended.tp == 2 && q.recommended.pp == 2);
  EXPECT_EQ(q.recommended.tp, 2);
  EXPECT_EQ(q.capacity.gpus, 2);
  EXPECT_NE(q.ranking_basis.find("at the workload"), std::string::npos);

  // --objective latency: TP4 whatever it costs.
  r.workload.objective = Objective::kLatency;
  EXPECT_EQ(make_plan(r).recommended.tp, 4);
  // No workload given: the full-capacity ranking, and the plan says so.
  r.workload.objective = Objective::kAuto;
  r.workload.load_given = false;
  EXPECT_NE(make_plan(r).ranking_basis.find("full SLO capacity"), std::string::npos);
}

// At 64 users the same four cards serve one TP4 replica: TP2 pairs keep only
// ~26 sequences of KV each (69 GB of weights per card), TP4 keeps 256.
TEST(Seeds, SeventyBOnFourA100sAtHighConcurrency) {
  PlanRequest r = catalog_request("llama-2-70b", "fp16", "A100-80G", 4, "nvlink");
  at_concurrency(&r, 64);
  r.workload.tpot_slo_ms = 100;
  const Plan p = make_plan(r);
  expect_consistent(p);
  EXPECT_EQ(p.recommended.tp, 4);
  EXPECT_EQ(p.recommended.pp, 1);
  EXPECT_TRUE(p.candidates[p.best].meets_load);  // the four cards carry 64 users
  EXPECT_GE(p.candidates[p.best].max_concurrency_slo, 64);
}

// Seed 000, 1.3: a 7B model on one A100-80G carries ~hundreds of users; TP2
// adds little capacity per card for twice the cards, so the answer to 200
// users is replicas of one card each.
TEST(Seeds, SevenBOnA100sAtTwoHundredUsers) {
  PlanRequest r = catalog_request("llama-2-7b", "fp16", "A100-80G", 4, "nvlink");
  at_concurrency(&r, 200);
  const Plan p = make_plan(r);
  expect_consistent(p);
  EXPECT_EQ(p.recommended.tp, 1);
  EXPECT_EQ(p.recommended.pp, 1);
  EXPECT_EQ(p.verdict, Verdict::kCantKeepUp);
  EXPECT_GT(p.capacity.replicas, 1);
  // TP2's capacity per card is within 20% of TP1's: not worth the coupling.
  const Candidate* tp1 = nullptr;
  const Candidate* tp2 = nullptr;
  for (const Candidate& c : p.candidates) {
    if (c.layout.tp == 1 && c.layout.pp == 1) tp1 = &c;
    if (c.layout.tp == 2 && c.layout.pp == 1) tp2 = &c;
  }
  ASSERT_TRUE(tp1 != nullptr && tp2 != nullptr);
  EXPECT_LT(static_cast<double>(tp2->max_concurrency_slo) / 2, 1.2 * tp1->max_concurrency_slo);
}

// Seed 000, 4: 70B at int4 (~37 GB) fits one A100-80G: no second card.
TEST(Seeds, SeventyBInt4OnOneA100) {
  PlanRequest r = catalog_request("llama-2-70b", "int4", "A100-80G", 1);
  at_concurrency(&r, 8);
  const Plan p = make_plan(r);
  expect_consistent(p);
  EXPECT_EQ(p.verdict, Verdict::kFine);
  EXPECT_EQ(p.capacity.gpus, 1);
}

// Eight cards in NVLink pairs (PCIe between pairs), a 70B int8 model that
// needs two cards, run as TP2 replicas (pinned: the seed's layout; left free
// the model prefers TP2 x PP stages, see docs/plan.md): four of them for 200
// chat users, each on an NVLink pair.
TEST(Seeds, EightCardsAsFourTp2Replicas) {
  PlanRequest r = catalog_request("llama-3.1-70b", "int8", "A100-80G", 8, "pcie4");
  Fabric& f = r.fabric;
  for (int a = 0; a < 8; ++a) {
    const int b = a ^ 1;
    f.bw_gbps[a][b] = 300;
    f.latency_us[a][b] = 15;
    f.fast[a][b] = true;
    f.kind[a][b] = "NVLink";
  }
  r.workload.input_len = 512;
  r.workload.output_len = 512;
  at_concurrency(&r, 200);
  r.workload.tpot_slo_ms = 42;
  r.economics.headroom = 1.0;
  r.pinned = Layout{0, 2, 1, 0};
  const Plan p = make_plan(r);
  expect_consistent(p);
  EXPECT_EQ(p.recommended.tp, 2);
  EXPECT_EQ(p.recommended.pp, 1);
  EXPECT_EQ(p.recommended.dp, 4);
  const GroupLink& g = p.candidates[p.best].tp_link;
  ASSERT_EQ(g.gpus.size(), 2U);
  EXPECT_EQ(g.gpus[0] ^ 1, g.gpus[1]);  // an NVLink pair
  EXPECT_TRUE(g.fast);
}

// DeepSeek-V3 is served with attention data-parallel and the experts
// expert-parallel (vLLM --data-parallel-size 8 --enable-expert-parallel,
// SGLang --enable-dp-attention --ep 8): MLA's latent cache is tiny, so
// splitting attention buys nothing, while spreading the 256 experts lets
// every card hold one copy of attention and 1/8 of the experts.
TEST(Seeds, DeepSeekV3OnEightH200WithEp) {
  PlanRequest r = catalog_request("deepseek-v3", "fp8", "H200", 8);
  at_concurrency(&r, 256);
  r.workload.tpot_slo_ms = 100;
  const Plan p = make_plan(r);
  expect_consistent(p);
  EXPECT_EQ(p.verdict, Verdict::kDoesntFit);
  EXPECT_GT(p.recommended.ep, p.recommended.tp);  // attention-DP + EP
  EXPECT_EQ(p.recommended.ep, 8);
  EXPECT_EQ(p.capacity.gpus, 8);
}

// Two nodes of 8 x H100: 671 GB of fp8 weights need both; EP over all 16.
TEST(Seeds, DeepSeekV3OnTwoNodesOfEightH100WithEp) {
  PlanRequest r = catalog_request("deepseek-v3", "fp8", "H100-SXM", 8, "", 2);
  at_concurrency(&r, 256);
  r.workload.tpot_slo_ms = 100;
  const Plan p = make_plan(r);
  expect_consistent(p);
  EXPECT_EQ(p.recommended.ep, 16);
  EXPECT_GT(p.recommended.ep, p.recommended.tp);
  EXPECT_EQ(p.capacity.gpus % 16, 0);
  // The EP all-to-all crosses the nodes: a heavier imbalance costs time.
  PlanRequest skewed = r;
  skewed.expert_imbalance = 2.0;
  skewed.pinned = p.recommended;
  skewed.pinned.dp = 0;
  const Plan s = make_plan(skewed);
  ASSERT_GE(s.best, 0);
  EXPECT_GT(s.candidates[s.best].at_load.tpot_ms, p.candidates[p.best].at_load.tpot_ms);
}

// Qwen3-235B-A22B (128 experts, 8 active) on 8 x H200 in bf16 also takes EP.
TEST(Seeds, Qwen3MoeTakesExpertParallel) {
  PlanRequest r = catalog_request("qwen3-235b-a22b", "bf16", "H200", 8);
  at_concurrency(&r, 128);
  const Plan p = make_plan(r);
  expect_consistent(p);
  EXPECT_GT(p.recommended.ep, 1);
}

}  // namespace
}  // namespace parallm::planner
