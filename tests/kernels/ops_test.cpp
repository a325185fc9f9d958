// rmsnorm, rope, softmax, swiglu, add and the row conversions against naive
// double-precision references.
#include "kernels/cpu/ops.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "kernels/cpu/isa.h"
#include "kernels/cpu/isa_table.h"
#include "kernels/cpu/quant.h"
#include "kernels/cpu/roofline.h"

namespace parallm::cpu {
namespace {

std::vector<float> randv(int64_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

std::vector<Isa> supported_isas() {
  std::vector<Isa> v;
  for (Isa i : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512}) {
    if (isa_supported(i)) v.push_back(i);
  }
  return v;
}

struct IsaGuard {
  Isa saved = active_isa();
  ~IsaGuard() { set_active_isa(saved); }
};

TEST(Ops, RmsnormMatchesNaiveAndAliases) {
  IsaGuard guard;
  for (Isa isa : supported_isas()) {
    set_active_isa(isa);
    SCOPED_TRACE(isa_name(isa));
    const int64_t nt = 3, n = 77;
    const auto x = randv(nt * n, 1), w = randv(n, 2);
    std::vector<float> out(nt * n), inplace = x;
    rmsnorm(out.data(), x.data(), w.data(), nt, n, 1e-5f);
    rmsnorm(inplace.data(), inplace.data(), w.data(), nt, n, 1e-5f);
    for (int64_t t = 0; t < nt; ++t) {
      double ss = 0;
      for (int64_t i = 0; i < n; ++i) ss += static_cast<double>(x[t * n + i]) * x[t * n + i];
      const double scale = 1.0 / std::sqrt(ss / n + 1e-5);
      for (int64_t i = 0; i < n; ++i) {
        const double want = x[t * n + i] * scale * w[i];
        EXPECT_NEAR(out[t * n + i], want, 1e-5 * (1 + std::fabs(want)));
      }
    }
    EXPECT_EQ(out, inplace);
  }
}

TEST(Ops, RopeBothStyles) {
  const int64_t nt = 2, nh = 3, hd = 8;
  const int32_t pos[] = {5, 1000};
  std::vector<float> inv(hd / 2);
  for (int64_t i = 0; i < hd / 2; ++i) inv[i] = static_cast<float>(std::pow(10000.0, -2.0 * i / hd));
  for (RopeStyle style : {RopeStyle::kInterleaved, RopeStyle::kHalf}) {
    const auto x = randv(nt * nh * hd, 3);
    auto y = x;
    rope(y.data(), pos, nt, nh, hd, inv.data(), style);
    for (int64_t t = 0; t < nt; ++t) {
      for (int64_t h = 0; h < nh; ++h) {
        const float* a = x.data() + (t * nh + h) * hd;
        const float* b = y.data() + (t * nh + h) * hd;
        for (int64_t i = 0; i < hd / 2; ++i) {
          const double th = static_cast<double>(pos[t]) * inv[i];
          const int64_t i0 = style == RopeStyle::kInterleaved ? 2 * i : i;
          const int64_t i1 = style == RopeStyle::kInterleaved ? 2 * i + 1 : i + hd / 2;
          EXPECT_NEAR(b[i0], a[i0] * std::cos(th) - a[i1] * std::sin(th), 1e-5);
          EXPECT_NEAR(b[i1], a[i0] * std::sin(th) + a[i1] * std::cos(th), 1e-5);
        }
      }
    }
  }
}

TEST(Ops, SoftmaxStableAndNormalized) {
  IsaGuard guard;
  for (Isa isa : supported_isas()) {
    set_active_isa(isa);
    SCOPED_TRACE(isa_name(isa));
    for (int64_t n : {1, 5, 16, 37, 100}) {
      std::vector<float> x = randv(n, 11 + static_cast<uint32_t>(n), 4.0f);
      x[0] = 1000.0f;  // large values must not overflow
      if (n > 3) {
        x[1] = -INFINITY;  // masked position
        x[2] = 1001.0f;
        x[3] = -1e30f;
      }
      const auto x0 = x;
      softmax(x.data(), n);
      double mx = -INFINITY;
      for (float v : x0) mx = std::max(mx, static_cast<double>(v));
      double z = 0;
      for (float v : x0) z += std::exp(static_cast<double>(v) - mx);
      double sum = 0;
      for (int64_t i = 0; i < n; ++i) {
        const double want = std::exp(static_cast<double>(x0[i]) - mx) / z;
        EXPECT_NEAR(x[i], want, 1e-6 * want + 1e-30) << "n=" << n << " i=" << i;
        sum += x[i];
      }
      EXPECT_NEAR(sum, 1.0, 1e-6);
    }
  }
}

// The sampler's weights: exp((x - max) * scale) and their sum, unnormalized.
TEST(Ops, ExpShiftedMatchesReferenceAndSum) {
  IsaGuard guard;
  for (Isa isa : supported_isas()) {
    set_active_isa(isa);
    SCOPED_TRACE(isa_name(isa));
    for (int64_t n : {1, 7, 16, 33, 1000}) {
      for (float scale : {1.0f, 0.5f, 3.0f}) {
        std::vector<float> x = randv(n, 21 + static_cast<uint32_t>(n), 6.0f);
        if (n > 2) {
          x[1] = -INFINITY;
          x[2] = 500.0f;  // the max: exp(0) = 1 there, no overflow elsewhere
        }
        const auto x0 = x;
        const float got_sum = exp_shifted(x.data(), n, scale);
        double mx = -INFINITY;
        for (float v : x0) mx = std::max(mx, static_cast<double>(v));
        double sum = 0;
        for (int64_t i = 0; i < n; ++i) {
          const double want = std::exp((static_cast<double>(x0[i]) - mx) * scale);
          EXPECT_NEAR(x[i], want, 2e-6 * want + 1e-30) << "n=" << n << " i=" << i << " scale=" << scale;
          sum += want;
        }
        EXPECT_NEAR(got_sum, sum, 1e-5 * sum) << "n=" << n << " scale=" << scale;
      }
    }
  }
}

TEST(Ops, SwigluAndAdd) {
  IsaGuard guard;
  for (Isa isa : supported_isas()) {
    set_active_isa(isa);
    SCOPED_TRACE(isa_name(isa));
    const int64_t n = 103;
    auto g = randv(n, 4, 3.0f);
    const auto u = randv(n, 5);
    g[0] = 100.0f;
    g[1] = -100.0f;
    g[2] = 1e4f;
    g[3] = -1e4f;
    g[4] = 0.0f;
    std::vector<float> out(n), alias = g, sum(n);
    swiglu(out.data(), g.data(), u.data(), n);
    swiglu(alias.data(), alias.data(), u.data(), n);
    add(sum.data(), g.data(), u.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      const double want = g[i] / (1.0 + std::exp(-static_cast<double>(g[i]))) * u[i];
      EXPECT_NEAR(out[i], want, 1e-6 * (1e-30 + std::fabs(want)) + 1e-30) << i;
      EXPECT_EQ(sum[i], g[i] + u[i]);
    }
    EXPECT_EQ(out, alias);
  }
}

TEST(Ops, GegluTanhAndSoftcapMatchTheirFormulas) {
  // Gemma's tanh GELU gate and soft-cap, in double from their definitions.
  std::vector<float> gate, up;
  for (int i = -40; i <= 40; ++i) {
    gate.push_back(0.2f * static_cast<float>(i));
    up.push_back(1.0f + 0.01f * static_cast<float>(i));
  }
  const int64_t n = static_cast<int64_t>(gate.size());
  std::vector<float> out(gate.size());
  geglu_tanh(out.data(), gate.data(), up.data(), n);
  for (int64_t i = 0; i < n; ++i) {
    const double x = gate[i];
    const double g = 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
    EXPECT_NEAR(out[i], g * up[i], 1e-6 * (1 + std::fabs(g * up[i]))) << x;
  }
  geglu_tanh(gate.data(), gate.data(), up.data(), n);  // in place
  EXPECT_EQ(gate, out);
  std::vector<float> x = {-100.0f, -3.0f, 0.0f, 0.5f, 30.0f, 1000.0f};
  std::vector<float> capped = x;
  softcap(capped.data(), static_cast<int64_t>(x.size()), 5.0f);
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_NEAR(capped[i], 5.0 * std::tanh(x[i] / 5.0), 1e-6);
    EXPECT_LE(std::fabs(capped[i]), 5.0f);
  }
}

TEST(Ops, DotAndAxpy) {
  IsaGuard guard;
  for (Isa isa : supported_isas()) {
    set_active_isa(isa);
    SCOPED_TRACE(isa_name(isa));
    for (int64_t n : {1, 7, 16, 33, 130}) {
      const auto a = randv(n, 20, 1.0f), b = randv(n, 21, 1.0f);
      double want = 0, mag = 0;
      for (int64_t i = 0; i < n; ++i) {
        want += static_cast<double>(a[i]) * b[i];
        mag += std::fabs(static_cast<double>(a[i]) * b[i]);
      }
      EXPECT_NEAR(dot(a.data(), b.data(), n), want, 1e-6 * mag) << n;
      auto y = b;
      axpy(y.data(), 0.75f, a.data(), n);
      for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(y[i], b[i] + 0.75 * a[i], 1e-6 * (1 + std::fabs(y[i]))) << i;
    }
  }
}

TEST(Ops, RowConversionsMatchReferenceOnEveryIsa) {
  const Isa saved = active_isa();
  auto x = randv(103, 6, 100.0f);
  x[0] = 1e-40f;  // f32 denormal
  x[1] = 7e4f;    // f16 overflow
  x[2] = NAN;
  for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512}) {
    if (!isa_supported(isa)) continue;
    set_active_isa(isa);
    for (DType t : {DType::kF16, DType::kBF16}) {
      std::vector<uint16_t> got(x.size()), want(x.size());
      convert_row(t, x.data(), got.data(), static_cast<int64_t>(x.size()));
      quantize_row(t, x.data(), want.data(), static_cast<int64_t>(x.size()));
      for (size_t i = 0; i < x.size(); ++i) {
        if (i == 2) continue;  // NaN payloads may differ; checked below
        EXPECT_EQ(got[i], want[i]) << dtype_name(t) << " " << isa_name(isa) << " " << i;
      }
      std::vector<float> back(x.size()), back_ref(x.size());
      load_row_f32(t, got.data(), back.data(), static_cast<int64_t>(x.size()));
      dequantize_row(t, got.data(), back_ref.data(), static_cast<int64_t>(x.size()));
      EXPECT_TRUE(std::isnan(back[2])) << dtype_name(t) << " " << isa_name(isa);
      back[2] = back_ref[2] = 0;
      EXPECT_EQ(back, back_ref) << dtype_name(t) << " " << isa_name(isa);
    }
  }
  set_active_isa(saved);
}

