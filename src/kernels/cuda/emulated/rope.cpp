// Emulated RoPE: the kernels' items, (token, pair) for the table and
// (token, head, pair) for the rotation, in item order (math/rope.h).
#include "kernels/cuda/math/rope.h"

#include <type_traits>

#include "kernels/cuda/emulated/launchers.h"
#include "kernels/cuda/launch_checks.h"
#include "kernels/cuda/rope.h"

namespace parallm::cuda::emulated {

static_assert(std::is_same_v<decltype(&rope_table), decltype(&cuda::rope_table)>);
static_assert(std::is_same_v<decltype(&rope_apply), decltype(&cuda::rope_apply)>);

void rope_table(float* cs, const int32_t* positions, int64_t n_tokens, int64_t head_dim, const float* inv_freq,
                StreamHandle /*stream*/) {
  check_rope_args(n_tokens, 1, head_dim);
  const int64_t half = head_dim / 2;
  for (int64_t t = 0; t < n_tokens; ++t) {
    for (int64_t i = 0; i < half; ++i) {
      rope_cos_sin(positions[t], inv_freq[i], &cs[t * head_dim + i], &cs[t * head_dim + half + i]);
    }
  }
}

void rope_apply(float* x, const float* cs, int64_t n_tokens, int64_t n_head, int64_t head_dim, RopeStyle style,
                StreamHandle /*stream*/) {
  check_rope_args(n_tokens, n_head, head_dim);
  for (int64_t t = 0; t < n_tokens; ++t) {
    for (int64_t h = 0; h < n_head; ++h) {
      for (int64_t i = 0; i < head_dim / 2; ++i) {
        rope_rotate_pair(x + (t * n_head + h) * head_dim, cs + t * head_dim, style, i, head_dim);
      }
    }
  }
}

}  // namespace parallm::cuda::emulated
