// Sampler tests: behaviour, not the exact token a seed happens to produce.
// Every expectation comes from a reference computed here in double precision
// (softmax of logits / T, the filter rules of sampler.h, the penalty
// formulas), and empirical frequencies are compared with a bound of 5 binomial
// standard deviations, so the tests stay valid when the implementation changes
// how it draws (vectorized exp, another random stream) as long as the
// distribution is right.
#include "sampling/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "sampler_reference.h"
#include "util/check.h"

namespace parallm {
namespace {

using namespace sampler_test;  // NOLINT: test-local references

SamplingParams with_temperature(float t, uint64_t seed) {
  SamplingParams p;
  p.temperature = t;
  p.seed = seed;
  return p;
}

constexpr int kDraws = 40000;

// ---- temperature sampling --------------------------------------------------

TEST(SamplerTemperature, SmallVocabMatchesSoftmax) {
  const std::vector<float> logits = {1.0f, -0.5f, 2.0f, 0.3f, 1.7f, -2.0f};
  for (float t : {0.5f, 1.0f, 2.0f}) {
    const auto probs = softmax_ref(to_double(logits), t);
    const auto counts = draw_counts(with_temperature(t, 1234 + static_cast<uint64_t>(t * 10)), logits, kDraws);
    expect_frequencies(counts, probs, kDraws, "T=" + std::to_string(t));
  }
}

TEST(SamplerTemperature, NegativeInfinityLogitIsNeverDrawn) {
  const float ninf = -std::numeric_limits<float>::infinity();
  const std::vector<float> logits = {0.5f, ninf, 0.0f, ninf, 1.0f};
  const auto probs = softmax_ref(to_double(logits), 1.0);
  ASSERT_EQ(probs[1], 0.0);
  expect_frequencies(draw_counts(with_temperature(1.0f, 9), logits, kDraws), probs, kDraws, "-inf");
}

// Heavy ids at the edges of any power-of-two block (and the first and last
// id) in a vocabulary that is no multiple of one: a chunked or vectorized draw
// that misplaces a block boundary moves their mass.
TEST(SamplerTemperature, MassAtBlockEdgesLandsOnTheRightIds) {
  constexpr int32_t kVocab = 1300;
  const std::vector<int32_t> heavy = {0, 1, 15, 16, 255, 256, 511, 512, 513, 1023, 1024, 1279, 1280, 1298, 1299};
  std::vector<float> logits(kVocab, 0.0f);
  for (int32_t id : heavy) logits[id] = 5.0f;
  for (float t : {1.0f, 2.0f}) {
    const std::string what = "edges T=" + std::to_string(t);
    const auto probs = softmax_ref(to_double(logits), t);
    const auto counts = draw_counts(with_temperature(t, 300 + static_cast<uint64_t>(t)), logits, kDraws);
    // Each heavy id alone; the light ones in 13 bands of 100 ids.
    std::vector<double> band_p(13, 0.0);
    std::vector<int64_t> band_c(13, 0);
    for (int32_t id = 0; id < kVocab; ++id) {
      if (std::find(heavy.begin(), heavy.end(), id) != heavy.end()) {
        expect_binomial(counts[id], probs[id], kDraws, what + " id " + std::to_string(id));
      } else {
        band_p[id / 100] += probs[id];
        band_c[id / 100] += counts[id];
      }
    }
    for (int b = 0; b < 13; ++b) expect_binomial(band_c[b], band_p[b], kDraws, what + " band " + std::to_string(b));
  }
}

// 32000 random logits: aggregate the draws over ranks of the exact
// distribution (top ids alone, then rank bands) and over id ranges.
TEST(SamplerTemperature, LargeVocabAggregatesMatchSoftmax) {
  constexpr int32_t kVocab = 32000;
  constexpr int kLargeDraws = 4000;
  std::mt19937 gen(42);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::vector<float> logits(kVocab);
  for (float& l : logits) l = normal(gen);
  for (float t : {0.5f, 1.0f, 2.0f}) {
    const auto probs = softmax_ref(to_double(logits), t);
    std::vector<int> order(kVocab);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return probs[a] > probs[b]; });
    const auto counts = draw_counts(with_temperature(t, 77 + static_cast<uint64_t>(t * 4)), logits, kLargeDraws);
    const std::vector<int> band_ends = {1, 2, 3, 10, 100, 1000, 10000, kVocab};
    int begin = 0;
    for (int end : band_ends) {
      double p = 0.0;
      int64_t c = 0;
      for (int r = begin; r < end; ++r) {
        p += probs[order[r]];
        c += counts[order[r]];
      }
      expect_binomial(c, p, kLargeDraws,
                      "T=" + std::to_string(t) + " ranks [" + std::to_string(begin) + "," + std::to_string(end) + ")");
      begin = end;
    }
    for (int32_t lo = 0; lo < kVocab; lo += 8000) {
      double p = 0.0;
      int64_t c = 0;
      for (int32_t i = lo; i < lo + 8000; ++i) {
        p += probs[i];
        c += counts[i];
      }
      expect_binomial(c, p, kLargeDraws, "T=" + std::to_string(t) + " ids from " + std::to_string(lo));
    }
  }
}

