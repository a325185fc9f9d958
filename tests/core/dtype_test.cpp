#include "core/dtype.h"

#include <gtest/gtest.h>

#include <cmath>

namespace parallm {

TEST(DType, Fp16RoundTripsEveryHalf) {
  for (uint32_t h = 0; h < 65536; ++h) {
    float f = fp16_to_fp32(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    EXPECT_EQ(fp32_to_fp16(f), h) << h;
  }
}

TEST(DType, Fp16KnownValues) {
  EXPECT_EQ(fp32_to_fp16(1.0f), 0x3c00);
  EXPECT_EQ(fp32_to_fp16(-2.0f), 0xc000);
  EXPECT_EQ(fp32_to_fp16(65504.0f), 0x7bff);
  EXPECT_EQ(fp32_to_fp16(1e6f), 0x7c00);
  EXPECT_FLOAT_EQ(fp16_to_fp32(0x0001), std::ldexp(1.0f, -24));
  // 1 + 2^-11 is a tie between 1 and 1+2^-10: rounds to even (1.0).
  EXPECT_EQ(fp32_to_fp16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
}

TEST(DType, Bf16RoundsToNearestEven) {
  EXPECT_EQ(fp32_to_bf16(1.0f), 0x3f80);
  EXPECT_FLOAT_EQ(bf16_to_fp32(0x3f80), 1.0f);
  EXPECT_EQ(fp32_to_bf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);  // tie -> even
}

TEST(DType, RowBytes) {
  EXPECT_EQ(dtype_row_bytes(DType::kQ8_0, 64), 68u);
  EXPECT_EQ(dtype_row_bytes(DType::kQ4_0, 64), 36u);
  EXPECT_EQ(dtype_row_bytes(DType::kQ4_K, 512), 288u);
  EXPECT_EQ(dtype_row_bytes(DType::kQ6_K, 256), 210u);
  EXPECT_EQ(dtype_row_bytes(DType::kBF16, 10), 20u);
}

}  // namespace parallm
