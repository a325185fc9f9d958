// Internal, AVX2 and AVX-512 kernel files only (an AVX-512 CPU runs AVX2):
// integer dot products of one weight row of the
// block types q4_1, q5_0, q5_1, iq4_nl, q2_k, q3_k, q4_k, q5_k and iq4_xs
// with x quantized to 8 bits per 32-block (int8 q[n_in] and float
// d[n_in / 32]: isa_avx2.cpp's quantize_x, or the q8 / d views of
// isa_avx512.cpp's). Each 32-block of x meets 32 weights of
// one scale (or two 16-weight sub-blocks), so the integer sums need one f32
// multiply-add per x block (blocks_avx2.cpp).
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/dtype.h"
#include "kernels/cpu/isa_table.h"

namespace parallm::cpu::avx2 {

// Whether row_dot takes this dtype.
bool has_block_dot(DType t);
// sum_i W[i] * x[i] for one row of n_in weights (n_in a multiple of t's block).
float block_row_dot(DType t, const char* row, const int8_t* q, const float* d, int64_t n_in);

// Where one token's fields sit in isa_avx2.cpp's quantized x: token t starts
// at t * token_bytes with its int8 q[n_in], then float d[n_in / 32] at
// d_offset, int32 s16[n_in / 16] (the sums of each block's q 0-15 and 16-31)
// at s16_offset and float xs16[n_in / 16] (those times the block's d) at
// xs16_offset.
struct XqLayout {
  size_t token_bytes, d_offset, s16_offset, xs16_offset;
};

// Packed matrices of the block_pack.h types, any batch, x in task.xq laid
// out as xl says (block_pack_avx2.cpp).
void block_packed_rows(const RowsTask& task, const XqLayout& xl);

}  // namespace parallm::cpu::avx2
