#include "sampling/logprobs.h"

#include <algorithm>
#include <cmath>

#include "kernels/cpu/ops.h"
#include "sampling/sampler.h"

namespace parallm {

float log_sum_exp(const float* logits, int32_t n, std::vector<float>* scratch) {
  if (n <= 0) return -INFINITY;
  scratch->assign(logits, logits + n);
  const float mx = logits[argmax(logits, n)];
  if (!std::isfinite(mx)) return mx;
  // exp_shifted subtracts the same maximum, so the sum is exp(l - mx) summed.
  const float sum = cpu::exp_shifted(scratch->data(), n, 1.0f);
  return mx + std::log(sum);
}

void top_logprobs(const float* logits, int32_t n, int32_t k, float lse, std::vector<TokenLogprob>* out) {
  out->clear();
  k = std::max(0, std::min(k, n));
  if (k == 0) return;
  // A sorted window of the best k so far; a logit enters only when it beats
  // the window's last, which after the first few hundred ids is rare.
  auto better = [](const TokenLogprob& a, const TokenLogprob& b) {
    return a.logprob > b.logprob || (a.logprob == b.logprob && a.token < b.token);
  };
  out->reserve(static_cast<size_t>(k) + 1);
  for (int32_t i = 0; i < n; ++i) {
    const float l = logits[i];
    if (std::isnan(l)) continue;
    if (static_cast<int32_t>(out->size()) == k && !(l > out->back().logprob)) continue;
    const TokenLogprob t{i, l};
    out->insert(std::upper_bound(out->begin(), out->end(), t, better), t);
    if (static_cast<int32_t>(out->size()) > k) out->pop_back();
  }
  for (TokenLogprob& t : *out) t.logprob -= lse;
}

}  // namespace parallm
