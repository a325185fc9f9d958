// The CUDA kernels on a real device against the emulated device (the same
// per-item math on the host), over the shapes and dtypes of the CPU tests.
// Every output buffer is filled with NaNs (0xff bytes) before each launch, so
// an element a kernel forgets to write fails the comparison. Skips without a
// device (gpu_env.h).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "core/device.h"
#include "cuda_test_data.h"
#include "device/cuda_buffer.h"
#include "device/cuda_stream.h"
#include "gpu_env.h"
#include "gpu_fixture.h"
#include "kernels/cuda/argmax.h"
#include "kernels/cuda/embedding.h"
#include "kernels/cuda/emulated/launchers.h"
#include "kernels/cuda/rmsnorm.h"
#include "kernels/cuda/rope.h"
#include "kernels/cuda/swiglu.h"

namespace parallm::cuda {
namespace {

class CudaGpu : public test::GpuFixture {};

// |a - b| within rel of the larger magnitude; NaN only where both are NaN.
void expect_close(const std::vector<float>& got, const std::vector<float>& want, double rel) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i])) {
      ASSERT_TRUE(std::isnan(got[i])) << i;
      continue;
    }
    ASSERT_FALSE(std::isnan(got[i])) << "element " << i << " not written";
    ASSERT_NEAR(got[i], want[i], rel * (1 + std::fabs(want[i]))) << i;
  }
}

TEST_F(CudaGpu, EmbeddingRowsMatchEmulated) {
  for (DType t : {DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0}) {
    for (int64_t n_embd : {64, 4096, 77}) {
      if (t == DType::kQ8_0 && n_embd % 32 != 0) continue;
      SCOPED_TRACE(std::string(dtype_name(t)) + " n_embd " + std::to_string(n_embd));
      const int64_t n_vocab = 37;
      const std::vector<uint8_t> table = test::random_table(t, n_vocab, n_embd, 5);
      const std::vector<int32_t> tokens = {0, 36, 5, 5, 40, -2, 17};
      const auto n_tokens = static_cast<int64_t>(tokens.size());
      std::vector<float> want(static_cast<size_t>(n_tokens * n_embd));
      emulated::embedding_rows(want.data(), table.data(), t, tokens.data(), n_tokens, n_embd, n_vocab, nullptr);
      DeviceBuffer d_table = upload(table), d_tokens = upload(tokens);
      DeviceBuffer d_out = poisoned<float>(want.size());
      embedding_rows(d_out.as<float>(), d_table.data(), t, d_tokens.as<int32_t>(), n_tokens, n_embd, n_vocab,
                     stream_->handle());
      const std::vector<float> got = download<float>(d_out);
      // The same integer decode and one product: bit for bit.
      ASSERT_EQ(0, std::memcmp(got.data(), want.data(), want.size() * 4));
    }
  }
}

TEST_F(CudaGpu, RmsnormMatchesEmulated) {
  for (int64_t n_embd : {1, 255, 256, 257, 4096, 8192 + 3}) {
    for (bool fused : {true, false}) {
      SCOPED_TRACE("n_embd " + std::to_string(n_embd) + (fused ? " fused" : " plain"));
      const int64_t n_tokens = 7;
      const std::vector<float> x0 = test::random_floats(n_tokens * n_embd, 91, 3.0f);
      const std::vector<float> delta = test::random_floats(n_tokens * n_embd, 92);
      const std::vector<float> w = test::random_floats(n_embd, 93);
      std::vector<float> want_x = x0, want(x0.size());
      emulated::rmsnorm(want.data(), want_x.data(), fused ? delta.data() : nullptr, w.data(), n_tokens, n_embd, 1e-5f,
                        nullptr);
      DeviceBuffer d_x = upload(x0), d_delta = upload(delta), d_w = upload(w);
      DeviceBuffer d_out = poisoned<float>(x0.size());
      rmsnorm(d_out.as<float>(), d_x.as<float>(), fused ? d_delta.as<float>() : nullptr, d_w.as<float>(), n_tokens,
              n_embd, 1e-5f, stream_->handle());
      expect_close(download<float>(d_out), want, 2e-6);
      expect_close(download<float>(d_x), want_x, 0);  // the residual: one add per element, exact
    }
  }
}