// ---- greedy -----------------------------------------------------------------

TEST(SamplerGreedy, ArgmaxMatchesFirstMaxElement) {
  EXPECT_EQ(argmax(std::vector<float>{1, 5, 5, 2}.data(), 4), 1);
  EXPECT_EQ(argmax(std::vector<float>{-3, -1, -1}.data(), 3), 1);
  EXPECT_EQ(argmax(std::vector<float>{7}.data(), 1), 0);
  EXPECT_EQ(argmax(std::vector<float>{2, 2, 2, 2}.data(), 4), 0);
  const float ninf = -std::numeric_limits<float>::infinity();
  EXPECT_EQ(argmax(std::vector<float>{ninf, ninf, -1e30f}.data(), 3), 2);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(argmax(std::vector<float>{nan, 1, 3, nan}.data(), 4), 2);  // NaN never wins
  std::mt19937 gen(5);
  std::uniform_int_distribution<int> small(-20, 20);  // many ties
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<float> x(1 + trial * 7);
    for (float& v : x) v = static_cast<float>(small(gen));
    const auto ref = std::max_element(x.begin(), x.end()) - x.begin();  // first of the maxima
    EXPECT_EQ(argmax(x.data(), static_cast<int32_t>(x.size())), ref) << "trial " << trial;
  }
}

TEST(SamplerGreedy, TemperatureZeroIsArgmaxLowestIdOnTies) {
  SamplingParams p = with_temperature(0.0f, 3);
  EXPECT_TRUE(p.greedy());
  Sampler s(p);
  for (int i = 0; i < 20; ++i) {
    std::vector<float> a = {0.1f, 3.0f, -1.0f, 2.9f};
    EXPECT_EQ(s.sample(a.data(), 4), 1);
    std::vector<float> b = {0.0f, 4.0f, 1.0f, 4.0f, 4.0f};
    EXPECT_EQ(s.sample(b.data(), 5), 1);
    std::vector<float> c = {-2.0f, -1.0f, 0.0f, 0.5f};  // the maximum last
    EXPECT_EQ(s.sample(c.data(), 4), 3);
  }
  // Filters do not change the greedy choice.
  p.top_k = 2;
  p.top_p = 0.5f;
  p.min_p = 0.5f;
  Sampler f(p);
  std::vector<float> c = {-1.0f, -1.0f, -2.0f};
  EXPECT_EQ(f.sample(c.data(), 3), 0);
}

// ---- top-k / top-p / min-p ----------------------------------------------------

void expect_filtered(const std::vector<float>& logits, float t, int top_k, float top_p, float min_p,
                     size_t expected_support, uint64_t seed, const std::string& what) {
  SamplingParams p = with_temperature(t, seed);
  p.top_k = top_k;
  p.top_p = top_p;
  p.min_p = min_p;
  const auto ref = filtered_ref(softmax_ref(to_double(logits), t), top_k, top_p, min_p);
  ASSERT_EQ(support_size(ref), expected_support) << what << ": test case miscomputed";
  expect_frequencies(draw_counts(p, logits, kDraws), ref, kDraws, what);
}

