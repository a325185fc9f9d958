// Internal: the packed layout of the block types beyond q8_0 / q4_0 (q4_1,
// q5_0, q5_1, iq4_nl and the K-quants q2_k..q6_k, iq4_xs), the 16-row groups
// of packed.h for them. Nothing outside src/kernels/cpu includes this header.
//
// Why: in the GGUF layouts every type scatters a weight's bits over several
// fields (nibbles, a high-bit mask, 6-bit scales packed 12 bytes to 8 pairs),
// so a one-row kernel spends its instructions unpacking one row at a time and
// reduces lanes per block (q4_k decoded at ~0.35 of the memory roofline where
// the packed q4_0 passes 1.0). Here, like packed q4_0, 16 rows sit side by
// side: one 64-byte load holds the same 4 weights of every row, each weight
// is an unsigned byte after a shift and a mask, x is broadcast 4 bytes at a
// time into VPDPBUSD and lane j accumulates row j.
//
// Every type is described by one integer form per super-block of S weights
// (S = 32 for the legacy types, 256 for the K-quants and iq4_xs):
//   w = (d * sc) * (u - offset)  [- dmin * m  |  + m]
// with u an unsigned quant of up to 8 bits, sc and m small integers per
// sub-block of 16 or 32 weights (sc = 1 for the legacy types), d and dmin
// the block's f16 scales. This is the same arithmetic, in the same order, as
// each type's reference dequantizer (quant.h), so dequantize_block_packed_row
// is bit-exact to dequantize_row.
//
// Layout of one super-block record of a 16-row group:
//   d[16] f16                       row j at 2j
//   dmin[16] f16                    types with a min (legacy: their m)
//   sc[n_sub][16] int8              K types (q2_k: sc | m << 4, unsigned)
//   m[n_sub][16] uint8              K types with a min, except q2_k
//   S/32 chunks of 32 weights a row, each its bit planes low first: a plane
//   of width w is w vectors of 64 bytes; byte 4j+b of vector v holds, at
//   bits w*i.., the field of row j's weight 4*(v + w*i) + b of the chunk.
// So part k (weights 4k..4k+3 of the chunk, multiplied by x bytes 4k..4k+3)
// is plane vector k % w shifted right by w * (k / w). Sub-blocks of 16 are
// parts 0-3 and 4-7 of a chunk. The records take the GGUF blocks' bytes or a
// few percent more (q4_k +2.8%, q3_k +3.6%). iq4 stores the codebook index,
// which the kernels look up as u = level + 128.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>

#include "core/dtype.h"
#include "util/check.h"

namespace parallm::cpu {

// How a block type's min enters: none, "+ m" (q4_1 / q5_1), "- dmin * m".
enum class BlockMin { kNone, kAdd, kSub };

struct BlockLayout {
  int super = 0;           // weights per super-block (32 or 256); 0: not a block-packed type
  int sub = 0;             // weights per scale (16 or 32)
  int planes[2] = {0, 0};  // bit-plane widths, low bits first (0: none)
  int offset = 0;          // the integer weight is u - offset
  BlockMin min = BlockMin::kNone;
  bool int_scales = false;  // per-sub-block integer scales (K types)
  bool combined = false;    // q2_k: scale | min << 4 in one byte
  bool codebook = false;    // iq4: u = kIq4nlValues[nibble] + 128

