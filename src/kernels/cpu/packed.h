// Packed weights: q8_0 / q4_0 matrices re-laid at load so that one 512-bit
// register holds the same 4 bytes of 16 consecutive rows.
//
// Why: in the GGUF layout a row is a chain of 18- or 34-byte blocks, each
// with its own f16 scale, so a mat-vec kernel spends most of its instructions
// gathering quants and scales out of misaligned blocks and reducing lanes
// (q4_0 streamed ~20 GB/s on one core, two thirds of the core's bandwidth).
// With 16 rows side by side, a block of all 16 rows is a few aligned loads,
// x is broadcast 4 bytes at a time into VPDPBUSD, the 16 scales are one load,
// and each lane accumulates its own row: no gathers, no horizontal sums. The
// same layout feeds the batched (GEMM) kernel directly, so nothing is
// repacked per call either.
//
// Layout: rows in groups of 16 (the last group padded with zero rows), a
// group is nb = n_in/32 blocks back to back, each block:
//   q4_0: 4 x 64 bytes: part k, lane j (4 bytes) = row j's qs[4k..4k+3]
//         (low nibbles: elements 4k..4k+3, high nibbles: 16+4k..16+4k+3),
//         then 16 f16 scales (row j at 2j): 288 bytes.
//   q8_0: 8 x 64 bytes: part k, lane j = row j's qs[4k..4k+3] + 128 (as
//         unsigned bytes, so VPDPBUSD takes them as its unsigned operand),
//         then 16 f16 scales: 544 bytes.
// The same bytes as the GGUF blocks (plus padding rows), so memory accounting
// does not change.
//
// The other block types (q4_1, q5_0, q5_1, iq4_nl, q2_k..q6_k, iq4_xs) pack
// into the 16-row layout of block_pack.h: the same idea, with their scales
// and bit planes laid out per super-block (a few percent more bytes for some).
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/dtype.h"

namespace parallm::cpu {

constexpr int64_t kPackRows = 16;

// Whether the active kernels run packed matrices of this dtype faster than
// the file's layout (every block type on AVX-512 VNNI; on AVX2 those of
// block_pack.h, not q8_0 / q4_0). PARALLM_PACK=0 in the
// environment turns packing off (A/B measurements).
bool packing_pays(DType t);
// Whether pack_rows accepts this dtype.
bool packable(DType t);

// Bytes of one 16-row group of n_in columns.
size_t packed_group_bytes(DType t, int64_t n_in);
// Bytes of n_out rows packed (groups rounded up).
size_t packed_bytes(DType t, int64_t n_out, int64_t n_in);

// Packs n_out rows of n_in values, row o at src + o*src_stride in the GGUF
// layout, into dst (packed_bytes(t, n_out, n_in) bytes).
void pack_rows(DType t, const void* src, size_t src_stride, int64_t n_out, int64_t n_in, void* dst);

// Row o of a packed q8_0 / q4_0 matrix back in the GGUF layout
// (dtype_row_bytes(t, n_in) bytes at dst). Tests and the portable kernels use
// it; the other types' rows come back as floats (block_pack.h).
void unpack_row(DType t, const void* packed, size_t group_stride, int64_t o, int64_t n_in, void* dst);

// Row o of a packed matrix of any packable type as f32 (n_in floats at dst),
// bit-exact to dequantize_row of the row that was packed.
void dequantize_packed_row(DType t, const void* packed, size_t group_stride, int64_t o, int64_t n_in, float* dst);

}  // namespace parallm::cpu
