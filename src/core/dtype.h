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
//   Q4_1: 32 weights = f16 d, f16 m, uint8 q[16];        w = d * nibble + m (nibbles as Q4_0)
//   Q5_0: 32 weights = f16 d, uint8 qh[4], uint8 q[16];  w = d * (5-bit value - 16)
//         low 4 bits as Q4_0; bit 4 of element j is bit j of the little-endian uint32 qh
//   Q5_1: 32 weights = f16 d, f16 m, uint8 qh[4], uint8 q[16]; w = d * 5-bit value + m
//   IQ4_NL: 32 weights = f16 d, uint8 q[16];             w = d * kIq4nlValues[nibble]
//   Q2_K: 256 weights = uint8 scales[16] (low nibble scale, high nibble min),
//         uint8 q[64], f16 d, f16 dmin; w = d*sc*q - dmin*m per 16-weight sub-block,
//         q 2 bits: element 128*h + 32*k + l (l < 32) at bits 2k of q[32h + l]
//   Q3_K: 256 weights = uint8 hmask[32], uint8 q[64], uint8 scales[12] (16 6-bit
//         scales), f16 d; w = d * (scale - 32) * (3-bit value - 4) per 16 weights;
//         low 2 bits as Q2_K, bit 2 of element 32*j + l at bit j of hmask[l]
//   Q5_K: 256 weights = f16 d, f16 dmin, uint8 scales[12] (as Q4_K), uint8 qh[32],
//         uint8 q[128]; w = d*sc*q - dmin*m per 32 weights, q 5 bits: low 4 as
//         Q4_K, bit 4 of element 32*j + l at bit j of qh[l]
//   IQ4_XS: 256 weights = f16 d, uint16 scales_h, uint8 scales_l[4], uint8 q[128];
//         w = d * (ls - 32) * kIq4nlValues[nibble] per 32 weights, ls 6 bits (low 4
//         in nibble j%2 of scales_l[j/2], high 2 at bits 2j of scales_h); nibbles
//         of each sub-block as Q4_0
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

namespace parallm {

// New types go at the end: the values are not stored anywhere, but tests and
// tables list them in this order.
enum class DType : uint8_t {
  kF32,
  kF16,
  kBF16,
  kQ8_0,
  kQ4_0,
  kQ4_K,
  kQ6_K,
  kQ4_1,
  kQ5_0,
  kQ5_1,
  kIQ4_NL,
  kQ2_K,
  kQ3_K,
  kQ5_K,
  kIQ4_XS,
};

// Every DType, in enum order.
constexpr DType kAllDTypes[] = {DType::kF32,    DType::kF16,  DType::kBF16, DType::kQ8_0, DType::kQ4_0,
                                DType::kQ4_K,   DType::kQ6_K, DType::kQ4_1, DType::kQ5_0, DType::kQ5_1,
                                DType::kIQ4_NL, DType::kQ2_K, DType::kQ3_K, DType::kQ5_K, DType::kIQ4_XS};

constexpr int kQK8_0 = 32;
constexpr int kQK4_0 = 32;
constexpr int kQK4_1 = 32;
constexpr int kQK5_0 = 32;
constexpr int kQK5_1 = 32;
constexpr int kQK4_NL = 32;
constexpr int kQK_K = 256;

// IQ4_NL's and IQ4_XS's 16 non-linear levels (ggml's kvalues_iq4nl).
constexpr int8_t kIq4nlValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

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

struct BlockQ4_1 {
  uint16_t d;  // f16 scale
  uint16_t m;  // f16 offset (the block's minimum)
  uint8_t qs[kQK4_1 / 2];
};
static_assert(sizeof(BlockQ4_1) == 20);

struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];  // bit 4 of each element, a little-endian uint32
  uint8_t qs[kQK5_0 / 2];
};
static_assert(sizeof(BlockQ5_0) == 22);

struct BlockQ5_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qh[4];
  uint8_t qs[kQK5_1 / 2];
};
static_assert(sizeof(BlockQ5_1) == 24);