  constexpr int n_sub() const { return super / sub; }
  constexpr int chunks() const { return super / 32; }
  constexpr int chunk_bytes() const { return 64 * (planes[0] + planes[1]); }
  constexpr int dmin_offset() const { return 32; }
  constexpr int sc_offset() const { return min == BlockMin::kNone ? 32 : 64; }
  constexpr int m_offset() const { return sc_offset() + (int_scales ? 16 * n_sub() : 0); }
  constexpr bool separate_m() const { return int_scales && min == BlockMin::kSub && !combined; }
  constexpr int header_bytes() const { return m_offset() + (separate_m() ? 16 * n_sub() : 0); }
  constexpr int record_bytes() const { return header_bytes() + chunks() * chunk_bytes(); }
};

constexpr BlockLayout block_layout(DType t) {
  BlockLayout l;
  switch (t) {
    case DType::kQ4_1:
      l.super = l.sub = 32, l.planes[0] = 4, l.min = BlockMin::kAdd;
      break;
    case DType::kQ5_0:
      l.super = l.sub = 32, l.planes[0] = 4, l.planes[1] = 1, l.offset = 16;
      break;
    case DType::kQ5_1:
      l.super = l.sub = 32, l.planes[0] = 4, l.planes[1] = 1, l.min = BlockMin::kAdd;
      break;
    case DType::kIQ4_NL:
      l.super = l.sub = 32, l.planes[0] = 4, l.offset = 128, l.codebook = true;
      break;
    case DType::kQ2_K:
      l.super = 256, l.sub = 16, l.planes[0] = 2, l.min = BlockMin::kSub, l.int_scales = l.combined = true;
      break;
    case DType::kQ3_K:
      l.super = 256, l.sub = 16, l.planes[0] = 2, l.planes[1] = 1, l.offset = 4, l.int_scales = true;
      break;
    case DType::kQ4_K:
      l.super = 256, l.sub = 32, l.planes[0] = 4, l.min = BlockMin::kSub, l.int_scales = true;
      break;
    case DType::kQ5_K:
      l.super = 256, l.sub = 32, l.planes[0] = 4, l.planes[1] = 1, l.min = BlockMin::kSub, l.int_scales = true;
      break;
    case DType::kQ6_K:
      l.super = 256, l.sub = 16, l.planes[0] = 4, l.planes[1] = 2, l.offset = 32, l.int_scales = true;
      break;
    case DType::kIQ4_XS:
      l.super = 256, l.sub = 32, l.planes[0] = 4, l.offset = 128, l.int_scales = l.codebook = true;
      break;
    default:
      break;
  }
  return l;
}

inline bool block_packable(DType t) { return block_layout(t).super > 0; }

// A V from unaligned bytes (a token's 4 x bytes, a scale): the kernels'
// reads of x, which no SIMD load serves.
template <class V>
inline V load_as(const void* p) {
  V v;
  std::memcpy(&v, p, sizeof(V));
  return v;
}

// Calls f(std::integral_constant<DType, T>{}) for the block-packed type t, so
// each ISA's kernel file instantiates its templates per type through this one
// switch. CHECKs that t is block-packed.
template <class F>
decltype(auto) visit_block_type(DType t, F&& f) {
  switch (t) {
    case DType::kQ4_1:
      return f(std::integral_constant<DType, DType::kQ4_1>{});
    case DType::kQ5_0:
      return f(std::integral_constant<DType, DType::kQ5_0>{});
    case DType::kQ5_1:
      return f(std::integral_constant<DType, DType::kQ5_1>{});
    case DType::kIQ4_NL:
      return f(std::integral_constant<DType, DType::kIQ4_NL>{});
    case DType::kQ2_K:
      return f(std::integral_constant<DType, DType::kQ2_K>{});
    case DType::kQ3_K:
      return f(std::integral_constant<DType, DType::kQ3_K>{});
    case DType::kQ4_K:
      return f(std::integral_constant<DType, DType::kQ4_K>{});
    case DType::kQ5_K:
      return f(std::integral_constant<DType, DType::kQ5_K>{});
    case DType::kQ6_K:
      return f(std::integral_constant<DType, DType::kQ6_K>{});
    case DType::kIQ4_XS:
      return f(std::integral_constant<DType, DType::kIQ4_XS>{});
    default:
      break;
  }
  PARALLM_CHECK_MSG(false, std::string("not a block-packed type: ") + dtype_name(t));
  return f(std::integral_constant<DType, DType::kQ4_K>{});  // not reached
}

// Bytes of one 16-row group of n_in columns (n_in a multiple of the super-block).
size_t block_packed_group_bytes(DType t, int64_t n_in);
// Packs n_out GGUF rows (row o at src + o*src_stride) into dst
// (ceil(n_out/16) groups; padding rows are zero, so they contribute 0).
void block_pack_rows(DType t, const void* src, size_t src_stride, int64_t n_out, int64_t n_in, void* dst);
// Row o of a packed matrix as f32, bit-exact to dequantize_row of the GGUF row.
void dequantize_block_packed_row(DType t, const void* packed, size_t group_stride, int64_t o, int64_t n_in, float* dst);

}  // namespace parallm::cpu