TEST(SamplerFilters, TopKKeepsTheKMostProbable) {
  const std::vector<float> logits = {0.2f, 1.5f, -0.7f, 1.1f, 0.9f, 2.2f, -1.5f, 0.0f};
  expect_filtered(logits, 1.0f, 3, 1.0f, 0.0f, 3, 11, "k=3 T=1");
  expect_filtered(logits, 0.5f, 3, 1.0f, 0.0f, 3, 12, "k=3 T=0.5");
  expect_filtered(logits, 2.0f, 5, 1.0f, 0.0f, 5, 13, "k=5 T=2");
  expect_filtered(logits, 1.0f, 1, 1.0f, 0.0f, 1, 14, "k=1");
  expect_filtered(logits, 1.0f, 8, 1.0f, 0.0f, 8, 15, "k=n");
  expect_filtered(logits, 1.0f, 100, 1.0f, 0.0f, 8, 16, "k>n");
}

// probs by rank 0.40 0.25 0.15 0.10 0.06 0.04: prefix masses 0.40 0.65 0.80
// 0.90 0.96 1.0; p just below a prefix mass keeps it, just above keeps one more.
TEST(SamplerFilters, TopPKeepsSmallestPrefixReachingP) {
  const auto logits = logits_for({0.40, 0.25, 0.15, 0.10, 0.06, 0.04}, {3, 0, 5, 1, 4, 2});
  expect_filtered(logits, 1.0f, 0, 0.30f, 0.0f, 1, 21, "p=0.30");
  expect_filtered(logits, 1.0f, 0, 0.64f, 0.0f, 2, 22, "p=0.64");
  expect_filtered(logits, 1.0f, 0, 0.66f, 0.0f, 3, 23, "p=0.66");
  expect_filtered(logits, 1.0f, 0, 0.79f, 0.0f, 3, 24, "p=0.79");
  expect_filtered(logits, 1.0f, 0, 0.81f, 0.0f, 4, 25, "p=0.81");
  expect_filtered(logits, 1.0f, 0, 0.95f, 0.0f, 5, 26, "p=0.95");
  expect_filtered(logits, 1.0f, 0, 0.97f, 0.0f, 6, 27, "p=0.97");
  // Temperature comes first: T=2 flattens to 0.277 0.219 0.170 0.139 0.107
  // 0.088 (prefix 0.277 0.496 0.666 0.805), so p=0.70 keeps 4 where T=1 keeps 3.
  expect_filtered(logits, 1.0f, 0, 0.70f, 0.0f, 3, 28, "p=0.70 T=1");
  expect_filtered(logits, 2.0f, 0, 0.70f, 0.0f, 4, 29, "p=0.70 T=2");
}

// probs 0.40 0.21 0.19 0.12 0.08: min_p=0.5 -> floor 0.20 keeps 2; 0.25 ->
// floor 0.10 keeps 4.
TEST(SamplerFilters, MinPDropsIdsBelowFractionOfTop) {
  const auto logits = logits_for({0.40, 0.21, 0.19, 0.12, 0.08}, {2, 4, 0, 3, 1});
  expect_filtered(logits, 1.0f, 0, 1.0f, 0.5f, 2, 31, "min_p=0.5");
  expect_filtered(logits, 1.0f, 0, 1.0f, 0.25f, 4, 32, "min_p=0.25");
  expect_filtered(logits, 1.0f, 0, 1.0f, 1.0f, 1, 33, "min_p=1");
  // At T=0.5 ratios square: 0.21/0.40 -> 0.276, so min_p=0.5 keeps only the top.
  expect_filtered(logits, 0.5f, 0, 1.0f, 0.5f, 1, 34, "min_p=0.5 T=0.5");
}

