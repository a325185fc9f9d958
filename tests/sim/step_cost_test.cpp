// StepCost against the perf model it is built on: a lone prompt costs
// prefill_s(), a pure decode step decode_step_s(), and the attention terms
// scale as their definitions say.
#include "sim/step_cost.h"

#include <gtest/gtest.h>

#include "sim/replica_model.h"
#include "sim_fixture.h"

namespace parallm::sim {
namespace {

TEST(StepCost, LonePromptIsPrefillAndDecodeIsDecodeStep) {
  SimulationSpec s = testing::spec_for("llama-3.1-8b", "H100-SXM");
  for (int tp : {1, 2}) {
    const ReplicaModel m = replica_model(s.request, planner::Layout{1, tp, 1, 1}, 4096, 16);
    const StepCost cost(m.perf, ServeOverheads{});
    for (double len : {16.0, 512.0, 2000.0}) {
      StepShape prompt;
      prompt.n_tokens = static_cast<int64_t>(len);
      prompt.n_sampled = 1;
      prompt.prefill_pairs = len * len / 2;
      EXPECT_NEAR(cost.step_s(prompt), planner::prefill_s(m.perf, 1, len), 1e-9 * planner::prefill_s(m.perf, 1, len));
    }
    for (int64_t batch : {1, 7, 64}) {
      StepShape d;
      d.n_tokens = d.n_sampled = d.n_decode = batch;
      d.decode_ctx_tokens = 300.0 * static_cast<double>(batch);
      EXPECT_DOUBLE_EQ(cost.step_s(d), planner::decode_step_s(m.perf, static_cast<double>(batch), 300.0));
    }
  }
}

TEST(StepCost, MixedStepAddsAttentionLinearly) {
  SimulationSpec s = testing::spec_for("llama-3.1-8b", "H100-SXM");
  const ReplicaModel m = replica_model(s.request, planner::Layout{1, 1, 1, 1}, 4096, 16);
  const StepCost cost(m.perf, ServeOverheads{0.001, 0.0001, 0});
  StepShape a;
  a.n_tokens = 600;
  a.n_sampled = 9;
  a.n_decode = 8;
  a.decode_ctx_tokens = 8000;
  a.prefill_pairs = 592.0 * 100 + 592.0 * 592 / 2;
  StepShape b = a;
  b.decode_ctx_tokens *= 2;
  b.prefill_pairs *= 3;
  const double expected_delta = 8000 * cost.decode_ctx_token_s() + 2 * a.prefill_pairs * cost.prefill_pair_s();
  EXPECT_NEAR(cost.step_s(b) - cost.step_s(a), expected_delta, 1e-12);
  EXPECT_GT(cost.prefill_pair_s(), 0);
  EXPECT_GT(cost.decode_ctx_token_s(), 0);
  // Overheads: one per step and one per sampled row.
  const StepCost bare(m.perf, ServeOverheads{});
  EXPECT_NEAR(cost.step_s(a) - bare.step_s(a), 0.001 + 9 * 0.0001, 1e-12);
}

// A measured profile replaces the perf model: its forward table at the step's
// tokens, the head per extra sampled row, and the two attention coefficients.
TEST(StepCost, ProfileIsTheMeasuredDecomposition) {
  SimulationSpec s = testing::spec_for("llama-3.1-8b", "H100-SXM");
  const ReplicaModel m = replica_model(s.request, planner::Layout{1, 1, 1, 1}, 4096, 16);
  planner::ModelProfile p;
  p.forward_ms_by_tokens = {{1, 2}, {4, 3}, {16, 6}, {512, 100}};
  p.logit_row_ms = 0.05;
  p.prefill_pair_ns = 400;
  p.decode_kv_token_ns = 1500;
  p.stream_token_us = 70;
  const StepCost cost(m.perf, ServeOverheads{0.001, 0.0001, 0}, &p);
  StepShape d;  // 4 sequences decoding at context 200
  d.n_tokens = d.n_sampled = d.n_decode = 4;
  d.decode_ctx_tokens = 800;
  EXPECT_NEAR(cost.step_s(d), 3e-3 + 3 * 0.05e-3 + 800 * 1500e-9 + 4 * 70e-6 + 0.001 + 4 * 0.0001, 1e-15);
  StepShape mixed;  // a 10-token chunk at position 100 beside 2 decodes at context 50
  mixed.n_tokens = 12;
  mixed.n_sampled = 3;
  mixed.n_decode = 2;
  mixed.decode_ctx_tokens = 100;
  mixed.prefill_pairs = 10.0 * 100 + 50;
  const double forward = (3 + (12 - 4) * 3.0 / 12) * 1e-3;
  EXPECT_NEAR(cost.step_s(mixed),
              forward + 2 * 0.05e-3 + 1050 * 400e-9 + 100 * 1500e-9 + 3 * 70e-6 + 0.001 + 3 * 0.0001, 1e-15);
  EXPECT_DOUBLE_EQ(cost.prefill_pair_s(), 400e-9);
  EXPECT_DOUBLE_EQ(cost.decode_ctx_token_s(), 1500e-9);
}

}  // namespace
}  // namespace parallm::sim