TEST_F(CudaGpu, RopeMatchesEmulated) {
  for (int64_t head_dim : {64, 128, 34}) {
    for (RopeStyle style : {RopeStyle::kInterleaved, RopeStyle::kHalf}) {
      SCOPED_TRACE("head_dim " + std::to_string(head_dim) + (style == RopeStyle::kHalf ? " half" : " interleaved"));
      const int64_t n_head = 6, half = head_dim / 2;
      const std::vector<int32_t> positions = {0, 1, 2, 511, 4096, 131071, 9};
      const auto n_tokens = static_cast<int64_t>(positions.size());
      std::vector<float> inv_freq(static_cast<size_t>(half));
      for (int64_t i = 0; i < half; ++i) inv_freq[i] = std::pow(10000.0f, -2.0f * i / static_cast<float>(head_dim));
      std::vector<float> want_cs(static_cast<size_t>(n_tokens * head_dim));
      emulated::rope_table(want_cs.data(), positions.data(), n_tokens, head_dim, inv_freq.data(), nullptr);
      const std::vector<float> x0 = test::random_floats(n_tokens * n_head * head_dim, 95);
      std::vector<float> want_x = x0;
      emulated::rope_apply(want_x.data(), want_cs.data(), n_tokens, n_head, head_dim, style, nullptr);
      DeviceBuffer d_pos = upload(positions), d_freq = upload(inv_freq), d_x = upload(x0);
      DeviceBuffer d_cs = poisoned<float>(want_cs.size());
      rope_table(d_cs.as<float>(), d_pos.as<int32_t>(), n_tokens, head_dim, d_freq.as<float>(), stream_->handle());
      rope_apply(d_x.as<float>(), d_cs.as<float>(), n_tokens, n_head, head_dim, style, stream_->handle());
      // cos / sin in double on both sides; the device's may differ in the last
      // bit of an f32, and its rotation may fuse a multiply-add.
      expect_close(download<float>(d_cs), want_cs, 1e-7);
      expect_close(download<float>(d_x), want_x, 1e-6);
    }
  }
}

TEST_F(CudaGpu, SwigluMatchesEmulated) {
  for (int64_t n : {1, 1000, 11008 * 3 + 1}) {
    std::vector<float> gate = test::random_floats(n, 97, 6.0f);
    const std::vector<float> up = test::random_floats(n, 98);
    gate[0] = -100.0f;
    std::vector<float> want(static_cast<size_t>(n));
    emulated::swiglu(want.data(), gate.data(), up.data(), n, nullptr);
    DeviceBuffer d_gate = upload(gate), d_up = upload(up);
    DeviceBuffer d_out = poisoned<float>(want.size());
    swiglu(d_out.as<float>(), d_gate.as<float>(), d_up.as<float>(), n, stream_->handle());
    expect_close(download<float>(d_out), want, 2e-6);
  }
}

TEST_F(CudaGpu, ArgmaxRowsMatchEmulated) {
  for (int64_t n_vocab : {1, 255, 257, 32000, 151936}) {
    const int64_t n_rows = 20;
    const std::vector<float> x = test::argmax_rows_input(n_rows, n_vocab, 99);
    std::vector<int32_t> want(static_cast<size_t>(n_rows));
    emulated::argmax_rows(want.data(), x.data(), n_rows, n_vocab, nullptr);
    DeviceBuffer d_x = upload(x);
    DeviceBuffer d_out = poisoned<int32_t>(want.size());
    argmax_rows(d_out.as<int32_t>(), d_x.as<float>(), n_rows, n_vocab, stream_->handle());
    EXPECT_EQ(download<int32_t>(d_out), want) << "n_vocab " << n_vocab;
  }
}

}  // namespace
}  // namespace parallm::cuda
