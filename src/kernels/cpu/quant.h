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
// The other types' quantizers are parallm's own round-to-nearest fits, the
// scales rounded to what the block stores before the quants are chosen
// (quant_legacy.cpp, quant_k.cpp):
//   q4_1 / q5_1: min/max per 32 (d = (max - min) / 15 or 31, m = min)
//   q5_0: d = the signed value of largest magnitude / -16, like q4_0
//   iq4_nl: the best of 8 scales (largest magnitude onto or near either end
//           of the codebook) by squared error, levels by nearest value
//   q2_k / q5_k: min/max per 16 / 32 values (min clamped to <= 0), scales and
//           mins coded against d = max scale / 15 or 63, dmin likewise
//   q3_k: per 16 the largest magnitude onto -4, the 16 scales in 6 signed bits
//   iq4_xs: iq4_nl's fit per 32, the 8 scales in 6 signed bits
// Round-trip error on normal rows, RMS error / RMS value (tests/kernels/
// quant_types_test.cpp): q4_1 0.077, q5_0 0.045, q5_1 0.037, iq4_nl 0.078,
// q2_k 0.33, q3_k 0.16, q5_k 0.038, iq4_xs 0.079 (llama.cpp's searches do
// better on q2_k / q3_k; these exist for tests and for making models).
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
