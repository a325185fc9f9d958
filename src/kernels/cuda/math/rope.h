// Per-item math of rotary position embeddings, in the CPU kernels' two steps
// (kernels/cpu/ops.h): a cos / sin table per token, then the rotation of every
// head's pairs.
//   table: cs [n_tokens, head_dim], per token the head_dim/2 cosines, then the
//          sines, of position * inv_freq[i] (the angle in double: positions
//          reach 1e5 and f32 would drop the angle's low bits)
//   pairs: kInterleaved rotates (2i, 2i+1) (GGUF llama, llama2.c), kHalf
//          rotates (i, i + head_dim/2) (Hugging Face, GGUF qwen2: "neox")
#pragma once
#include "kernels/cuda/math/hd.h"

namespace parallm::cuda {

enum class RopeStyle { kInterleaved, kHalf };

PARALLM_HD inline void rope_cos_sin(int32_t position, float inv_freq, float* c, float* s) {
  const double angle = static_cast<double>(position) * static_cast<double>(inv_freq);
  *c = static_cast<float>(cos(angle));
  *s = static_cast<float>(sin(angle));
}

// The two elements of pair i (< head_dim/2) within a head.
PARALLM_HD inline void rope_pair(RopeStyle style, int64_t i, int64_t head_dim, int64_t* a, int64_t* b) {
  if (style == RopeStyle::kInterleaved) {
    *a = 2 * i;
    *b = 2 * i + 1;
  } else {
    *a = i;
    *b = i + head_dim / 2;
  }
}

// Rotates pair i of one head v: [head_dim] in place; cs_t is the token's table row.
PARALLM_HD inline void rope_rotate_pair(float* v, const float* cs_t, RopeStyle style, int64_t i, int64_t head_dim) {
  int64_t a = 0, b = 0;
  rope_pair(style, i, head_dim, &a, &b);
  const float c = cs_t[i], s = cs_t[head_dim / 2 + i];
  const float x0 = v[a], x1 = v[b];
  v[a] = x0 * c - x1 * s;
  v[b] = x0 * s + x1 * c;
}

}  // namespace parallm::cuda
