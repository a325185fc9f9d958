// The __host__ __device__ per-item math of src/kernels/cuda/math/, compiled by
// g++ here, against the CPU kernels (kernels/cpu) and double-precision
// references, over dtypes and shapes (odd widths, head dims 64 / 128 / with
// an odd number of pairs). The CUDA kernels run this very code.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "core/dtype.h"
#include "cuda_test_data.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/quant.h"
#include "kernels/cuda/math/argmax.h"
#include "kernels/cuda/math/embedding.h"
#include "kernels/cuda/math/hd.h"
#include "kernels/cuda/math/rmsnorm.h"
#include "kernels/cuda/math/rope.h"
#include "kernels/cuda/math/swiglu.h"

namespace parallm::cuda {
namespace {

uint32_t bits_of(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

TEST(CudaMath, HalfAndBfloat16DecodeEveryValueLikeCore) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const auto v = static_cast<uint16_t>(h);
    const float want = fp16_to_fp32(v), got = f16_to_f32(v);
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << h;
    } else {
      ASSERT_EQ(bits_of(got), bits_of(want)) << "f16 " << h;
    }
    ASSERT_EQ(bits_of(bf16_to_f32(v)), bits_of(parallm::bf16_to_fp32(v))) << "bf16 " << h;
  }
  // Spot values from IEEE 754 binary16 itself: smallest subnormal, largest
  // normal, one, minus two.
  EXPECT_EQ(f16_to_f32(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(f16_to_f32(0x7bff), 65504.0f);
  EXPECT_EQ(f16_to_f32(0x3c00), 1.0f);
  EXPECT_EQ(f16_to_f32(0xc000), -2.0f);
}

TEST(CudaMath, EmbeddingElementsMatchCpuDequantize) {
  for (DType t : {DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0}) {
    for (int64_t n_embd : {32, 96, 288, 77, 1}) {
      if (t == DType::kQ8_0 && n_embd % 32 != 0) continue;
      SCOPED_TRACE(std::string(dtype_name(t)) + " n_embd " + std::to_string(n_embd));
      const int64_t n_vocab = 5;
      const std::vector<uint8_t> table = test::random_table(t, n_vocab, n_embd, 7);
      const size_t row_bytes = dtype_row_bytes(t, n_embd);
      EXPECT_EQ(embedding_row_bytes(t, n_embd), static_cast<int64_t>(row_bytes));
      std::vector<float> want(static_cast<size_t>(n_embd));
      for (int32_t token = 0; token < n_vocab; ++token) {
        cpu::dequantize_row(t, table.data() + token * row_bytes, want.data(), n_embd);
        for (int64_t i = 0; i < n_embd; ++i) {
          // The same product of the same decoded numbers: bit for bit.
          ASSERT_EQ(bits_of(embedding_element(t, table.data(), token, n_embd, n_vocab, i)), bits_of(want[i]))
              << "token " << token << " element " << i;
        }
      }
      EXPECT_TRUE(std::isnan(embedding_element(t, table.data(), -1, n_embd, n_vocab, 0)));
      EXPECT_TRUE(std::isnan(embedding_element(t, table.data(), static_cast<int32_t>(n_vocab), n_embd, n_vocab, 0)));
    }
  }
  EXPECT_FALSE(embedding_dtype_supported(DType::kQ4_0));
  EXPECT_FALSE(embedding_dtype_supported(DType::kQ6_K));
}

// One row through the lanes as the kernel does it.
std::vector<float> lanes_rmsnorm(std::vector<float>& x, const float* delta, const std::vector<float>& w, float eps) {
  const auto n = static_cast<int64_t>(x.size());
  float partial[kRowThreads];
  for (int lane = 0; lane < kRowThreads; ++lane) {
    partial[lane] = rms_residual_lane(x.data(), delta, n, lane, kRowThreads);
  }
  const float scale = rms_scale(rms_tree_sum(partial, kRowThreads), n, eps);
  std::vector<float> out(x.size());
  for (int lane = 0; lane < kRowThreads; ++lane)
    rms_apply_lane(out.data(), x.data(), w.data(), scale, n, lane, kRowThreads);
  return out;
}

TEST(CudaMath, RmsnormLanesMatchCpuAndDouble) {
  const float eps = 1e-5f;
  for (int64_t n : {1, 7, 255, 256, 257, 1000, 4099}) {
    SCOPED_TRACE("n_embd " + std::to_string(n));
    const std::vector<float> x0 = test::random_floats(n, 11, 2.0f), delta = test::random_floats(n, 12);
    const std::vector<float> w = test::random_floats(n, 13);
    // Fused residual add against cpu::add then cpu::rmsnorm.
    std::vector<float> x = x0;
    const std::vector<float> got = lanes_rmsnorm(x, delta.data(), w, eps);
    std::vector<float> cpu_x(x0.size()), cpu_out(x0.size());
    cpu::add(cpu_x.data(), x0.data(), delta.data(), n);
    cpu::rmsnorm(cpu_out.data(), cpu_x.data(), w.data(), 1, n, eps);
    double ss = 0;
    for (int64_t i = 0; i < n; ++i) ss += static_cast<double>(cpu_x[i]) * cpu_x[i];
    const double scale = 1.0 / std::sqrt(ss / static_cast<double>(n) + eps);
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(x[i], cpu_x[i]) << i;  // the residual itself: one f32 add, exact
      const double want = cpu_x[i] * scale * w[i];
      ASSERT_NEAR(got[i], want, 2e-6 * (1 + std::fabs(want))) << i;
      ASSERT_NEAR(got[i], cpu_out[i], 2e-6 * (1 + std::fabs(cpu_out[i]))) << i;
    }
    // Without delta the row is left as it was.
    std::vector<float> y = x0;
    lanes_rmsnorm(y, nullptr, w, eps);
    EXPECT_EQ(y, x0);
  }
}

TEST(CudaMath, RopeTableAndPairsMatchCpuAndDouble) {
  for (int64_t head_dim : {64, 128, 34, 2}) {
    for (cpu::RopeStyle cpu_style : {cpu::RopeStyle::kInterleaved, cpu::RopeStyle::kHalf}) {
      const RopeStyle style = cpu_style == cpu::RopeStyle::kHalf ? RopeStyle::kHalf : RopeStyle::kInterleaved;
      SCOPED_TRACE("head_dim " + std::to_string(head_dim) + (style == RopeStyle::kHalf ? " half" : " interleaved"));
      const int64_t half = head_dim / 2, n_head = 3;
      const std::vector<int32_t> positions = {0, 1, 17, 4095, 100000};
      const auto n_tokens = static_cast<int64_t>(positions.size());
      std::vector<float> inv_freq(static_cast<size_t>(half));
      for (int64_t i = 0; i < half; ++i) inv_freq[i] = std::pow(10000.0f, -2.0f * i / static_cast<float>(head_dim));
      std::vector<float> cs(static_cast<size_t>(n_tokens * head_dim)), cpu_cs(cs.size());
      for (int64_t t = 0; t < n_tokens; ++t) {
        for (int64_t i = 0; i < half; ++i) {
          rope_cos_sin(positions[t], inv_freq[i], &cs[t * head_dim + i], &cs[t * head_dim + half + i]);
        }
      }
      cpu::rope_table(cpu_cs.data(), positions.data(), n_tokens, head_dim, inv_freq.data());
      EXPECT_EQ(cs, cpu_cs);
      const std::vector<float> x0 = test::random_floats(n_tokens * n_head * head_dim, 21);
      std::vector<float> x = x0, cpu_x = x0;
      for (int64_t t = 0; t < n_tokens; ++t) {
        for (int64_t h = 0; h < n_head; ++h) {
          for (int64_t i = 0; i < half; ++i) {
            rope_rotate_pair(x.data() + (t * n_head + h) * head_dim, cs.data() + t * head_dim, style, i, head_dim);
          }
        }
      }
      cpu::rope_apply(cpu_x.data(), cpu_cs.data(), n_tokens, n_head, head_dim, cpu_style);
      for (int64_t t = 0; t < n_tokens; ++t) {
        for (int64_t h = 0; h < n_head; ++h) {
          const int64_t base = (t * n_head + h) * head_dim;
          for (int64_t i = 0; i < half; ++i) {
            // The pair's rotation in double, from the definition.
            const int64_t a = style == RopeStyle::kHalf ? i : 2 * i,
                          b = style == RopeStyle::kHalf ? i + half : 2 * i + 1;
            const double angle = static_cast<double>(positions[t]) * inv_freq[i];
            const double ra = x0[base + a] * std::cos(angle) - x0[base + b] * std::sin(angle);
            const double rb = x0[base + a] * std::sin(angle) + x0[base + b] * std::cos(angle);
            ASSERT_NEAR(x[base + a], ra, 1e-5) << t << " " << h << " " << i;
            ASSERT_NEAR(x[base + b], rb, 1e-5) << t << " " << h << " " << i;
            ASSERT_NEAR(x[base + a], cpu_x[base + a], 1e-6);
            ASSERT_NEAR(x[base + b], cpu_x[base + b], 1e-6);
          }
        }
      }
    }
  }
}

TEST(CudaMath, SwigluMatchesCpuAndDouble) {
  std::vector<float> gate = test::random_floats(1003, 31, 4.0f);
  const std::vector<float> up = test::random_floats(1003, 32);
  // The tails: silu saturates to g (large g) and to -0 (large -g).
  gate[0] = 90.0f;
  gate[1] = -90.0f;
  gate[2] = 0.0f;
  std::vector<float> cpu_out(gate.size());
  cpu::swiglu(cpu_out.data(), gate.data(), up.data(), static_cast<int64_t>(gate.size()));
  for (size_t i = 0; i < gate.size(); ++i) {
    const float got = swiglu_item(gate[i], up[i]);
    const double g = gate[i];
    const double want = g / (1.0 + std::exp(-g)) * up[i];
    ASSERT_NEAR(got, want, 1e-6 * (1 + std::fabs(want))) << i;
    ASSERT_NEAR(got, cpu_out[i], 2e-6 * (1 + std::fabs(want))) << i;
  }
}

TEST(CudaMath, ArgmaxLanesAndTreeFollowTheSamplersRules) {
  for (int64_t n_vocab : {1, 2, 255, 256, 257, 1000, 32003}) {
    const int64_t n_rows = 10;
    const std::vector<float> x = test::argmax_rows_input(n_rows, n_vocab, 41);
    for (int64_t r = 0; r < n_rows; ++r) {
      ArgmaxItem partial[kRowThreads];
      for (int lane = 0; lane < kRowThreads; ++lane) {
        partial[lane] = argmax_lane(x.data() + r * n_vocab, n_vocab, lane, kRowThreads);
      }
      EXPECT_EQ(argmax_tree(partial, kRowThreads), test::reference_argmax(x.data() + r * n_vocab, n_vocab))
          << "n_vocab " << n_vocab << " row " << r;
    }
  }
  // Ties within one lane and across lanes: the lowest index.
  std::vector<float> tie(600, 0.0f);
  tie[300] = tie[44] = tie[556] = 1.0f;  // all three in lane 44
  ArgmaxItem partial[kRowThreads];
  for (int lane = 0; lane < kRowThreads; ++lane) partial[lane] = argmax_lane(tie.data(), 600, lane, kRowThreads);
  EXPECT_EQ(argmax_tree(partial, kRowThreads), 44);
  tie[44] = 0.0f;
  tie[7] = 1.0f;  // lane 7 against lane 44
  for (int lane = 0; lane < kRowThreads; ++lane) partial[lane] = argmax_lane(tie.data(), 600, lane, kRowThreads);
  EXPECT_EQ(argmax_tree(partial, kRowThreads), 7);
}

}  // namespace
}  // namespace parallm::cuda
