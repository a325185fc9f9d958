// Elementwise and row-wise ops of the transformer block. Plain functions over
// raw pointers, outputs first (STYLE.md principle 5), vectorized through the
// active ISA (isa.h). exp is a ~2 ulp polynomial on AVX2/AVX-512 (libm on
// scalar): swiglu over a 128-token prefill calls it 3 million times.
#pragma once
#include <cstdint>

#include "core/dtype.h"

namespace parallm::cpu {

enum class RopeStyle {
  kInterleaved,  // rotates pairs (2i, 2i+1): GGUF llama, llama2.c
  kHalf,         // rotates (i, i + head_dim/2): Hugging Face, GGUF qwen2 ("neox")
};

// out, x: [n_tokens, n_embd]; w: [n_embd]. out = x / sqrt(mean(x^2) + eps) * w.
// out may alias x.
void rmsnorm(float* out, const float* x, const float* w, int64_t n_tokens, int64_t n_embd, float eps);

// In place. x: [n_tokens, n_head, head_dim]; positions: [n_tokens];
// inv_freq: [head_dim/2], angle of pair i at position p = p * inv_freq[i]
// (any rope scaling already folded into inv_freq).
void rope(float* x, const int32_t* positions, int64_t n_tokens, int64_t n_head, int64_t head_dim, const float* inv_freq,
          RopeStyle style);

// rope() in two steps, for a forward that rotates q and k of every layer at
// the same positions: the cos / sin table once (cs: [n_tokens, head_dim],
// per token the head_dim/2 cosines then the sines), then the rotation.
void rope_table(float* cs, const int32_t* positions, int64_t n_tokens, int64_t head_dim, const float* inv_freq);
void rope_apply(float* x, const float* cs, int64_t n_tokens, int64_t n_head, int64_t head_dim, RopeStyle style);

// In place over x: [n], numerically stable (subtracts the max).
void softmax(float* x, int64_t n);
// In place over x: [n]: x_i = exp((x_i - max x) * scale), returning their sum
// (scale > 0). A softmax at temperature 1/scale without the division: a
// sampler that draws by cumulative mass needs no normalized probabilities.
float exp_shifted(float* x, int64_t n, float scale);

// out, gate, up: [n]. out = silu(gate) * up; out may alias gate or up.
void swiglu(float* out, const float* gate, const float* up, int64_t n);
// out = gelu_tanh(gate) * up (Gemma's GeGLU), gelu_tanh(x) =
// 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))); out may alias gate or up.
void geglu_tanh(float* out, const float* gate, const float* up, int64_t n);
// x = cap * tanh(x / cap) over x: [n] (Gemma 2's logit soft-capping).
void softcap(float* x, int64_t n, float cap);

// Dot product of a, b: [n], f32 accumulation (attention scores).
float dot(const float* a, const float* b, int64_t n);
// y += a * x, [n] (attention's weighted sum of values).
void axpy(float* y, float a, const float* x, int64_t n);

// out = a + b, [n]; out may alias a or b.
void add(float* out, const float* a, const float* b, int64_t n);

// Fast row conversions for KV-cache rows and activations, SIMD via the active
// ISA. t in {f32, f16, bf16} (f16/bf16 round to nearest even, like quantize_row),
// or q8_0 (a quantized KV cache; quant.h's reference code, n a multiple of 32).
//   convert_row:  src [n] f32 -> dst [n] of t
//   load_row_f32: src [n] of t -> dst [n] f32
void convert_row(DType t, const float* src, void* dst, int64_t n);
void load_row_f32(DType t, const void* src, float* dst, int64_t n);

}  // namespace parallm::cpu