// probs by rank 0.30 0.20 0.15 0.10 0.08 0.06 0.05 0.03 0.02 0.01.
TEST(SamplerFilters, CombinationOrderTopKThenTopPThenMinP) {
  const std::vector<double> probs = {0.30, 0.20, 0.15, 0.10, 0.08, 0.06, 0.05, 0.03, 0.02, 0.01};
  const auto logits = logits_for(probs, {7, 2, 9, 0, 5, 1, 8, 3, 6, 4});
  // top-k=4 renormalizes to 0.40 0.267 0.20 0.133; top-p=0.6 then keeps 2.
  // (Top-p over the unrenormalized mass would keep 3: 0.30+0.20 < 0.6.)
  expect_filtered(logits, 1.0f, 4, 0.6f, 0.0f, 2, 41, "k=4 p=0.6");
  // top-k=5 (mass 0.83) -> renormalized prefix 0.361 0.602 0.783 0.904:
  // top-p=0.9 keeps 4; min-p=0.4 (floor 0.4*0.30=0.12 before renormalizing)
  // then drops 0.10 -> 3.
  expect_filtered(logits, 1.0f, 5, 0.9f, 0.0f, 4, 42, "k=5 p=0.9");
  expect_filtered(logits, 1.0f, 5, 0.9f, 0.4f, 3, 43, "k=5 p=0.9 min_p=0.4");
  // min-p keeps more than top-k allows: top-k wins.
  expect_filtered(logits, 1.0f, 2, 1.0f, 0.1f, 2, 44, "k=2 min_p=0.1");
}

// ---- penalties --------------------------------------------------------------

// Greedy pick between id 0 (penalized) and id 1 at `rival`.
int32_t greedy_pick(const SamplingParams& base, float logit0, float rival, const std::function<void(Sampler&)>& setup) {
  SamplingParams p = base;
  p.temperature = 0.0f;
  Sampler s(p);
  setup(s);
  std::vector<float> l = {logit0, rival, -5.0f};
  return s.sample(l.data(), 3);
}

// The penalized logit of id 0 is `boundary`: a rival just below it loses, just
// above it wins.
void expect_boundary(const SamplingParams& params, float logit0, double boundary,
                     const std::function<void(Sampler&)>& setup, const std::string& what) {
  constexpr double kDelta = 1e-3;
  EXPECT_EQ(greedy_pick(params, logit0, static_cast<float>(boundary - kDelta), setup), 0) << what << " (rival below)";
  EXPECT_EQ(greedy_pick(params, logit0, static_cast<float>(boundary + kDelta), setup), 1) << what << " (rival above)";
}

TEST(SamplerPenalties, RepetitionDividesPositiveMultipliesNegative) {
  SamplingParams p;
  p.repetition_penalty = 1.5f;
  auto prompt0 = [](Sampler& s) { s.add_prompt_token(0); };
  auto output0 = [](Sampler& s) { s.add_output_token(0); };
  expect_boundary(p, 3.0f, 3.0 / 1.5, prompt0, "positive, prompt token");
  expect_boundary(p, 3.0f, 3.0 / 1.5, output0, "positive, output token");
  expect_boundary(p, -1.0f, -1.0 * 1.5, output0, "negative, output token");
  expect_boundary(p, -1.0f, -1.0 * 1.5, prompt0, "negative, prompt token");
  // Once per id, whatever the count and whether in prompt, output or both.
  auto many = [](Sampler& s) {
    for (int i = 0; i < 2; ++i) s.add_prompt_token(0);
    for (int i = 0; i < 3; ++i) s.add_output_token(0);
  };
  expect_boundary(p, 4.5f, 4.5 / 1.5, many, "positive, repeated");
  expect_boundary(p, -2.0f, -2.0 * 1.5, many, "negative, repeated");
  // A penalty below 1 rewards repeats.
  p.repetition_penalty = 0.8f;
  expect_boundary(p, 2.0f, 2.0 / 0.8, output0, "penalty < 1");
  // Untouched tokens keep their logits.
  p.repetition_penalty = 2.0f;
  expect_boundary(
      p, 3.0f, 3.0,
      [](Sampler& s) {
        s.add_prompt_token(2);
        s.add_output_token(2);
      },
      "other id");
}

