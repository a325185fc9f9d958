// Independent references for the sampler tests, in double precision:
// softmax(logits / T), the filter rules stated in sampling/sampler.h, and a
// binomial bound for comparing draw counts with exact probabilities.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <numeric>
#include <string>
#include <vector>

#include "sampling/sampler.h"

namespace parallm::sampler_test {

// softmax(logits / T) in double.
inline std::vector<double> softmax_ref(const std::vector<double>& logits, double temperature) {
  const double mx = *std::max_element(logits.begin(), logits.end());
  std::vector<double> p(logits.size());
  double sum = 0.0;
  for (size_t i = 0; i < logits.size(); ++i) sum += p[i] = std::exp((logits[i] - mx) / temperature);
  for (double& x : p) x /= sum;
  return p;
}

inline std::vector<double> to_double(const std::vector<float>& x) { return {x.begin(), x.end()}; }

// The filters as sampler.h states them: top-k, then top-p over the
// renormalized top-k mass (smallest prefix by descending probability whose mass
// reaches p), then min-p relative to the top probability; renormalized.
inline std::vector<double> filtered_ref(const std::vector<double>& probs, int top_k, double top_p, double min_p) {
  std::vector<int> order(probs.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return probs[a] > probs[b]; });
  size_t keep = order.size();
  if (top_k > 0 && static_cast<size_t>(top_k) < keep) keep = static_cast<size_t>(top_k);
  double total = 0.0;
  for (size_t i = 0; i < keep; ++i) total += probs[order[i]];
  if (top_p < 1.0) {
    double acc = 0.0;
    size_t n = 0;
    while (n < keep) {
      acc += probs[order[n]] / total;
      ++n;
      if (acc >= top_p) break;
    }
    keep = n;
  }
  if (min_p > 0.0) {
    size_t n = 1;
    while (n < keep && probs[order[n]] >= min_p * probs[order[0]]) ++n;
    keep = n;
  }
  std::vector<double> out(probs.size(), 0.0);
  double kept = 0.0;
  for (size_t i = 0; i < keep; ++i) kept += probs[order[i]];
  for (size_t i = 0; i < keep; ++i) out[order[i]] = probs[order[i]] / kept;
  return out;
}

inline size_t support_size(const std::vector<double>& p) {
  return static_cast<size_t>(std::count_if(p.begin(), p.end(), [](double x) { return x > 0.0; }));
}

// Draws n_draws tokens from one sampler, a fresh copy of the logits each time
// (sample() modifies them). `setup` adds prompt/output tokens.
inline std::vector<int64_t> draw_counts(const SamplingParams& params, const std::vector<float>& logits, int n_draws,
                                        const std::function<void(Sampler&)>& setup = {}) {
  Sampler sampler(params);
  if (setup) setup(sampler);
  std::vector<int64_t> counts(logits.size(), 0);
  std::vector<float> work(logits.size());
  for (int i = 0; i < n_draws; ++i) {
    work = logits;
    const int32_t id = sampler.sample(work.data(), static_cast<int32_t>(work.size()));
    EXPECT_GE(id, 0);
    EXPECT_LT(id, static_cast<int32_t>(logits.size()));
    if (id >= 0 && id < static_cast<int32_t>(logits.size())) counts[id]++;
  }
  return counts;
}

// |count - N p| within 5 binomial standard deviations (+3 counts of slack so
// that bins with a tiny expected count are not flaky); p == 0 must never occur.
inline void expect_binomial(int64_t count, double p, int64_t n_draws, const std::string& what) {
  if (p == 0.0) {
    EXPECT_EQ(count, 0) << what << ": outside the support, drawn " << count << " times";
    return;
  }
  const double expected = static_cast<double>(n_draws) * p;
  const double bound = 5.0 * std::sqrt(expected * (1.0 - p)) + 3.0;
  EXPECT_LE(std::fabs(static_cast<double>(count) - expected), bound)
      << what << ": drawn " << count << " times, expected " << expected << " (p=" << p << ")";
}

inline void expect_frequencies(const std::vector<int64_t>& counts, const std::vector<double>& probs, int64_t n_draws,
                               const std::string& what) {
  ASSERT_EQ(counts.size(), probs.size());
  for (size_t i = 0; i < counts.size(); ++i)
    expect_binomial(counts[i], probs[i], n_draws, what + " id " + std::to_string(i));
}

// Logits whose softmax at T=1 is `probs` (scattered over ids by `ids`).
inline std::vector<float> logits_for(const std::vector<double>& probs, const std::vector<int>& ids) {
  std::vector<float> l(probs.size());
  for (size_t r = 0; r < probs.size(); ++r) l[ids[r]] = static_cast<float>(std::log(probs[r]));
  return l;
}

}  // namespace parallm::sampler_test
