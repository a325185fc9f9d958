// Per-item math of the paged KV cache (kernels/cuda/kv_cache.h): where a row
// lives, and one value (f32, f16, bf16) or one 32-value q8_0 block of a row
// converted into the cache's bytes, bit-exact with cpu::kv_write:
//   f16, bf16  round to nearest even, core/dtype.h's fp32_to_fp16 /
//              fp32_to_bf16 written again as integer code (no cuda_fp16.h:
//              the same instructions on both sides)
//   q8_0       d = amax / 127 stored as f16, q = x * (1 / d) rounded to
//              nearest even and saturated to int8: what the CPU's AVX-512
//              row converter (avx512_common.h's quantize_block) stores. The
//              scalar reference (kernels/cpu/quant.cpp, hosts without
//              AVX-512) rounds ties away from zero instead, so at an exact
//              .5 its quant can be one step further from zero.
// A q8_0 chunk holds the quants [block_size, head_dim] and then the f16 scales
// [head_dim / 32, block_size] (kernels/cpu/attention.h).
#pragma once
#include "core/dtype.h"
#include "kernels/cuda/math/hd.h"

namespace parallm::cuda {

PARALLM_HD inline bool kv_dtype_ok(DType t) {
  return t == DType::kF32 || t == DType::kF16 || t == DType::kBF16 || t == DType::kQ8_0;
}

// Bytes of one head's row of head_dim values (head_dim a multiple of 32 for
// q8_0: head_dim quants and head_dim / 32 two-byte scales).
PARALLM_HD inline int64_t kv_row_bytes_of(DType t, int64_t head_dim) {
  switch (t) {
    case DType::kF32:
      return head_dim * 4;
    case DType::kF16:
    case DType::kBF16:
      return head_dim * 2;
    case DType::kQ8_0:
      return head_dim + head_dim / kQK8_0 * 2;
    default:
      return 0;
  }
}

// The first byte of (block, kv head h)'s chunk in a pool laid out
// [n_blocks, n_kv_head] chunks of block_size rows of row_bytes.
PARALLM_HD inline uint8_t* kv_chunk(void* pool, int64_t block, int64_t h, int64_t n_kv_head, int64_t block_size,
                                    int64_t row_bytes) {
  return static_cast<uint8_t*>(pool) + (block * n_kv_head + h) * block_size * row_bytes;
}
PARALLM_HD inline const uint8_t* kv_chunk(const void* pool, int64_t block, int64_t h, int64_t n_kv_head,
                                          int64_t block_size, int64_t row_bytes) {
  return static_cast<const uint8_t*>(pool) + (block * n_kv_head + h) * block_size * row_bytes;
}

// x * id rounded to nearest even, then as AVX-512 converts it: a value
// outside int32 (or NaN) becomes INT32_MIN, and int32 -> int8 saturates.
// Only a block whose 1 / d overflowed (amax below ~1.5e-36) reaches the
// outer cases; they are kept so even that block's bytes match the CPU's.
PARALLM_HD inline int8_t kv_q8_0_round(float v) {
  const float r = rintf(v);
  if (!(r >= -2147483648.0f && r < 2147483648.0f)) return -128;
  if (r > 127.0f) return 127;
  if (r < -128.0f) return -128;
  return static_cast<int8_t>(r);
}

// One q8_0 block: x [32] -> q [32], returns the f16 bits of its scale d.
// NOTE: 1 / d is IEEE-rounded on the device too (nvcc's default
// -prec-div=true; the build uses no --use_fast_math).
PARALLM_HD inline uint16_t kv_q8_0_quantize_block(const float* x, int8_t* q) {
  float amax = 0.0f;
  for (int j = 0; j < kQK8_0; ++j) amax = fmaxf(amax, fabsf(x[j]));
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  for (int j = 0; j < kQK8_0; ++j) q[j] = kv_q8_0_round(x[j] * id);
  return f32_to_f16_bits(d);
}

// Value d of a head's row x, into row `row` of its f32 / f16 / bf16 chunk.
PARALLM_HD inline void kv_store_value(DType t, uint8_t* chunk, int64_t row, int64_t head_dim, int64_t d, float x) {
  const int64_t i = row * head_dim + d;
  switch (t) {
    case DType::kF32:
      reinterpret_cast<float*>(chunk)[i] = x;
      return;
    case DType::kF16:
      reinterpret_cast<uint16_t*>(chunk)[i] = f32_to_f16_bits(x);
      return;
    case DType::kBF16:
      reinterpret_cast<uint16_t*>(chunk)[i] = f32_to_bf16_bits(x);
      return;
    default:
      return;  // q8_0 goes by blocks (kv_store_q8_0_block); the launchers reject the rest
  }
}

// Block b (values 32b..32b+31) of a head's row x [32 from x], into row `row`
// of a q8_0 chunk: its quants at row * head_dim + 32 b, its scale at
// scales[b * block_size + row], two bytes each, after the quants.
PARALLM_HD inline void kv_store_q8_0_block(uint8_t* chunk, int64_t row, int64_t block_size, int64_t head_dim, int64_t b,
                                           const float* x) {
  int8_t* q = reinterpret_cast<int8_t*>(chunk + row * head_dim + b * kQK8_0);
  const uint16_t d = kv_q8_0_quantize_block(x, q);
  uint8_t* s = chunk + block_size * head_dim + (b * block_size + row) * 2;
  s[0] = static_cast<uint8_t>(d & 0xffu);  // little-endian, as the CPU's memcpy of the uint16
  s[1] = static_cast<uint8_t>(d >> 8);
}

// The write grids' items. Rows are [n_tokens, n_kv_head * head_dim];
// token t goes to slot slots[t] (block slot / block_size, row slot %
// block_size). A negative slot (a padding token) is skipped. With v_pool ==
// k_pool (one pool read as keys and values, MLA's latent) the row is stored
// once, from k.

// Item `item` of n_tokens * n_kv_head * head_dim: one value of a token's K
// and V rows (f32, f16, bf16 caches).
PARALLM_HD inline void kv_write_value_item(void* k_pool, void* v_pool, DType t, int64_t block_size, int64_t n_kv_head,
                                           int64_t head_dim, const float* k, const float* v, const int64_t* slots,
                                           int64_t item) {
  const int64_t width = n_kv_head * head_dim;
  const int64_t tok = item / width, c = item % width, h = c / head_dim, d = c % head_dim;
  const int64_t slot = slots[tok];
  if (slot < 0) return;
  const int64_t block = slot / block_size, row = slot % block_size;
  const int64_t rb = kv_row_bytes_of(t, head_dim);
  kv_store_value(t, kv_chunk(k_pool, block, h, n_kv_head, block_size, rb), row, head_dim, d, k[tok * width + c]);
  if (v_pool != k_pool) {
    kv_store_value(t, kv_chunk(v_pool, block, h, n_kv_head, block_size, rb), row, head_dim, d, v[tok * width + c]);
  }
}

// Item `item` of n_tokens * n_kv_head * (head_dim / 32): one q8_0 block of a
// token's K and V rows.
PARALLM_HD inline void kv_write_q8_0_item(void* k_pool, void* v_pool, int64_t block_size, int64_t n_kv_head,
                                          int64_t head_dim, const float* k, const float* v, const int64_t* slots,
                                          int64_t item) {
  const int64_t nb = head_dim / kQK8_0, width = n_kv_head * head_dim;
  const int64_t tok = item / (n_kv_head * nb), h = item / nb % n_kv_head, b = item % nb;
  const int64_t slot = slots[tok];
  if (slot < 0) return;
  const int64_t block = slot / block_size, row = slot % block_size;
  const int64_t rb = kv_row_bytes_of(DType::kQ8_0, head_dim);
  const int64_t at = tok * width + h * head_dim + b * kQK8_0;
  kv_store_q8_0_block(kv_chunk(k_pool, block, h, n_kv_head, block_size, rb), row, block_size, head_dim, b, k + at);
  if (v_pool != k_pool) {
    kv_store_q8_0_block(kv_chunk(v_pool, block, h, n_kv_head, block_size, rb), row, block_size, head_dim, b, v + at);
  }
}

}  // namespace parallm::cuda
