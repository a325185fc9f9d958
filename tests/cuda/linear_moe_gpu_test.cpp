// The linear, dequantization and MoE kernels on a real device against the
// emulated device. Outputs are filled with 0xff bytes (NaN as f32 and f16,
// -1 as int32) before each launch, so an element a kernel forgets to write
// fails. Skips without a device (gpu_env.h).
//   Mat-vec, dequantization, gather / scatter: the same operations in the same
//   order (explicit fmaf, no contraction left to the compiler): bit for bit.
//   cuBLAS GEMMs: the same semantics, another order: within 1e-5 of
//   sum |w x| (a TF32 GEMM would miss that by two orders of magnitude).
//   moe_topk: the device's expf is within 2 ulps of the host's: ids exact on
//   these inputs (ties are exact ties on both sides), weights within 1e-6.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/device.h"
#include "cuda_test_data.h"
#include "device/cuda_buffer.h"
#include "device/cuda_stream.h"
#include "gpu_env.h"
#include "gpu_fixture.h"
#include "kernels/cpu/quant.h"
#include "kernels/cuda/emulated/launchers.h"
#include "kernels/cuda/linear.h"
#include "kernels/cuda/moe.h"

namespace parallm::cuda {
namespace {

class LinearMoeGpu : public test::GpuFixture {};

class CudaGpuLinear : public LinearMoeGpu {};
class CudaGpuMoe : public LinearMoeGpu {};

struct LinearInputs {
  std::vector<uint8_t> w;
  std::vector<float> bias, x;
};

LinearInputs linear_inputs(DType t, int64_t n_tokens, int64_t n_out, int64_t n_in, uint32_t seed) {
  return {test::random_table(t, n_out, n_in, seed), test::random_floats(n_out, seed + 1),
          test::random_floats(n_tokens * n_in, seed + 2)};
}

// sum_i |w[o, i] x[t, i]| + |bias[o]|: the scale of out[t, o]'s rounding.
std::vector<double> magnitudes(const LinearInputs& in, DType t, const float* bias, int64_t n_tokens, int64_t n_out,
                               int64_t n_in) {
  std::vector<double> mag(static_cast<size_t>(n_tokens * n_out));
  std::vector<float> wrow(static_cast<size_t>(n_in));
  for (int64_t o = 0; o < n_out; ++o) {
    cpu::dequantize_row(t, in.w.data() + o * dtype_row_bytes(t, n_in), wrow.data(), n_in);
    for (int64_t tk = 0; tk < n_tokens; ++tk) {
      double m = bias != nullptr ? std::fabs(bias[o]) : 0.0;
      for (int64_t i = 0; i < n_in; ++i) m += std::fabs(static_cast<double>(wrow[i]) * in.x[tk * n_in + i]);
      mag[tk * n_out + o] = m;
    }
  }
  return mag;
}

TEST_F(CudaGpuLinear, MatVecMatchesEmulatedBitForBit) {
  for (DType t : {DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0}) {
    for (int64_t n_in : {64, 96, 4096, 100, 14336}) {
      if (t == DType::kQ8_0 && n_in % 32 != 0) continue;
      // q8_0 takes the mat-vec at any batch size (token chunks of 8).
      for (int64_t n_tokens : {1, 3, 8, 9, 33}) {
        if (n_tokens > kMatVecMaxTokens && t != DType::kQ8_0) continue;
        for (int64_t n_out : {37, 5, 1031}) {
          if (n_in > 4096 && n_out > 37) continue;  // the emulation's time
          for (bool with_bias : {true, false}) {
            SCOPED_TRACE(std::string(dtype_name(t)) + " n_in " + std::to_string(n_in) + " n_tokens " +
                         std::to_string(n_tokens) + " n_out " + std::to_string(n_out) + (with_bias ? " bias" : ""));
            const LinearInputs in = linear_inputs(t, n_tokens, n_out, n_in, static_cast<uint32_t>(n_in * 7 + n_out));
            std::vector<float> want(static_cast<size_t>(n_tokens * n_out));
            emulated::linear(want.data(), in.w.data(), t, with_bias ? in.bias.data() : nullptr, in.x.data(), n_tokens,
                             n_out, n_in, nullptr);
            DeviceBuffer d_w = upload(in.w), d_bias = upload(in.bias), d_x = upload(in.x);
            DeviceBuffer d_out = poisoned<float>(want.size());
            linear(d_out.as<float>(), d_w.data(), t, with_bias ? d_bias.as<float>() : nullptr, d_x.as<float>(),
                   n_tokens, n_out, n_in, stream_->handle());
            const std::vector<float> got = download<float>(d_out);
            for (size_t i = 0; i < got.size(); ++i) {
              ASSERT_EQ(std::memcmp(&got[i], &want[i], 4), 0) << "element " << i << ": " << got[i] << " vs " << want[i];
            }
          }
        }
      }
    }
  }
}

// f32 / f16 / bf16 batches past kMatVecMaxTokens: cuBLAS.
TEST_F(CudaGpuLinear, GemmMatchesEmulatedWithinF32Rounding) {
  double max_err = 0;
  for (DType t : {DType::kF32, DType::kF16, DType::kBF16}) {
    for (int64_t n_in : {64, 4096, 100}) {
      for (int64_t n_tokens : {9, 33, 130}) {
        for (int64_t n_out : {37, 300}) {
          for (bool with_bias : {true, false}) {
            SCOPED_TRACE(std::string(dtype_name(t)) + " n_in " + std::to_string(n_in) + " n_tokens " +
                         std::to_string(n_tokens) + " n_out " + std::to_string(n_out) + (with_bias ? " bias" : ""));
            const LinearInputs in = linear_inputs(t, n_tokens, n_out, n_in, static_cast<uint32_t>(n_in + n_tokens));
            const float* bias = with_bias ? in.bias.data() : nullptr;
            std::vector<float> want(static_cast<size_t>(n_tokens * n_out));
            emulated::linear(want.data(), in.w.data(), t, bias, in.x.data(), n_tokens, n_out, n_in, nullptr);
            const std::vector<double> mag = magnitudes(in, t, bias, n_tokens, n_out, n_in);
            DeviceBuffer d_w = upload(in.w), d_bias = upload(in.bias), d_x = upload(in.x);
            DeviceBuffer d_out = poisoned<float>(want.size());
            linear(d_out.as<float>(), d_w.data(), t, with_bias ? d_bias.as<float>() : nullptr, d_x.as<float>(),
                   n_tokens, n_out, n_in, stream_->handle());
            const std::vector<float> got = download<float>(d_out);
            for (size_t i = 0; i < got.size(); ++i) {
              ASSERT_FALSE(std::isnan(got[i])) << "element " << i << " not written";
              const double err = std::fabs(static_cast<double>(got[i]) - want[i]) / mag[i];
              ASSERT_LE(err, 1e-5) << "element " << i << ": " << got[i] << " vs " << want[i];
              max_err = std::max(max_err, err);
            }
          }
        }
      }
    }
  }
  std::printf("cuBLAS vs emulated: max error / sum|wx| %.3g\n", max_err);
}

// The per-thread cuBLAS context: its x scratch grows with the batch, and one
// thread's GEMMs on two streams are ordered (the second stream waits for the
// first's last use of the scratch before overwriting it).
TEST_F(CudaGpuLinear, GemmScratchGrowsAndServesTwoStreams) {
  Stream other(0);
  const int64_t n_in = 4096, n_out = 64;
  for (int64_t n_tokens : {16, 300, 40, 600}) {
    SCOPED_TRACE("n_tokens " + std::to_string(n_tokens));
    const LinearInputs a = linear_inputs(DType::kF16, n_tokens, n_out, n_in, 3);
    const LinearInputs b = linear_inputs(DType::kF16, n_tokens, n_out, n_in, 4);
    std::vector<float> want_a(static_cast<size_t>(n_tokens * n_out)), want_b(want_a.size());
    emulated::linear(want_a.data(), a.w.data(), DType::kF16, nullptr, a.x.data(), n_tokens, n_out, n_in, nullptr);
    emulated::linear(want_b.data(), b.w.data(), DType::kF16, nullptr, b.x.data(), n_tokens, n_out, n_in, nullptr);
    const std::vector<double> mag_a = magnitudes(a, DType::kF16, nullptr, n_tokens, n_out, n_in);
    const std::vector<double> mag_b = magnitudes(b, DType::kF16, nullptr, n_tokens, n_out, n_in);
    DeviceBuffer wa = upload(a.w), xa = upload(a.x), wb = upload(b.w), xb = upload(b.x);
    DeviceBuffer oa = poisoned<float>(want_a.size()), ob = poisoned<float>(want_b.size());
    stream_->synchronize();
    linear(oa.as<float>(), wa.data(), DType::kF16, nullptr, xa.as<float>(), n_tokens, n_out, n_in, stream_->handle());
    linear(ob.as<float>(), wb.data(), DType::kF16, nullptr, xb.as<float>(), n_tokens, n_out, n_in, other.handle());
    other.synchronize();
    const std::vector<float> got_a = download<float>(oa), got_b = download<float>(ob);
    for (size_t i = 0; i < got_a.size(); ++i) {
      ASSERT_LE(std::fabs(static_cast<double>(got_a[i]) - want_a[i]), 1e-5 * mag_a[i]) << "stream 1, " << i;
      ASSERT_LE(std::fabs(static_cast<double>(got_b[i]) - want_b[i]), 1e-5 * mag_b[i]) << "stream 2, " << i;
    }
  }
}

bool same_f16(uint16_t a, uint16_t b) {
  const auto is_nan = [](uint16_t h) { return (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0; };
  // NaNs made by arithmetic (a NaN or infinite block scale) carry the host's
  // or the device's default sign: only NaN-ness is compared.
  return a == b || (is_nan(a) && is_nan(b));
}

TEST_F(CudaGpuLinear, DequantizeRowsF16MatchesEmulatedBitForBit) {
  for (DType t : {DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0, DType::kQ4_0, DType::kQ4_K, DType::kQ6_K}) {
    for (int64_t n_cols : {256, 4096, 96}) {
      if (n_cols % dtype_block_elems(t) != 0) continue;
      SCOPED_TRACE(std::string(dtype_name(t)) + " n_cols " + std::to_string(n_cols));
      const int64_t n_rows = 9;
      std::vector<uint8_t> src = test::random_table(t, n_rows, n_cols, 23);
      // The last row: random bytes (every scale and code, subnormal to NaN).
      std::mt19937 rng(29);
      const size_t row_bytes = dtype_row_bytes(t, n_cols);
      for (size_t i = 0; i < row_bytes; ++i) src[(n_rows - 1) * row_bytes + i] = static_cast<uint8_t>(rng());
      std::vector<uint16_t> want(static_cast<size_t>(n_rows * n_cols));
      emulated::dequantize_rows_f16(want.data(), src.data(), t, n_rows, n_cols, nullptr);
      DeviceBuffer d_src = upload(src);
      DeviceBuffer d_out = poisoned<uint16_t>(want.size());
      dequantize_rows_f16(d_out.as<uint16_t>(), d_src.data(), t, n_rows, n_cols, stream_->handle());
      const std::vector<uint16_t> got = download<uint16_t>(d_out);
      for (size_t i = 0; i < got.size(); ++i) {
        // 0xffff (the poison) is a NaN: the quantized rows have no NaN, so
        // an unwritten element there still fails.
        if (i < static_cast<size_t>((n_rows - 1) * n_cols)) {
          ASSERT_EQ(got[i], want[i]) << "element " << i;
        } else {
          ASSERT_TRUE(same_f16(got[i], want[i])) << "element " << i << std::hex << ": " << got[i] << " vs " << want[i];
        }
      }
    }
  }
}

TEST_F(CudaGpuMoe, TopkMatchesEmulated) {
  struct Case {
    int64_t n_expert, k;
    TopKRule rule;
    bool with_bias;
  };
  const Case cases[] = {{8, 2, {false, true, 1.0f}, false},   {60, 4, {false, false, 1.0f}, false},
                        {128, 8, {false, true, 1.0f}, false}, {256, 8, {true, true, 2.5f}, true},
                        {64, 6, {true, false, 1.0f}, true},   {6, 6, {false, true, 1.0f}, false},
                        {1, 1, {true, true, 1.0f}, false}};
  for (const Case& c : cases) {
    SCOPED_TRACE("n_expert " + std::to_string(c.n_expert) + " k " + std::to_string(c.k));
    const int64_t n_tokens = 150;  // more than one block of the kernel
    std::vector<float> lg = test::random_floats(n_tokens * c.n_expert, 51, 2.0f);
    for (int64_t t = 1; t < n_tokens; t += 4) {  // ties at the top
      for (int64_t e = c.n_expert - 1; e >= 0; e -= 3) lg[t * c.n_expert + e] = 4.0f;
    }
    for (int64_t e = 0; e < c.n_expert; ++e) lg[2 * c.n_expert + e] = 0.5f;  // a row all equal
    std::vector<float> bias = test::random_floats(c.n_expert, 52, 0.1f);
    const size_t n_out = static_cast<size_t>(n_tokens * c.k);
    std::vector<int32_t> want_ids(n_out);
    std::vector<float> want_w(n_out);
    emulated::moe_topk(want_ids.data(), want_w.data(), lg.data(), c.with_bias ? bias.data() : nullptr, n_tokens,
                       c.n_expert, c.k, c.rule, nullptr);
    DeviceBuffer d_lg = upload(lg), d_bias = upload(bias);
    DeviceBuffer d_ids = poisoned<int32_t>(n_out), d_w = poisoned<float>(n_out);
    moe_topk(d_ids.as<int32_t>(), d_w.as<float>(), d_lg.as<float>(), c.with_bias ? d_bias.as<float>() : nullptr,
             n_tokens, c.n_expert, c.k, c.rule, stream_->handle());
    EXPECT_EQ(download<int32_t>(d_ids), want_ids);
    const std::vector<float> got_w = download<float>(d_w);
    for (size_t i = 0; i < n_out; ++i) {
      ASSERT_FALSE(std::isnan(got_w[i])) << i;
      ASSERT_NEAR(got_w[i], want_w[i], 1e-6 * (1 + std::fabs(want_w[i]))) << i;
    }
  }
}

TEST_F(CudaGpuMoe, GatherAndScatterAddMatchEmulatedBitForBit) {
  const int64_t n_src = 40, n_embd = 4096 + 7;
  const std::vector<float> x = test::random_floats(n_src * n_embd, 61);
  const std::vector<int32_t> rows = {39, 0, 5, 5, 17, 1, 38, 20, 20, 3};
  const auto n_rows = static_cast<int64_t>(rows.size());
  std::vector<float> want_g(static_cast<size_t>(n_rows * n_embd));
  emulated::gather_rows(want_g.data(), x.data(), rows.data(), n_rows, n_embd, nullptr);
  DeviceBuffer d_x = upload(x), d_rows = upload(rows);
  DeviceBuffer d_g = poisoned<float>(want_g.size());
  gather_rows(d_g.as<float>(), d_x.as<float>(), d_rows.as<int32_t>(), n_rows, n_embd, stream_->handle());
  const std::vector<float> got_g = download<float>(d_g);
  ASSERT_EQ(0, std::memcmp(got_g.data(), want_g.data(), want_g.size() * 4));

  const std::vector<int32_t> dst = {7, 0, 39, 12, 25};
  const std::vector<float> w1 = {0.5f, -1.25f, 3.0f, 0.1f, 2.0f}, w2 = {1.0f, 0.3f, -0.7f, 4.0f, 0.2f};
  const std::vector<float> y1 = test::random_floats(5 * n_embd, 62), y2 = test::random_floats(5 * n_embd, 63);
  std::vector<float> want = test::random_floats(n_src * n_embd, 64);
  DeviceBuffer d_out = upload(want), d_dst = upload(dst), d_w1 = upload(w1), d_w2 = upload(w2), d_y1 = upload(y1),
               d_y2 = upload(y2);
  emulated::scatter_add_rows(want.data(), y1.data(), dst.data(), w1.data(), 5, n_embd, nullptr);
  emulated::scatter_add_rows(want.data(), y2.data(), dst.data(), w2.data(), 5, n_embd, nullptr);
  scatter_add_rows(d_out.as<float>(), d_y1.as<float>(), d_dst.as<int32_t>(), d_w1.as<float>(), 5, n_embd,
                   stream_->handle());
  scatter_add_rows(d_out.as<float>(), d_y2.as<float>(), d_dst.as<int32_t>(), d_w2.as<float>(), 5, n_embd,
                   stream_->handle());
  const std::vector<float> got = download<float>(d_out);
  ASSERT_EQ(0, std::memcmp(got.data(), want.data(), want.size() * 4));
}

}  // namespace
}  // namespace parallm::cuda