// The q8_0 rows of a quantized KV cache: scales bit-exact with the reference
// quantizer, each value within one step of it (ties may round either way),
// and load_row_f32 is the reference dequantizer.
TEST(Ops, Q8_0CacheRowsMatchReferenceOnEveryIsa) {
  IsaGuard guard;
  auto x = randv(32 * 7, 11, 3.0f);
  for (int i = 64; i < 96; ++i) x[i] = 0.0f;  // an all-zero block: scale 0
  x[100] = 2.5f;                              // with amax 127 below: an exact tie
  x[101] = -127.0f;
  const int64_t n = static_cast<int64_t>(x.size()), row = static_cast<int64_t>(dtype_row_bytes(DType::kQ8_0, n));
  std::vector<uint8_t> want(static_cast<size_t>(row));
  quantize_row(DType::kQ8_0, x.data(), want.data(), n);
  for (Isa isa : supported_isas()) {
    set_active_isa(isa);
    std::vector<uint8_t> got(static_cast<size_t>(row));
    convert_row(DType::kQ8_0, x.data(), got.data(), n);
    for (int64_t b = 0; b < n / 32; ++b) {
      const uint8_t* g = got.data() + b * 34;
      const uint8_t* w = want.data() + b * 34;
      EXPECT_EQ(g[0], w[0]) << isa_name(isa) << " block " << b;
      EXPECT_EQ(g[1], w[1]) << isa_name(isa) << " block " << b;
      for (int i = 2; i < 34; ++i) {
        EXPECT_LE(std::abs(static_cast<int8_t>(g[i]) - static_cast<int8_t>(w[i])), 1)
            << isa_name(isa) << " block " << b;
      }
    }
    std::vector<float> back(x.size()), back_ref(x.size());
    load_row_f32(DType::kQ8_0, got.data(), back.data(), n);
    dequantize_row(DType::kQ8_0, got.data(), back_ref.data(), n);
    EXPECT_EQ(back, back_ref) << isa_name(isa);
    for (int64_t i = 0; i < n; ++i) {
      float amax = 0;  // of i's block: one step is amax / 127
      for (int64_t j = i / 32 * 32; j < i / 32 * 32 + 32; ++j) amax = std::max(amax, std::fabs(x[j]));
      EXPECT_NEAR(back[i], x[i], amax / 127.0f + 1e-3f * std::fabs(x[i])) << isa_name(isa) << " " << i;
    }
  }
}