TEST(SamplerPenalties, PresenceAndFrequencyOverOutputOnly) {
  SamplingParams p;
  p.presence_penalty = 0.5f;
  p.frequency_penalty = 0.4f;
  auto out3 = [](Sampler& s) {
    for (int i = 0; i < 3; ++i) s.add_output_token(0);
  };
  expect_boundary(p, 5.0f, 5.0 - 0.5 - 0.4 * 3, out3, "presence + 3 x frequency");
  expect_boundary(
      p, 5.0f, 5.0 - 0.5 - 0.4, [](Sampler& s) { s.add_output_token(0); }, "count 1");
  // Prompt tokens are not penalized by presence/frequency.
  expect_boundary(
      p, 5.0f, 5.0,
      [](Sampler& s) {
        for (int i = 0; i < 4; ++i) s.add_prompt_token(0);
      },
      "prompt only");
  expect_boundary(
      p, 5.0f, 5.0 - 0.5 - 0.4 * 2,
      [](Sampler& s) {
        s.add_prompt_token(0);
        s.add_output_token(0);
        s.add_output_token(0);
      },
      "prompt count not added");
  // Negative values reward; each term alone.
  SamplingParams f;
  f.frequency_penalty = -0.5f;
  expect_boundary(
      f, 1.0f, 1.0 + 0.5 * 2,
      [](Sampler& s) {
        s.add_output_token(0);
        s.add_output_token(0);
      },
      "negative frequency");
  SamplingParams pr;
  pr.presence_penalty = 1.25f;
  expect_boundary(pr, 1.0f, 1.0 - 1.25, out3, "presence only, count ignored");
}

TEST(SamplerPenalties, RepetitionBeforePresenceAndFrequency) {
  SamplingParams p;
  p.repetition_penalty = 1.5f;
  p.presence_penalty = 0.5f;
  p.frequency_penalty = 0.25f;
  auto out2 = [](Sampler& s) {
    s.add_output_token(0);
    s.add_output_token(0);
  };
  // 6/1.5 - 0.5 - 0.25*2 = 3.0; the other order would give (6-1)/1.5 = 3.33.
  expect_boundary(p, 6.0f, 6.0 / 1.5 - 0.5 - 0.25 * 2, out2, "order");
}

TEST(SamplerPenalties, OutOfRangeIdsAreIgnored) {
  SamplingParams p = with_temperature(0.0f, 0);
  p.repetition_penalty = 2.0f;
  p.presence_penalty = 2.0f;
  p.frequency_penalty = 2.0f;
  Sampler s(p);
  s.add_prompt_token(-1);
  s.add_output_token(3);
  s.add_output_token(1000);
  std::vector<float> l = {0.0f, 1.0f, 0.5f};
  EXPECT_EQ(s.sample(l.data(), 3), 1);
}

// Penalties shift the sampled distribution to softmax(penalized / T).
TEST(SamplerPenalties, SampledDistributionShift) {
  const std::vector<float> logits = {1.0f, 2.0f, -0.5f, 0.5f, 1.5f};
  SamplingParams p = with_temperature(0.7f, 51);
  p.repetition_penalty = 1.3f;
  p.presence_penalty = 0.4f;
  p.frequency_penalty = 0.3f;
  auto setup = [](Sampler& s) {
    s.add_prompt_token(0);
    s.add_prompt_token(2);
    s.add_output_token(1);
    s.add_output_token(1);
    s.add_output_token(3);
  };
  std::vector<double> penalized = to_double(logits);
  for (int id : {0, 1, 2, 3}) penalized[id] = penalized[id] > 0 ? penalized[id] / 1.3 : penalized[id] * 1.3;
  penalized[1] -= 0.4 + 0.3 * 2;
  penalized[3] -= 0.4 + 0.3 * 1;
  const auto probs = softmax_ref(penalized, 0.7);
  expect_frequencies(draw_counts(p, logits, kDraws, setup), probs, kDraws, "penalized T=0.7");
  // Same with a filter, through the sorted path: top-k=3 of the penalized.
  p.top_k = 3;
  p.seed = 52;
  expect_frequencies(draw_counts(p, logits, kDraws, setup), filtered_ref(probs, 3, 1.0, 0.0), kDraws,
                     "penalized T=0.7 k=3");
}

// ---- logit_bias ------------------------------------------------------------

