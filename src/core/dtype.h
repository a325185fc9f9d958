// Element types of weights, activations and KV cache, and the block layouts
// of the quantized ones. Block layouts are bit-compatible with GGUF/ggml so
// that mapped GGUF tensors are used in place.
//
//   Q8_0: 32 weights = f16 scale d, int8 q[32];           w = d * q
//   Q4_0: 32 weights = f16 scale d, uint8 q[16];          w = d * (nibble - 8)
//         element j < 16 in the low nibble of q[j], j >= 16 in the high nibble of q[j-16]
//   Q4_K: 256 weights = f16 d, f16 dmin, uint8 scales[12] (8 6-bit scale/min
//         pairs), uint8 q[128]; w = d*sc*nibble - dmin*m per 32-weight sub-block
//   Q6_K: 256 weights = uint8 ql[128], uint8 qh[64], int8 scales[16], f16 d;
//         w = d * scale * (6-bit value - 32) per 16-weight sub-block
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

namespace parallm {

enum class DType : uint8_t { kF32, kF16, kBF16, kQ8_0, kQ4_0, kQ4_K, kQ6_K };

constexpr int kQK8_0 = 32;
constexpr int kQK4_0 = 32;
constexpr int kQK_K = 256;

struct BlockQ8_0 {
  uint16_t d;  // f16 scale
  int8_t qs[kQK8_0];
};
static_assert(sizeof(BlockQ8_0) == 34);

struct BlockQ4_0 {
  uint16_t d;  // f16 scale
  uint8_t qs[kQK4_0 / 2];
};
static_assert(sizeof(BlockQ4_0) == 18);

struct BlockQ4_K {
  uint16_t d;     // f16 super-block scale for the 6-bit scales
  uint16_t dmin;  // f16 super-block scale for the 6-bit mins
  uint8_t scales[12];
  uint8_t qs[kQK_K / 2];
};
static_assert(sizeof(BlockQ4_K) == 144);

struct BlockQ6_K {
  uint8_t ql[kQK_K / 2];
  uint8_t qh[kQK_K / 4];
  int8_t scales[kQK_K / 16];
  uint16_t d;
};
static_assert(sizeof(BlockQ6_K) == 210);

// The 6-bit scale and min of sub-block j (0..7) of a Q4_K super-block,
// unpacked from its 12 packed bytes (ggml's layout).
inline void q4_k_scale_min(const uint8_t* scales, int j, int* sc, int* m) {
  if (j < 4) {
    *sc = scales[j] & 63;
    *m = scales[j + 4] & 63;
  } else {
    *sc = (scales[j + 4] & 0xf) | ((scales[j - 4] >> 6) << 4);
    *m = (scales[j + 4] >> 4) | ((scales[j] >> 6) << 4);
  }
}

// Elements per block (1 for plain types) and bytes per block.
int dtype_block_elems(DType t);
size_t dtype_block_bytes(DType t);
// Bytes of a row of n elements; n must be a multiple of the block size.
size_t dtype_row_bytes(DType t, int64_t n);
bool dtype_is_quantized(DType t);
const char* dtype_name(DType t);
// Parses "f32", "f16", "bf16", "q8_0", "q4_0", "q4_k", "q6_k" (case-insensitive);
// throws InputError naming the accepted values.
DType parse_dtype(const std::string& name);

// GGUF/ggml type ids (the on-disk enum).
enum class GgmlType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ8_1 = 9,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kQ8_K = 15,
  kBF16 = 30,
};
// Maps a ggml type id to a DType; returns false for types parallm cannot run.
bool dtype_from_ggml(uint32_t ggml_type, DType* out);
uint32_t dtype_to_ggml(DType t);
// Name of a ggml type id, also for unsupported ones ("q5_k", "type 99").
std::string ggml_type_name(uint32_t ggml_type);

// IEEE half and bfloat16 conversions (scalar; SIMD paths live in kernels/).
inline float fp16_to_fp32(uint16_t h) {
  uint32_t sign = (h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ff;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalize
      int e = -1;
      do {
        mant <<= 1;
        ++e;
      } while ((mant & 0x400) == 0);
      bits = sign | (static_cast<uint32_t>(127 - 15 - e) << 23) | ((mant & 0x3ff) << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t fp32_to_fp16(float f);  // round to nearest even

inline float bf16_to_fp32(uint16_t b) {
  uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

inline uint16_t fp32_to_bf16(float f) {  // round to nearest even, NaN kept quiet
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

}  // namespace parallm
