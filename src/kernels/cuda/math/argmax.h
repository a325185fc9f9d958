// Per-lane math of the greedy pick over logits rows, with the sampler's rules
// (sampling/sampler.h argmax): the largest value wins, the lowest index among
// equal ones, NaN never wins, a row of NaNs gives index 0. Each of kRowThreads
// lanes scans its elements in increasing index order, then the lanes meet in a
// halving tree (argmax_tree's order, the CUDA kernel's shared-memory order).
#pragma once
#include "kernels/cuda/math/hd.h"

namespace parallm::cuda {

// NOTE: no default member initializers: the CUDA kernel keeps these in
// __shared__ memory, which cannot have constructors.
struct ArgmaxItem {
  float value;
  int32_t index;  // -1: no candidate yet (every element seen was NaN)
};

// The better of two candidates; a's index is below b's whenever they tie in a
// lane's scan, and the tree keeps the lower one explicitly.
PARALLM_HD inline ArgmaxItem argmax_better(ArgmaxItem a, ArgmaxItem b) {
  if (b.index < 0) return a;
  if (a.index < 0) return b;
  if (b.value > a.value || (b.value == a.value && b.index < a.index)) return b;
  return a;
}

PARALLM_HD inline ArgmaxItem argmax_lane(const float* x, int64_t n_vocab, int lane, int lanes) {
  ArgmaxItem best{-INFINITY, -1};
  for (int64_t i = lane; i < n_vocab; i += lanes) {
    const float v = x[i];
    // NOTE: v != v is NaN; -inf candidates still count (a row of -inf gives 0).
    if (v != v) continue;
    best = argmax_better(best, ArgmaxItem{v, static_cast<int32_t>(i)});
  }
  return best;
}

PARALLM_HD inline int32_t argmax_tree(ArgmaxItem* partial, int lanes) {
  for (int s = lanes / 2; s > 0; s /= 2) {
    for (int j = 0; j < s; ++j) partial[j] = argmax_better(partial[j], partial[j + s]);
  }
  return partial[0].index < 0 ? 0 : partial[0].index;
}

}  // namespace parallm::cuda
