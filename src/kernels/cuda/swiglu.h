// SwiGLU on a CUDA device (per-element math: math/swiglu.h).
#pragma once
#include <cstdint>

#include "device/stream_handle.h"

namespace parallm::cuda {

// out, gate, up: [n]. out = silu(gate) * up; out may alias gate or up.
void swiglu(float* out, const float* gate, const float* up, int64_t n, StreamHandle stream);

}  // namespace parallm::cuda
