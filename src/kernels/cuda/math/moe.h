// Per-token math of mixture-of-experts routing (kernels/cuda/moe.h), the rule
// of model/moe.cpp's route_tokens without expert groups, in its operations
// and order, so the emulated device gives the CPU's ids and weights:
//   scores: sigmoid(l) = 1 / (1 + exp(-l)) each, or a softmax over all
//     experts (max subtracted, exps summed in expert order, each divided by
//     the sum);
//   choice: score + bias[e] (bias optional), the k best by choice, best
//     first, ties to the lower expert id;
//   weights: the chosen scores, times 1 / (their sum in pick order) when
//     norm_topk and the sum is positive, times routed_scale.
// The device's expf may differ from the host's by an ulp or two, so GPU
// weights agree with the emulation to a few ulps (ids exactly, but for
// scores within those ulps of each other).
// Plus the per-element data movement of gather_rows / scatter_add_rows.
#pragma once
#include "kernels/cuda/math/hd.h"
#include "kernels/cuda/moe.h"

namespace parallm::cuda {

// Routers have at most this many experts (DeepSeek-V3: 256).
constexpr int kMoeMaxExperts = 256;

// Whether choice a of expert ia ranks before choice b of expert ib.
PARALLM_HD inline bool moe_ranks_before(float a, int ia, float b, int ib) { return a > b || (a == b && ia < ib); }

// One token: logits [n_expert] -> ids [k], weights [k]. bias [n_expert] or
// null. n_expert <= kMoeMaxExperts, 1 <= k <= n_expert.
PARALLM_HD inline void moe_topk_token(int32_t* ids, float* weights, const float* logits, const float* bias,
                                      int n_expert, int k, TopKRule rule) {
  float scores[kMoeMaxExperts];
  if (rule.sigmoid) {
    for (int e = 0; e < n_expert; ++e) scores[e] = 1.0f / (1.0f + expf(-logits[e]));
  } else {
    float mx = logits[0];
    for (int e = 1; e < n_expert; ++e) mx = logits[e] > mx ? logits[e] : mx;
    float sum = 0.0f;
    for (int e = 0; e < n_expert; ++e) sum += (scores[e] = expf(logits[e] - mx));
    for (int e = 0; e < n_expert; ++e) scores[e] /= sum;
  }
  // k passes, each taking the best expert not yet taken: the order of a
  // sort by (choice descending, id ascending), as route_tokens' partial_sort.
  uint32_t taken[kMoeMaxExperts / 32] = {};
  float sum = 0.0f;
  for (int r = 0; r < k; ++r) {
    int best = -1;
    float best_choice = 0.0f;
    for (int e = 0; e < n_expert; ++e) {
      if ((taken[e / 32] >> (e % 32)) & 1u) continue;
      const float c = scores[e] + (bias != nullptr ? bias[e] : 0.0f);
      if (best < 0 || moe_ranks_before(c, e, best_choice, best)) {
        best = e;
        best_choice = c;
      }
    }
    // NOTE: only NaN choices leave best < 0 here (never past the first
    // candidate otherwise); take the lowest free id so every slot is an id.
    if (best < 0) {
      for (best = 0; (taken[best / 32] >> (best % 32)) & 1u; ++best) {
      }
    }
    taken[best / 32] |= 1u << (best % 32);
    ids[r] = best;
    sum += scores[best];
  }
  const float norm = rule.norm_topk && sum > 0.0f ? 1.0f / sum : 1.0f;
  for (int r = 0; r < k; ++r) weights[r] = scores[ids[r]] * norm * rule.routed_scale;
}

// gather_rows: element j of output row i, x[rows[i], j]. Row indices are the
// caller's (built on the host from the routes, checked there): a kernel
// cannot check them against x's rows, it is not given their count.
PARALLM_HD inline float gather_element(const float* x, const int32_t* rows, int64_t n_embd, int64_t i, int64_t j) {
  return x[static_cast<int64_t>(rows[i]) * n_embd + j];
}

// scatter_add_rows: out[rows[i], j] += weight * y[i, j], one fused
// multiply-add on both sides (nvcc would contract it anyway).
PARALLM_HD inline void scatter_add_element(float* out, const float* y, const int32_t* rows, const float* weights,
                                           int64_t n_embd, int64_t i, int64_t j) {
  float* o = out + static_cast<int64_t>(rows[i]) * n_embd + j;
  *o = fmaf(weights[i], y[i * n_embd + j], *o);
}

}  // namespace parallm::cuda
