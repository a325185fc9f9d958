// Internal, AVX2 and AVX-512 kernel files only (an AVX-512 CPU runs AVX2):
// integer dot products of one weight row of the
// block types q4_1, q5_0, q5_1, iq4_nl, q2_k, q3_k, q4_k, q5_k and iq4_xs
// with x quantized to 8 bits per 32-block (int8 q[n_in] and float
// d[n_in / 32]: isa_avx2.cpp's quantize_x, or the q8 / d views of
// isa_avx512.cpp's). Each 32-block of x meets 32 weights of
// one scale (or two 16-weight sub-blocks), so the integer sums need one f32
// multiply-add per x block (blocks_avx2.cpp).
#pragma once
#include <cstdint>

#include "core/dtype.h"

namespace parallm::cpu::avx2 {

// Whether row_dot takes this dtype.
bool has_block_dot(DType t);
// sum_i W[i] * x[i] for one row of n_in weights (n_in a multiple of t's block).
float block_row_dot(DType t, const char* row, const int8_t* q, const float* d, int64_t n_in);

}  // namespace parallm::cpu::avx2
