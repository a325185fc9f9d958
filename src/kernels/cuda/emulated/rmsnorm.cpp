// Emulated RMSNorm with the fused residual add: per token the kernel's
// kRowThreads lanes in turn, their sums through the same tree, then each
// lane's scaling (math/rmsnorm.h).
#include "kernels/cuda/math/rmsnorm.h"

#include <type_traits>

#include "kernels/cuda/emulated/launchers.h"
#include "kernels/cuda/launch_checks.h"
#include "kernels/cuda/rmsnorm.h"

namespace parallm::cuda::emulated {

static_assert(std::is_same_v<decltype(&rmsnorm), decltype(&cuda::rmsnorm)>);

void rmsnorm(float* out, float* x, const float* delta, const float* w, int64_t n_tokens, int64_t n_embd, float eps,
             StreamHandle /*stream*/) {
  check_rmsnorm_args(n_tokens, n_embd, eps);
  float partial[kRowThreads];
  for (int64_t t = 0; t < n_tokens; ++t) {
    const int64_t row = t * n_embd;
    for (int lane = 0; lane < kRowThreads; ++lane) {
      partial[lane] = rms_residual_lane(x + row, delta != nullptr ? delta + row : nullptr, n_embd, lane, kRowThreads);
    }
    const float scale = rms_scale(rms_tree_sum(partial, kRowThreads), n_embd, eps);
    for (int lane = 0; lane < kRowThreads; ++lane) {
      rms_apply_lane(out + row, x + row, w, scale, n_embd, lane, kRowThreads);
    }
  }
}

}  // namespace parallm::cuda::emulated
