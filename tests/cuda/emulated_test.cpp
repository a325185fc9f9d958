// The emulated CUDA device (kernels/cuda/emulated) against the CPU kernels and
// double-precision references, over dtypes and shapes; and its argument
// checks, which the CUDA launchers share.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "cuda_test_data.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/quant.h"
#include "kernels/cuda/emulated/launchers.h"
#include "util/check.h"

namespace parallm::cuda {
namespace {

TEST(CudaEmulated, EmbeddingRowsMatchCpuDequantize) {
  for (DType t : {DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0}) {
    for (int64_t n_embd : {64, 160, 4096, 33}) {
      if (t == DType::kQ8_0 && n_embd % 32 != 0) continue;
      SCOPED_TRACE(std::string(dtype_name(t)) + " n_embd " + std::to_string(n_embd));
      const int64_t n_vocab = 11;
      const std::vector<uint8_t> table = test::random_table(t, n_vocab, n_embd, 3);
      const std::vector<int32_t> tokens = {0, 10, 3, 3, 7, -1, 11};  // the last two outside the vocabulary
      const auto n_tokens = static_cast<int64_t>(tokens.size());
      std::vector<float> out(static_cast<size_t>(n_tokens * n_embd), 12345.0f), want(static_cast<size_t>(n_embd));
      emulated::embedding_rows(out.data(), table.data(), t, tokens.data(), n_tokens, n_embd, n_vocab, nullptr);
      for (int64_t r = 0; r < n_tokens; ++r) {
        const float* row = out.data() + r * n_embd;
        if (tokens[r] < 0 || tokens[r] >= n_vocab) {
          for (int64_t i = 0; i < n_embd; ++i) ASSERT_TRUE(std::isnan(row[i]));
          continue;
        }
        cpu::dequantize_row(t, table.data() + tokens[r] * dtype_row_bytes(t, n_embd), want.data(), n_embd);
        ASSERT_EQ(0, std::memcmp(row, want.data(), want.size() * 4)) << "row " << r;
      }
    }
  }
}

TEST(CudaEmulated, EmbeddingRejectsTablesItCannotRead) {
  const std::vector<uint8_t> table(1024);
  const int32_t token = 0;
  float out[64];
  try {
    emulated::embedding_rows(out, table.data(), DType::kQ4_0, &token, 1, 64, 4, nullptr);
    FAIL() << "q4_0 accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("q4_0"), std::string::npos) << e.what();
  }
  try {
    emulated::embedding_rows(out, table.data(), DType::kQ8_0, &token, 1, 48, 4, nullptr);
    FAIL() << "q8_0 row of 48 accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("multiple of 32"), std::string::npos) << e.what();
  }
}

TEST(CudaEmulated, RmsnormWithResidualMatchesCpu) {
  const float eps = 1e-6f;
  for (int64_t n_embd : {288, 4096, 1, 511}) {
    for (bool fused : {true, false}) {
      SCOPED_TRACE("n_embd " + std::to_string(n_embd) + (fused ? " fused" : " plain"));
      const int64_t n_tokens = 5;
      const std::vector<float> x0 = test::random_floats(n_tokens * n_embd, 51, 3.0f);
      const std::vector<float> delta = test::random_floats(n_tokens * n_embd, 52);
      const std::vector<float> w = test::random_floats(n_embd, 53);
      std::vector<float> x = x0, out(x0.size());
      emulated::rmsnorm(out.data(), x.data(), fused ? delta.data() : nullptr, w.data(), n_tokens, n_embd, eps, nullptr);
      std::vector<float> cpu_x = x0, cpu_out(x0.size());
      if (fused) cpu::add(cpu_x.data(), x0.data(), delta.data(), n_tokens * n_embd);
      cpu::rmsnorm(cpu_out.data(), cpu_x.data(), w.data(), n_tokens, n_embd, eps);
      EXPECT_EQ(x, cpu_x);
      for (size_t i = 0; i < out.size(); ++i) {
        ASSERT_NEAR(out[i], cpu_out[i], 2e-6 * (1 + std::fabs(cpu_out[i]))) << i;
      }
      // out aliasing x (the residual then holds the normed rows).
      std::vector<float> y = x0;
      emulated::rmsnorm(y.data(), y.data(), fused ? delta.data() : nullptr, w.data(), n_tokens, n_embd, eps, nullptr);
      EXPECT_EQ(y, out);
    }
  }
}

TEST(CudaEmulated, RopeMatchesCpuInBothStyles) {
  for (int64_t head_dim : {64, 128, 98}) {
    for (RopeStyle style : {RopeStyle::kInterleaved, RopeStyle::kHalf}) {
      SCOPED_TRACE("head_dim " + std::to_string(head_dim) + (style == RopeStyle::kHalf ? " half" : " interleaved"));
      const cpu::RopeStyle cpu_style = style == RopeStyle::kHalf ? cpu::RopeStyle::kHalf : cpu::RopeStyle::kInterleaved;
      const int64_t n_head = 5, half = head_dim / 2;
      const std::vector<int32_t> positions = {3, 0, 9, 31999, 7, 7};
      const auto n_tokens = static_cast<int64_t>(positions.size());
      std::vector<float> inv_freq(static_cast<size_t>(half));
      for (int64_t i = 0; i < half; ++i) inv_freq[i] = std::pow(500000.0f, -2.0f * i / static_cast<float>(head_dim));
      std::vector<float> cs(static_cast<size_t>(n_tokens * head_dim)), cpu_cs(cs.size());
      emulated::rope_table(cs.data(), positions.data(), n_tokens, head_dim, inv_freq.data(), nullptr);
      cpu::rope_table(cpu_cs.data(), positions.data(), n_tokens, head_dim, inv_freq.data());
      EXPECT_EQ(cs, cpu_cs);
      const std::vector<float> x0 = test::random_floats(n_tokens * n_head * head_dim, 61);
      std::vector<float> x = x0, cpu_x = x0;
      emulated::rope_apply(x.data(), cs.data(), n_tokens, n_head, head_dim, style, nullptr);
      cpu::rope_apply(cpu_x.data(), cpu_cs.data(), n_tokens, n_head, head_dim, cpu_style);
      for (size_t i = 0; i < x.size(); ++i) ASSERT_NEAR(x[i], cpu_x[i], 1e-6 * (1 + std::fabs(cpu_x[i]))) << i;
      // Each head keeps its norm through the rotation (to f32 rounding).
      for (size_t h = 0; h < x.size(); h += static_cast<size_t>(head_dim)) {
        double before = 0, after = 0;
        for (int64_t i = 0; i < head_dim; ++i) {
          before += static_cast<double>(x0[h + i]) * x0[h + i];
          after += static_cast<double>(x[h + i]) * x[h + i];
        }
        ASSERT_NEAR(after, before, 1e-5 * before);
      }
    }
  }
}

TEST(CudaEmulated, SwigluMatchesCpuAndAliases) {
  const int64_t n = 777;
  const std::vector<float> gate = test::random_floats(n, 71, 5.0f), up = test::random_floats(n, 72);
  std::vector<float> out(static_cast<size_t>(n)), cpu_out(out.size());
  emulated::swiglu(out.data(), gate.data(), up.data(), n, nullptr);
  cpu::swiglu(cpu_out.data(), gate.data(), up.data(), n);
  for (int64_t i = 0; i < n; ++i) ASSERT_NEAR(out[i], cpu_out[i], 2e-6 * (1 + std::fabs(cpu_out[i]))) << i;
  std::vector<float> g = gate;
  emulated::swiglu(g.data(), g.data(), up.data(), n, nullptr);
  EXPECT_EQ(g, out);
}

TEST(CudaEmulated, ArgmaxRowsFollowTheSamplersRules) {
  for (int64_t n_vocab : {1, 300, 32000, 50257}) {
    const int64_t n_rows = 20;
    const std::vector<float> x = test::argmax_rows_input(n_rows, n_vocab, 81);
    std::vector<int32_t> out(static_cast<size_t>(n_rows), -7);
    emulated::argmax_rows(out.data(), x.data(), n_rows, n_vocab, nullptr);
    for (int64_t r = 0; r < n_rows; ++r) {
      EXPECT_EQ(out[r], test::reference_argmax(x.data() + r * n_vocab, n_vocab))
          << "n_vocab " << n_vocab << " row " << r;
    }
  }
}

}  // namespace
}  // namespace parallm::cuda
