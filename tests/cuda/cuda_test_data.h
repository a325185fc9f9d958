// Inputs and independent references shared by the CUDA-backend tests: random
// rows, tables of each embedding dtype built with the CPU quantizers, and the
// greedy pick written from its definition (the largest non-NaN value, the
// lowest index among equal ones, 0 for a row of NaNs).
#pragma once
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "kernels/cpu/quant.h"

namespace parallm::cuda::test {

inline std::vector<float> random_floats(int64_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dist(rng);
  return v;
}

// [n_vocab, n_embd] of `t`, from random f32 rows (the bytes a GGUF table holds).
inline std::vector<uint8_t> random_table(DType t, int64_t n_vocab, int64_t n_embd, uint32_t seed) {
  const size_t row_bytes = dtype_row_bytes(t, n_embd);
  std::vector<uint8_t> table(row_bytes * static_cast<size_t>(n_vocab));
  for (int64_t r = 0; r < n_vocab; ++r) {
    const std::vector<float> row = random_floats(n_embd, seed + static_cast<uint32_t>(r));
    cpu::quantize_row(t, row.data(), table.data() + static_cast<size_t>(r) * row_bytes, n_embd);
  }
  return table;
}

inline int32_t reference_argmax(const float* x, int64_t n) {
  int32_t best = -1;
  for (int64_t i = 0; i < n; ++i) {
    if (std::isnan(x[i])) continue;
    if (best < 0 || x[i] > x[best]) best = static_cast<int32_t>(i);
  }
  return best < 0 ? 0 : best;
}

// Logits rows that stress the pick: random, then per row a planted maximum
// that repeats in other lanes (ties), NaNs, or the whole row -inf or NaN.
inline std::vector<float> argmax_rows_input(int64_t n_rows, int64_t n_vocab, uint32_t seed) {
  std::vector<float> x = random_floats(n_rows * n_vocab, seed, 3.0f);
  std::mt19937 rng(seed);
  for (int64_t r = 0; r < n_rows; ++r) {
    float* row = x.data() + r * n_vocab;
    switch (r % 5) {
      case 1: {  // the same maximum at three places, lanes apart
        const int64_t a = static_cast<int64_t>(rng() % static_cast<uint32_t>(n_vocab));
        for (int64_t i : {a, (a + 256) % n_vocab, (a + 301) % n_vocab}) row[i] = 50.0f;
        break;
      }
      case 2:  // NaNs, one at the largest value's likely place
        for (int64_t i = 0; i < n_vocab; i += 3) row[i] = NAN;
        break;
      case 3:
        for (int64_t i = 0; i < n_vocab; ++i) row[i] = -INFINITY;
        break;
      case 4:
        if (r % 10 == 4) {
          for (int64_t i = 0; i < n_vocab; ++i) row[i] = NAN;
        }
        break;
      default:
        break;
    }
  }
  return x;
}

}  // namespace parallm::cuda::test