TEST(SamplerLogitBias, AddedAfterPenaltiesBeforeGreedyAndTemperature) {
  const std::vector<float> logits = {2.0f, 0.5f, 1.0f, -1.0f};
  SamplingParams g;
  g.temperature = 0.0f;
  g.logit_bias = {{3, 3.5f}, {0, -0.25f}, {99, 50.0f}};  // 99: outside the vocabulary, skipped
  Sampler greedy(g);
  std::vector<float> row = logits;
  EXPECT_EQ(greedy.sample(row.data(), 4), 3);  // -1 + 3.5 = 2.5 beats 2 - 0.25
  // A banned token is never drawn; the rest follow the biased softmax.
  SamplingParams t = with_temperature(0.7f, 77);
  t.logit_bias = {{0, -100.0f}, {1, 1.0f}};
  std::vector<double> biased = to_double(logits);
  biased[0] -= 100.0;
  biased[1] += 1.0;
  expect_frequencies(draw_counts(t, logits, kDraws), softmax_ref(biased, 0.7), kDraws, "biased");
}

// min_tokens: the banned ids (stop tokens) cannot win until enough tokens were generated.
TEST(SamplerMinTokens, StopTokensAreBannedUntilMinTokens) {
  const std::vector<float> logits = {5.0f, 1.0f, 0.0f, 4.0f};
  SamplingParams g;
  g.temperature = 0.0f;
  g.min_tokens = 2;
  Sampler s(g);
  s.ban_until_min_tokens({0, 3});
  std::vector<float> row = logits;
  EXPECT_EQ(s.sample(row.data(), 4), 1);  // 0 and 3 are banned: 1 is the best left
  s.add_output_token(1);
  row = logits;
  EXPECT_EQ(s.sample(row.data(), 4), 1);
  s.add_output_token(1);
  row = logits;
  EXPECT_EQ(s.sample(row.data(), 4), 0);  // two tokens out: the stop token may come
  // Sampling never draws a banned id either.
  SamplingParams t = with_temperature(1.0f, 5);
  t.min_tokens = 1000;
  Sampler d(t);
  d.ban_until_min_tokens({0});
  for (int i = 0; i < 2000; ++i) {
    row = logits;
    ASSERT_NE(d.sample(row.data(), 4), 0);
  }
}

// ---- seeds --------------------------------------------------------------------

// A generation loop: logits change every step and sampled tokens feed back as
// output tokens (so penalties depend on earlier draws).
std::vector<int32_t> generate(const SamplingParams& params, int n_steps, int32_t n_vocab) {
  Sampler s(params);
  s.add_prompt_token(1);
  std::mt19937 gen(99);  // the same logits sequence whatever the sampler seed
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<int32_t> out;
  std::vector<float> l(n_vocab);
  for (int step = 0; step < n_steps; ++step) {
    for (float& x : l) x = u(gen);
    const int32_t id = s.sample(l.data(), n_vocab);
    s.add_output_token(id);
    out.push_back(id);
  }
  return out;
}

TEST(SamplerSeeds, SameSeedSameTokens) {
  SamplingParams p = with_temperature(1.0f, 2024);
  p.repetition_penalty = 1.2f;
  p.frequency_penalty = 0.3f;
  for (int filtered = 0; filtered < 2; ++filtered) {
    if (filtered) {
      p.top_k = 50;
      p.top_p = 0.9f;
    }
    const auto a = generate(p, 200, 1000);
    const auto b = generate(p, 200, 1000);
    EXPECT_EQ(a, b) << "filtered=" << filtered;
    EXPECT_GT(std::set<int32_t>(a.begin(), a.end()).size(), 100u) << "draws should vary";
  }
}

TEST(SamplerSeeds, DifferentSeedsDifferentTokens) {
  // Flat distribution over 1000 ids, 50 draws: two independent streams agree
  // at a position with probability 1/1000.
  std::vector<std::vector<int32_t>> runs;
  for (uint64_t seed : {0ull, 1ull, 2ull, 12345ull, 0xdeadbeefull}) {
    for (int filtered = 0; filtered < 2; ++filtered) {
      SamplingParams p = with_temperature(1.0f, seed);
      if (filtered) p.top_k = 500;
      Sampler s(p);
      std::vector<int32_t> out;
      for (int i = 0; i < 50; ++i) {
        std::vector<float> l(1000, 0.25f);
        out.push_back(s.sample(l.data(), 1000));
      }
      runs.push_back(out);
    }
  }
  for (size_t i = 0; i < runs.size(); i += 2) {
    for (size_t j = i + 2; j < runs.size(); j += 2) {
      for (size_t k = 0; k < 2; ++k) {
        int same = 0;
        for (size_t t = 0; t < 50; ++t) same += runs[i + k][t] == runs[j + k][t];
        EXPECT_LE(same, 3) << "runs " << i + k << " and " << j + k;
      }
    }
  }
}

