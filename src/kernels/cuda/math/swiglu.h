// Per-element math of SwiGLU: out = silu(gate) * up, silu(g) = g / (1 + e^-g).
// NOTE: expf, not __expf: the fast intrinsic is off by up to 2^-21 relative
// near 0 and far more for large |g|, and the CPU kernels are ~2 ulp.
#pragma once
#include "kernels/cuda/math/hd.h"

namespace parallm::cuda {

PARALLM_HD inline float swiglu_item(float gate, float up) { return gate / (1.0f + expf(-gate)) * up; }

}  // namespace parallm::cuda
