// Reference (scalar) conversions between f32 and every weight dtype, in the
// bit-exact GGUF/ggml block layouts of core/dtype.h. These are the ground truth
// the SIMD kernels are tested against and what the loader uses to convert
// weights at load (`--dtype`). Hot paths (KV-cache rows) use ops.h instead.
//
// Quantizers follow ggml's reference round-to-nearest ones exactly:
//   q8_0: d = amax/127, id = 1/d, q = roundf(x*id)
//   q4_0: d = max/-8 (max = the value of largest magnitude, with its sign),
//         id = 1/d, q = min(15, (int8)(x*id + 8.5))
// q4_k / q6_k quantizers are simple min/max fits (not ggml's iterative search):
// correct round-trips through dequantize_row, a little less accurate than
// llama.cpp's. They exist for tests and for converting small models.
#pragma once
#include <cstdint>

#include "core/dtype.h"

namespace parallm::cpu {

// src: [n] f32; dst: dtype_row_bytes(t, n) bytes. n must be a multiple of
// t's block size. Every dtype is accepted.
void quantize_row(DType t, const float* src, void* dst, int64_t n);
// src: dtype_row_bytes(t, n) bytes; dst: [n] f32.
void dequantize_row(DType t, const void* src, float* dst, int64_t n);

}  // namespace parallm::cpu
