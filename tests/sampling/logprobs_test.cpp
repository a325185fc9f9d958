// logprobs: log-sum-exp and the top-k list against double-precision
// references computed here (a full sort of the vocabulary).
#include "sampling/logprobs.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

namespace parallm {
namespace {

double lse_ref(const std::vector<float>& x) {
  double mx = -INFINITY;
  for (float v : x) mx = std::max(mx, static_cast<double>(v));
  double s = 0;
  for (float v : x) s += std::exp(static_cast<double>(v) - mx);
  return mx + std::log(s);
}

std::vector<float> random_logits(int n, uint64_t seed, float scale) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> x(static_cast<size_t>(n));
  for (float& v : x) v = d(rng);
  return x;
}

TEST(Logprobs, LogSumExpMatchesDoubleReference) {
  std::vector<float> scratch;
  for (int n : {1, 7, 16, 33, 1000, 32000, 151936}) {
    for (float scale : {0.1f, 3.0f, 40.0f}) {
      auto x = random_logits(n, static_cast<uint64_t>(n) * 31 + static_cast<uint64_t>(scale), scale);
      x[static_cast<size_t>(n) / 2] += 500.0f;  // far from 0: the shift must keep it finite
      const double ref = lse_ref(x);
      EXPECT_NEAR(log_sum_exp(x.data(), n, &scratch), ref, 1e-5 * std::max(1.0, std::fabs(ref))) << n << " " << scale;
    }
  }
  // -inf entries contribute nothing.
  std::vector<float> x = {-INFINITY, 0.0f, -INFINITY, std::log(3.0f)};
  EXPECT_NEAR(log_sum_exp(x.data(), 4, &scratch), std::log(4.0), 1e-6);
}

TEST(Logprobs, TopKEqualsFullSortLowestIdOnTies) {
  std::vector<float> scratch;
  for (int n : {5, 100, 32000}) {
    auto x = random_logits(n, 99 + static_cast<uint64_t>(n), 2.0f);
    // Ties, including across the k-th place.
    for (int i = 0; i < n; i += 7) x[static_cast<size_t>(i)] = std::round(x[static_cast<size_t>(i)] * 4.0f) / 4.0f;
    const float lse = log_sum_exp(x.data(), n, &scratch);
    std::vector<int32_t> order(static_cast<size_t>(n));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](int32_t a, int32_t b) { return x[static_cast<size_t>(a)] > x[static_cast<size_t>(b)]; });
    for (int k : {0, 1, 5, 20, n}) {
      if (k > n) continue;
      std::vector<TokenLogprob> top;
      top_logprobs(x.data(), n, k, lse, &top);
      ASSERT_EQ(static_cast<int>(top.size()), k);
      for (int i = 0; i < k; ++i) {
        EXPECT_EQ(top[static_cast<size_t>(i)].token, order[static_cast<size_t>(i)])
            << "n=" << n << " k=" << k << " i=" << i;
        EXPECT_FLOAT_EQ(top[static_cast<size_t>(i)].logprob,
                        x[static_cast<size_t>(order[static_cast<size_t>(i)])] - lse);
      }
    }
  }
}

TEST(Logprobs, ProbabilitiesSumToOneAndNaNIsSkipped) {
  std::vector<float> scratch;
  const std::vector<float> x = {1.0f, std::numeric_limits<float>::quiet_NaN(), -2.0f, 0.5f};
  const std::vector<float> clean = {1.0f, -2.0f, 0.5f};
  const float lse = log_sum_exp(clean.data(), 3, &scratch);
  std::vector<TokenLogprob> top;
  top_logprobs(x.data(), 4, 4, lse, &top);
  ASSERT_EQ(top.size(), 3u);  // the NaN never appears
  double p = 0;
  for (const TokenLogprob& t : top) p += std::exp(static_cast<double>(t.logprob));
  EXPECT_NEAR(p, 1.0, 1e-6);
  EXPECT_EQ(top[0].token, 0);
  EXPECT_EQ(top[1].token, 3);
  EXPECT_EQ(top[2].token, 2);
}

}  // namespace
}  // namespace parallm
