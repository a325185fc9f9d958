// Rotary position embeddings on a CUDA device, in the CPU kernels' two steps
// (per-item math and the table layout: math/rope.h).
#pragma once
#include <cstdint>

#include "device/stream_handle.h"
#include "kernels/cuda/math/rope.h"

namespace parallm::cuda {

// cs: [n_tokens, head_dim] (per token head_dim/2 cosines, then the sines);
// positions: [n_tokens]; inv_freq: [head_dim/2] (rope scaling folded in).
void rope_table(float* cs, const int32_t* positions, int64_t n_tokens, int64_t head_dim, const float* inv_freq,
                StreamHandle stream);

// In place. x: [n_tokens, n_head, head_dim]; cs: rope_table's [n_tokens, head_dim].
void rope_apply(float* x, const float* cs, int64_t n_tokens, int64_t n_head, int64_t head_dim, RopeStyle style,
                StreamHandle stream);

}  // namespace parallm::cuda
