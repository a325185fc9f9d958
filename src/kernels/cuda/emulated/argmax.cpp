// Emulated argmax: per row the kernel's lanes in turn, then the same tree
// (math/argmax.h).
#include "kernels/cuda/argmax.h"

#include <type_traits>

#include "kernels/cuda/emulated/launchers.h"
#include "kernels/cuda/launch_checks.h"
#include "kernels/cuda/math/argmax.h"

namespace parallm::cuda::emulated {

static_assert(std::is_same_v<decltype(&argmax_rows), decltype(&cuda::argmax_rows)>);

void argmax_rows(int32_t* out, const float* x, int64_t n_rows, int64_t n_vocab, StreamHandle /*stream*/) {
  check_argmax_args(n_rows, n_vocab);
  ArgmaxItem partial[kRowThreads];
  for (int64_t r = 0; r < n_rows; ++r) {
    for (int lane = 0; lane < kRowThreads; ++lane) {
      partial[lane] = argmax_lane(x + r * n_vocab, n_vocab, lane, kRowThreads);
    }
    out[r] = argmax_tree(partial, kRowThreads);
  }
}

}  // namespace parallm::cuda::emulated