// ---- validate() -----------------------------------------------------------------

TEST(SamplingParamsValidate, OutOfRangeFieldsThrowNamingTheField) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  struct Case {
    std::string field;
    std::function<void(SamplingParams&)> set;
  };
  const std::vector<Case> cases = {
      {"temperature", [](SamplingParams& p) { p.temperature = -0.01f; }},
      {"temperature", [](SamplingParams& p) { p.temperature = 100.5f; }},
      {"temperature", [=](SamplingParams& p) { p.temperature = nan; }},
      {"temperature", [=](SamplingParams& p) { p.temperature = inf; }},
      {"top_k", [](SamplingParams& p) { p.top_k = -1; }},
      {"top_p", [](SamplingParams& p) { p.top_p = 0.0f; }},
      {"top_p", [](SamplingParams& p) { p.top_p = 1.01f; }},
      {"top_p", [=](SamplingParams& p) { p.top_p = nan; }},
      {"min_p", [](SamplingParams& p) { p.min_p = -0.01f; }},
      {"min_p", [](SamplingParams& p) { p.min_p = 1.01f; }},
      {"min_p", [=](SamplingParams& p) { p.min_p = nan; }},
      {"repetition_penalty", [](SamplingParams& p) { p.repetition_penalty = 0.0f; }},
      {"repetition_penalty", [](SamplingParams& p) { p.repetition_penalty = -1.0f; }},
      {"repetition_penalty", [](SamplingParams& p) { p.repetition_penalty = 10.5f; }},
      {"repetition_penalty", [=](SamplingParams& p) { p.repetition_penalty = nan; }},
      {"presence_penalty", [](SamplingParams& p) { p.presence_penalty = -2.01f; }},
      {"presence_penalty", [](SamplingParams& p) { p.presence_penalty = 2.01f; }},
      {"presence_penalty", [=](SamplingParams& p) { p.presence_penalty = nan; }},
      {"frequency_penalty", [](SamplingParams& p) { p.frequency_penalty = -2.01f; }},
      {"frequency_penalty", [](SamplingParams& p) { p.frequency_penalty = 2.01f; }},
      {"frequency_penalty", [=](SamplingParams& p) { p.frequency_penalty = nan; }},
      {"logit_bias",
       [](SamplingParams& p) {
         p.logit_bias = {{-1, 1.0f}};
       }},
      {"logit_bias",
       [](SamplingParams& p) {
         p.logit_bias = {{3, 100.5f}};
       }},
      {"logit_bias",
       [=](SamplingParams& p) {
         p.logit_bias = {{3, nan}};
       }},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    SamplingParams p;
    cases[i].set(p);
    try {
      p.validate();
      ADD_FAILURE() << "case " << i << " (" << cases[i].field << ") did not throw";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(cases[i].field), std::string::npos)
          << "case " << i << ": message '" << e.what() << "' does not name " << cases[i].field;
    }
  }
}

TEST(SamplingParamsValidate, RangeEndsAreAccepted) {
  EXPECT_NO_THROW(SamplingParams{}.validate());
  SamplingParams lo;
  lo.temperature = 0.0f;
  lo.top_k = 0;
  lo.top_p = 1e-6f;
  lo.min_p = 0.0f;
  lo.repetition_penalty = 1e-3f;
  lo.presence_penalty = -2.0f;
  lo.frequency_penalty = -2.0f;
  EXPECT_NO_THROW(lo.validate());
  SamplingParams hi;
  hi.temperature = 100.0f;
  hi.top_k = 1 << 30;
  hi.top_p = 1.0f;
  hi.min_p = 1.0f;
  hi.repetition_penalty = 10.0f;
  hi.presence_penalty = 2.0f;
  hi.frequency_penalty = 2.0f;
  EXPECT_NO_THROW(hi.validate());
}

}  // namespace
}  // namespace parallm