// The bandwidth probe's loop: the exact sum (small integers) with one stream
// and with two, for lengths around the vector and half-split boundaries.
TEST(Roofline, ReadSumCountsEveryElementOnEveryIsa) {
  IsaGuard guard;
  for (Isa isa : supported_isas()) {
    set_active_isa(isa);
    for (int64_t n : {0, 1, 3, 31, 64, 65, 127, 1000, 4096 + 37}) {
      std::vector<float> x(static_cast<size_t>(n));
      double want = 0;
      for (int64_t i = 0; i < n; ++i) want += x[static_cast<size_t>(i)] = static_cast<float>(i % 7 + 1);
      for (int streams : {1, 2}) {
        EXPECT_EQ(active_kernels().read_sum(x.data(), n, streams), static_cast<float>(want))
            << isa_name(isa) << " n=" << n << " streams=" << streams;
      }
    }
  }
}

TEST(Roofline, ProbesReturnPlausibleNumbers) {
  ThreadPool pool(2);
  const double gbs = measure_memory_bandwidth_gb_per_s(pool);
  const double gflops = measure_fma_peak_gflops(pool);
  EXPECT_GT(gbs, 0.5);
  EXPECT_LT(gbs, 5000);
  EXPECT_GT(gflops, 1.0);
  EXPECT_LT(gflops, 100000);
  std::printf("bandwidth %.1f GB/s, fma peak %.1f GFLOP/s (%s)\n", gbs, gflops, isa_name(active_isa()));
}

}  // namespace
}  // namespace parallm::cpu
