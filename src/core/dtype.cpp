#include "core/dtype.h"

#include <algorithm>
#include <cctype>
#include <iterator>

#include "util/check.h"

namespace parallm {

namespace {

struct DTypeInfo {
  DType t;
  const char* name;
  int block_elems;
  size_t block_bytes;
  GgmlType ggml;
};

// Indexed by DType (kAllDTypes' order).
constexpr DTypeInfo kDTypes[] = {
    {DType::kF32, "f32", 1, 4, GgmlType::kF32},
    {DType::kF16, "f16", 1, 2, GgmlType::kF16},
    {DType::kBF16, "bf16", 1, 2, GgmlType::kBF16},
    {DType::kQ8_0, "q8_0", kQK8_0, sizeof(BlockQ8_0), GgmlType::kQ8_0},
    {DType::kQ4_0, "q4_0", kQK4_0, sizeof(BlockQ4_0), GgmlType::kQ4_0},
    {DType::kQ4_K, "q4_k", kQK_K, sizeof(BlockQ4_K), GgmlType::kQ4_K},
    {DType::kQ6_K, "q6_k", kQK_K, sizeof(BlockQ6_K), GgmlType::kQ6_K},
    {DType::kQ4_1, "q4_1", kQK4_1, sizeof(BlockQ4_1), GgmlType::kQ4_1},
    {DType::kQ5_0, "q5_0", kQK5_0, sizeof(BlockQ5_0), GgmlType::kQ5_0},
    {DType::kQ5_1, "q5_1", kQK5_1, sizeof(BlockQ5_1), GgmlType::kQ5_1},
    {DType::kIQ4_NL, "iq4_nl", kQK4_NL, sizeof(BlockIQ4_NL), GgmlType::kIQ4_NL},
    {DType::kQ2_K, "q2_k", kQK_K, sizeof(BlockQ2_K), GgmlType::kQ2_K},
    {DType::kQ3_K, "q3_k", kQK_K, sizeof(BlockQ3_K), GgmlType::kQ3_K},
    {DType::kQ5_K, "q5_k", kQK_K, sizeof(BlockQ5_K), GgmlType::kQ5_K},
    {DType::kIQ4_XS, "iq4_xs", kQK_K, sizeof(BlockIQ4_XS), GgmlType::kIQ4_XS},
};
static_assert(std::size(kDTypes) == std::size(kAllDTypes));

constexpr bool table_in_enum_order() {
  for (size_t i = 0; i < std::size(kDTypes); ++i) {
    if (static_cast<size_t>(kDTypes[i].t) != i || kAllDTypes[i] != kDTypes[i].t) return false;
  }
  return true;
}
static_assert(table_in_enum_order());

const DTypeInfo& info(DType t) {
  const auto i = static_cast<size_t>(t);
  PARALLM_CHECK(i < std::size(kDTypes));
  return kDTypes[i];
}

// Every type id ggml has defined (ggml.h's enum ggml_type), with its GGUF
// spelling and block layout (ggml-common.h's block structs); block_elems 0:
// ids whose layout was removed from ggml (Q4_2, Q4_3, the repacked Q4_0 /
// IQ4_NL variants), which no GGUF v3 file should hold. The sizes of the types
// parallm cannot run matter only for reading such a file's tensor table.
struct GgmlTypeInfo {
  uint32_t id;
  const char* name;
  int block_elems;
  size_t block_bytes;
};

constexpr GgmlTypeInfo kGgmlTypes[] = {
    {0, "F32", 1, 4},         {1, "F16", 1, 2},         {2, "Q4_0", 32, 18},      {3, "Q4_1", 32, 20},
    {4, "Q4_2", 0, 0},        {5, "Q4_3", 0, 0},        {6, "Q5_0", 32, 22},      {7, "Q5_1", 32, 24},
    {8, "Q8_0", 32, 34},      {9, "Q8_1", 32, 36},      {10, "Q2_K", 256, 84},    {11, "Q3_K", 256, 110},
    {12, "Q4_K", 256, 144},   {13, "Q5_K", 256, 176},   {14, "Q6_K", 256, 210},   {15, "Q8_K", 256, 292},
    {16, "IQ2_XXS", 256, 66}, {17, "IQ2_XS", 256, 74},  {18, "IQ3_XXS", 256, 98}, {19, "IQ1_S", 256, 50},
    {20, "IQ4_NL", 32, 18},   {21, "IQ3_S", 256, 110},  {22, "IQ2_S", 256, 82},   {23, "IQ4_XS", 256, 136},
    {24, "I8", 1, 1},         {25, "I16", 1, 2},        {26, "I32", 1, 4},        {27, "I64", 1, 8},
    {28, "F64", 1, 8},        {29, "IQ1_M", 256, 56},   {30, "BF16", 1, 2},       {31, "Q4_0_4_4", 0, 0},
    {32, "Q4_0_4_8", 0, 0},   {33, "Q4_0_8_8", 0, 0},   {34, "TQ1_0", 256, 54},   {35, "TQ2_0", 256, 66},
    {36, "IQ4_NL_4_4", 0, 0}, {37, "IQ4_NL_4_8", 0, 0}, {38, "IQ4_NL_8_8", 0, 0}, {39, "MXFP4", 32, 17},
};

const GgmlTypeInfo* find_ggml(uint32_t id) {
  return id < std::size(kGgmlTypes) && kGgmlTypes[id].id == id ? &kGgmlTypes[id] : nullptr;
}

}  // namespace

int dtype_block_elems(DType t) { return info(t).block_elems; }

size_t dtype_block_bytes(DType t) { return info(t).block_bytes; }

size_t dtype_row_bytes(DType t, int64_t n) {
  int be = dtype_block_elems(t);
  PARALLM_CHECK_MSG(n % be == 0, std::string("row length not a multiple of the block of ") + dtype_name(t));
  return static_cast<size_t>(n / be) * dtype_block_bytes(t);
}

bool dtype_is_quantized(DType t) { return dtype_block_elems(t) > 1; }

const char* dtype_name(DType t) { return info(t).name; }

std::string dtype_names_list() {
  std::string s;
  for (const DTypeInfo& d : kDTypes) s += std::string(s.empty() ? "" : ", ") + d.name;
  return s;
}

DType parse_dtype(const std::string& name) {
  std::string s = name;
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  for (const DTypeInfo& d : kDTypes) {
    if (s == d.name) return d.t;
  }
  throw InputError("unknown dtype '" + name + "' (supported: " + dtype_names_list() + ")");
}

bool dtype_from_ggml(uint32_t g, DType* out) {
  for (const DTypeInfo& d : kDTypes) {
    if (static_cast<uint32_t>(d.ggml) == g) {
      *out = d.t;
      return true;
    }
  }
  return false;
}

uint32_t dtype_to_ggml(DType t) { return static_cast<uint32_t>(info(t).ggml); }

std::string ggml_type_gguf_name(uint32_t g) {
  const GgmlTypeInfo* t = find_ggml(g);
  return t != nullptr ? t->name : "type " + std::to_string(g);
}

std::string ggml_type_name(uint32_t g) {
  std::string s = ggml_type_gguf_name(g);
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

bool ggml_type_block(uint32_t g, int64_t* block_elems, size_t* block_bytes) {
  const GgmlTypeInfo* t = find_ggml(g);
  if (t == nullptr || t->block_elems == 0) return false;
  *block_elems = t->block_elems;
  *block_bytes = t->block_bytes;
  return true;
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
