// Engine::submit / collect with pipeline micro-batches: with pp = 2 (and tp =
// 2 inside each stage) two steps on disjoint sequences are in flight at once
// and each gives the logits the same step gives alone on a one-rank engine.
// pipeline_stage_layers: layers by count, or --pp-layers (checked).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "common/generated_model.h"
#include "engine/engine.h"
#include "util/check.h"

namespace parallm {
namespace {

const std::string& model_path() { return test::generated_model("tiny", 5); }

std::unique_ptr<Engine> engine_with(int tp, int pp) {
  EngineOptions o;
  o.model_path = model_path();
  o.threads = 1;
  o.ctx_size = 128;
  o.kv_blocks = 32;
  o.tp = tp;
  o.pp = pp;
  return std::make_unique<Engine>(o);
}

// Sequence s: a prompt of n tokens (or one decode token at position n after
// its prompt), in blocks [8 s, 8 s + 8).
struct Seq {
  std::vector<int32_t> table;
  std::vector<int32_t> prompt;
};

Seq make_seq(int s, int n) {
  Seq q;
  for (int b = 0; b < 8; ++b) q.table.push_back(8 * s + b);
  for (int i = 0; i < n; ++i) q.prompt.push_back(3 + (s * 37 + i * 11) % 500);
  return q;
}

ForwardBatch prefill(const Seq& q) {
  ForwardBatch b;
  b.add_sequence_tokens(q.prompt.data(), static_cast<int64_t>(q.prompt.size()), 0, 0, q.table.data(), 16, true);
  return b;
}

ForwardBatch decode(const Seq& q, int32_t token) {
  ForwardBatch b;
  b.add_sequence_tokens(&token, 1, static_cast<int32_t>(q.prompt.size()), 0, q.table.data(), 16, true);
  return b;
}

std::vector<float> copy(const float* p, int64_t n) { return std::vector<float>(p, p + n); }

void expect_near(const std::vector<float>& a, const std::vector<float>& b, const char* what) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], 1e-4f * (1 + std::fabs(b[i]))) << what << " " << i;
}

TEST(Pipeline, TwoStepsInFlightGiveTheLogitsOfEachAlone) {
  const Seq a = make_seq(0, 21), b = make_seq(1, 9), c = make_seq(2, 40);
  auto ref = engine_with(1, 1);
  const int64_t v = ref->config().n_vocab;
  const auto ref_a = copy(ref->forward(prefill(a)), v);
  const auto ref_b = copy(ref->forward(prefill(b)), v);
  const auto ref_c = copy(ref->forward(prefill(c)), v);
  const auto ref_a2 = copy(ref->forward(decode(a, 7)), v);
  const auto ref_b2 = copy(ref->forward(decode(b, 8)), v);

  for (int tp : {1, 2}) {
    auto e = engine_with(tp, 2);
    e->submit(prefill(a));
    e->submit(prefill(b));
    EXPECT_EQ(e->steps_in_flight(), 2);
    expect_near(copy(e->collect(), v), ref_a, "a");
    e->submit(prefill(c));  // a slot is free again
    expect_near(copy(e->collect(), v), ref_b, "b");
    e->submit(decode(a, 7));  // a's next step while c is in flight
    expect_near(copy(e->collect(), v), ref_c, "c");
    e->submit(decode(b, 8));
    expect_near(copy(e->collect(), v), ref_a2, "a2");
    expect_near(copy(e->collect(), v), ref_b2, "b2");
    EXPECT_EQ(e->steps_in_flight(), 0);
  }
}

// An engine destroyed with steps in flight drains them and stops its ranks.
TEST(Pipeline, DestroyedWithStepsInFlight) {
  auto e = engine_with(1, 2);
  e->submit(prefill(make_seq(0, 10)));
  e->submit(prefill(make_seq(1, 10)));
  e.reset();
}

TEST(PipelineStageLayers, ByCountUnlessPinned) {
  ModelConfig c;
  c.n_layer = 12;
  EXPECT_EQ(pipeline_stage_layers(c, 1, {}), (std::vector<int64_t>{12}));
  EXPECT_EQ(pipeline_stage_layers(c, 2, {}), (std::vector<int64_t>{6, 6}));
  c.n_layer = 5;
  EXPECT_EQ(pipeline_stage_layers(c, 2, {}), (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(pipeline_stage_layers(c, 3, {}), (std::vector<int64_t>{2, 2, 1}));
  EXPECT_EQ(pipeline_stage_layers(c, 2, {4, 1}), (std::vector<int64_t>{4, 1}));
  EXPECT_THROW(pipeline_stage_layers(c, 2, {3, 3}), InputError);
  EXPECT_THROW(pipeline_stage_layers(c, 2, {5, 0}), InputError);
  EXPECT_THROW(pipeline_stage_layers(c, 2, {1, 1, 3}), InputError);
  EXPECT_THROW(pipeline_stage_layers(c, 6, {}), InputError);
}

}  // namespace
}  // namespace parallm
