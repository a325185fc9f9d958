// Emulated SwiGLU: the kernel's items in order (math/swiglu.h).
#include "kernels/cuda/math/swiglu.h"

#include <type_traits>

#include "kernels/cuda/emulated/launchers.h"
#include "kernels/cuda/swiglu.h"
#include "util/check.h"

namespace parallm::cuda::emulated {

static_assert(std::is_same_v<decltype(&swiglu), decltype(&cuda::swiglu)>);

void swiglu(float* out, const float* gate, const float* up, int64_t n, StreamHandle /*stream*/) {
  PARALLM_CHECK(n >= 0);
  for (int64_t i = 0; i < n; ++i) out[i] = swiglu_item(gate[i], up[i]);
}

}  // namespace parallm::cuda::emulated