struct BlockIQ4_NL {
  uint16_t d;
  uint8_t qs[kQK4_NL / 2];
};
static_assert(sizeof(BlockIQ4_NL) == 18);

struct BlockQ2_K {
  uint8_t scales[kQK_K / 16];  // low nibble: scale, high nibble: min
  uint8_t qs[kQK_K / 4];
  uint16_t d;     // f16 super-block scale for the scales
  uint16_t dmin;  // f16 super-block scale for the mins
};
static_assert(sizeof(BlockQ2_K) == 84);

struct BlockQ3_K {
  uint8_t hmask[kQK_K / 8];  // bit 2 of each value
  uint8_t qs[kQK_K / 4];     // bits 0-1
  uint8_t scales[12];        // 16 6-bit scales (q3_k_scale)
  uint16_t d;
};
static_assert(sizeof(BlockQ3_K) == 110);

struct BlockQ5_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];  // as Q4_K (q4_k_scale_min)
  uint8_t qh[kQK_K / 8];
  uint8_t qs[kQK_K / 2];
};
static_assert(sizeof(BlockQ5_K) == 176);

struct BlockIQ4_XS {
  uint16_t d;
  uint16_t scales_h;             // bits 4-5 of the 8 sub-block scales, 2 bits each
  uint8_t scales_l[kQK_K / 64];  // bits 0-3, a nibble each
  uint8_t qs[kQK_K / 2];
};
static_assert(sizeof(BlockIQ4_XS) == 136);

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

// The 6-bit scale j (0..15) of a Q3_K super-block, 0..63 (the weight scale is
// d * (value - 32)): low 4 bits in nibble j/8 of scales[j%8], high 2 bits at
// bits 2*(j/4) of scales[8 + j%4].
inline int q3_k_scale(const uint8_t* scales, int j) {
  const int lo = (scales[j % 8] >> (4 * (j / 8))) & 0xf;
  const int hi = (scales[8 + j % 4] >> (2 * (j / 4))) & 3;
  return lo | (hi << 4);
}

// The 6-bit scale of sub-block j (0..7) of an IQ4_XS super-block, 0..63.
inline int iq4_xs_scale(const BlockIQ4_XS& b, int j) {
  return ((b.scales_l[j / 2] >> (4 * (j % 2))) & 0xf) | (((b.scales_h >> (2 * j)) & 3) << 4);
}

// Elements per block (1 for plain types) and bytes per block.
int dtype_block_elems(DType t);
size_t dtype_block_bytes(DType t);
// Bytes of a row of n elements; n must be a multiple of the block size.
size_t dtype_row_bytes(DType t, int64_t n);
bool dtype_is_quantized(DType t);
const char* dtype_name(DType t);
// Parses a dtype_name() ("f32", "q5_k", "iq4_xs", ...; case-insensitive);
// throws InputError naming the accepted values.
DType parse_dtype(const std::string& name);
// "f32, f16, ..., iq4_xs": every dtype_name, for messages.
std::string dtype_names_list();

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
  kIQ4_NL = 20,
  kIQ4_XS = 23,
  kBF16 = 30,
};
// Maps a ggml type id to a DType; returns false for types parallm cannot run.
bool dtype_from_ggml(uint32_t ggml_type, DType* out);
uint32_t dtype_to_ggml(DType t);
// Lower-case name of a ggml type id, also for unsupported ones ("q5_k",
// "iq2_xxs", "type 99" for ids no ggml release defined).
std::string ggml_type_name(uint32_t ggml_type);
// The GGUF spelling of a ggml type id ("Q5_K", "IQ2_XXS", "type 99"), for
// messages about files.
std::string ggml_type_gguf_name(uint32_t ggml_type);
// Elements and bytes per block of any ggml type id (also ones parallm cannot
// run), from the published ggml block layouts; false for ids without a known
// layout (never defined, or removed from ggml before GGUF v3).
bool ggml_type_block(uint32_t ggml_type, int64_t* block_elems, size_t* block_bytes);

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
