#include "core/dtype.h"

#include <algorithm>
#include <cctype>

#include "util/check.h"

namespace parallm {

int dtype_block_elems(DType t) {
  switch (t) {
    case DType::kF32:
    case DType::kF16:
    case DType::kBF16:
      return 1;
    case DType::kQ8_0:
      return kQK8_0;
    case DType::kQ4_0:
      return kQK4_0;
    case DType::kQ4_K:
    case DType::kQ6_K:
      return kQK_K;
  }
  return 1;
}

size_t dtype_block_bytes(DType t) {
  switch (t) {
    case DType::kF32:
      return 4;
    case DType::kF16:
    case DType::kBF16:
      return 2;
    case DType::kQ8_0:
      return sizeof(BlockQ8_0);
    case DType::kQ4_0:
      return sizeof(BlockQ4_0);
    case DType::kQ4_K:
      return sizeof(BlockQ4_K);
    case DType::kQ6_K:
      return sizeof(BlockQ6_K);
  }
  return 0;
}

size_t dtype_row_bytes(DType t, int64_t n) {
  int be = dtype_block_elems(t);
  PARALLM_CHECK_MSG(n % be == 0, std::string("row length not a multiple of the block of ") + dtype_name(t));
  return static_cast<size_t>(n / be) * dtype_block_bytes(t);
}

bool dtype_is_quantized(DType t) { return dtype_block_elems(t) > 1; }

const char* dtype_name(DType t) {
  switch (t) {
    case DType::kF32:
      return "f32";
    case DType::kF16:
      return "f16";
    case DType::kBF16:
      return "bf16";
    case DType::kQ8_0:
      return "q8_0";
    case DType::kQ4_0:
      return "q4_0";
    case DType::kQ4_K:
      return "q4_k";
    case DType::kQ6_K:
      return "q6_k";
  }
  return "?";
}

DType parse_dtype(const std::string& name) {
  std::string s = name;
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  for (DType t : {DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0, DType::kQ4_0, DType::kQ4_K, DType::kQ6_K}) {
    if (s == dtype_name(t)) return t;
  }
  throw InputError("unknown dtype '" + name + "' (supported: f32, f16, bf16, q8_0, q4_0, q4_k, q6_k)");
}

bool dtype_from_ggml(uint32_t g, DType* out) {
  switch (static_cast<GgmlType>(g)) {
    case GgmlType::kF32:
      *out = DType::kF32;
      return true;
    case GgmlType::kF16:
      *out = DType::kF16;
      return true;
    case GgmlType::kBF16:
      *out = DType::kBF16;
      return true;
    case GgmlType::kQ8_0:
      *out = DType::kQ8_0;
      return true;
    case GgmlType::kQ4_0:
      *out = DType::kQ4_0;
      return true;
    case GgmlType::kQ4_K:
      *out = DType::kQ4_K;
      return true;
    case GgmlType::kQ6_K:
      *out = DType::kQ6_K;
      return true;
    default:
      return false;
  }
}

uint32_t dtype_to_ggml(DType t) {
  switch (t) {
    case DType::kF32:
      return 0;
    case DType::kF16:
      return 1;
    case DType::kBF16:
      return 30;
    case DType::kQ8_0:
      return 8;
    case DType::kQ4_0:
      return 2;
    case DType::kQ4_K:
      return 12;
    case DType::kQ6_K:
      return 14;
  }
  return 0;
}

std::string ggml_type_name(uint32_t g) {
  static const char* const kNames[] = {"f32",  "f16",  "q4_0", "q4_1", "type 4", "type 5", "q5_0", "q5_1",
                                       "q8_0", "q8_1", "q2_k", "q3_k", "q4_k",   "q5_k",   "q6_k", "q8_k"};
  if (g < 16) return kNames[g];
  if (g == 30) return "bf16";
  return "type " + std::to_string(g);
}

uint16_t fp32_to_fp16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t absx = x & 0x7fffffffu;
  if (absx > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);   // NaN
  if (absx >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow -> inf
  if (absx < 0x38800000u) {                                               // subnormal half or zero
    if (absx < 0x33000000u) return static_cast<uint16_t>(sign);
    uint32_t mant = (absx & 0x7fffffu) | 0x800000u;
    int shift = 113 - static_cast<int>(absx >> 23) + 13;
    uint32_t half = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1);
    uint32_t mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1u))) ++half;
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t half = ((absx >> 13) - (112u << 10));
  uint32_t rem = absx & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (half & 1u))) ++half;
  return static_cast<uint16_t>(sign | half);
}

}  // namespace parallm
