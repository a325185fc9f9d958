// Internal: the reference quantizers and dequantizers of the block types
// beyond q8_0 / q4_0 / q4_k / q6_k, one pair per type over nb whole blocks,
// which quant.cpp's quantize_row / dequantize_row dispatch to (the formulas
// and their accuracy are in quant.h). Nothing outside src/kernels/cpu
// includes this header.
#pragma once
#include <cstdint>

#include "core/dtype.h"

namespace parallm::cpu {

// quant_legacy.cpp: the 32-element blocks.
void quantize_q4_1(const float* x, BlockQ4_1* y, int64_t nb);
void quantize_q5_0(const float* x, BlockQ5_0* y, int64_t nb);
void quantize_q5_1(const float* x, BlockQ5_1* y, int64_t nb);
void quantize_iq4_nl(const float* x, BlockIQ4_NL* y, int64_t nb);
void dequantize_q4_1(const BlockQ4_1* x, float* y, int64_t nb);
void dequantize_q5_0(const BlockQ5_0* x, float* y, int64_t nb);
void dequantize_q5_1(const BlockQ5_1* x, float* y, int64_t nb);
void dequantize_iq4_nl(const BlockIQ4_NL* x, float* y, int64_t nb);

// quant_k.cpp: the 256-element super-blocks.
void quantize_q2_k(const float* x, BlockQ2_K* y, int64_t nb);
void quantize_q3_k(const float* x, BlockQ3_K* y, int64_t nb);
void quantize_q5_k(const float* x, BlockQ5_K* y, int64_t nb);
void quantize_iq4_xs(const float* x, BlockIQ4_XS* y, int64_t nb);
void dequantize_q2_k(const BlockQ2_K* x, float* y, int64_t nb);
void dequantize_q3_k(const BlockQ3_K* x, float* y, int64_t nb);
void dequantize_q5_k(const BlockQ5_K* x, float* y, int64_t nb);
void dequantize_iq4_xs(const BlockIQ4_XS* x, float* y, int64_t nb);

// The 12 bytes of 8 6-bit scale / min pairs shared by Q4_K and Q5_K (the
// inverse of q4_k_scale_min).
void pack_scale_min_k4(const uint8_t* sc, const uint8_t* m, uint8_t* scales);

// The scale d (f32, not yet rounded to what a block stores) of the 16-level
// IQ4_NL codebook fitted to n values: the candidate of smallest squared error
// among a few that map the largest magnitude onto or near either end of the
// codebook; idx receives the levels for it. Shared by IQ4_NL and IQ4_XS,
// which choose the levels again for the scale as stored.
float fit_iq4nl(const float* x, int n, uint8_t* idx);
// The index of the codebook level nearest to v (v in units of d).
int nearest_iq4nl(float v);

}  // namespace parallm::cpu
