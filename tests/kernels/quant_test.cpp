// Quantizers and dequantizers against independent scalar transcriptions of
// ggml's reference formulas (bit-exact), and the k-quant layouts against
// blocks packed by hand from known integer fields.
#include "kernels/cpu/quant.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

namespace parallm::cpu {
namespace {

std::vector<float> random_row(int64_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  // Edge cases inside the row: an all-zero block, an exact tie, a huge value.
  if (n >= 96) {
    for (int j = 0; j < 32; ++j) v[32 + j] = 0.0f;
    v[64] = 1e4f;
    v[65] = -1e4f;
  }
  return v;
}

// ggml quantize_row_q8_0_ref, transcribed.
std::vector<uint8_t> ggml_q8_0(const std::vector<float>& x) {
  std::vector<uint8_t> out;
  for (size_t b = 0; b < x.size() / 32; ++b) {
    float amax = 0;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[b * 32 + j]));
    const float d = amax / ((1 << 7) - 1);
    const float id = d ? 1.0f / d : 0.0f;
    const uint16_t dh = fp32_to_fp16(d);
    out.push_back(dh & 0xff);
    out.push_back(dh >> 8);
    for (int j = 0; j < 32; ++j) out.push_back(static_cast<uint8_t>(static_cast<int8_t>(roundf(x[b * 32 + j] * id))));
  }
  return out;
}

// ggml quantize_row_q4_0_ref, transcribed.
std::vector<uint8_t> ggml_q4_0(const std::vector<float>& x) {
  std::vector<uint8_t> out;
  for (size_t b = 0; b < x.size() / 32; ++b) {
    float amax = 0, max = 0;
    for (int j = 0; j < 32; ++j) {
      const float v = x[b * 32 + j];
      if (amax < fabsf(v)) {
        amax = fabsf(v);
        max = v;
      }
    }
    const float d = max / -8;
    const float id = d ? 1.0f / d : 0.0f;
    const uint16_t dh = fp32_to_fp16(d);
    out.push_back(dh & 0xff);
    out.push_back(dh >> 8);
    for (int j = 0; j < 16; ++j) {
      const float x0 = x[b * 32 + j] * id, x1 = x[b * 32 + 16 + j] * id;
      const uint8_t xi0 = std::min<int8_t>(15, (int8_t)(x0 + 8.5f));
      const uint8_t xi1 = std::min<int8_t>(15, (int8_t)(x1 + 8.5f));
      out.push_back(static_cast<uint8_t>(xi0 | (xi1 << 4)));
    }
  }
  return out;
}

TEST(Quant, Q8_0MatchesGgmlBitExact) {
  for (uint32_t seed : {1u, 2u, 3u}) {
    const auto x = random_row(512, seed, seed == 3 ? 1e-3f : 1.0f);
    std::vector<uint8_t> got(dtype_row_bytes(DType::kQ8_0, 512));
    quantize_row(DType::kQ8_0, x.data(), got.data(), 512);
    EXPECT_EQ(got, ggml_q8_0(x));
  }
}

TEST(Quant, Q4_0MatchesGgmlBitExact) {
  for (uint32_t seed : {1u, 2u, 3u}) {
    const auto x = random_row(512, seed, seed == 3 ? 1e-3f : 1.0f);
    std::vector<uint8_t> got(dtype_row_bytes(DType::kQ4_0, 512));
    quantize_row(DType::kQ4_0, x.data(), got.data(), 512);
    EXPECT_EQ(got, ggml_q4_0(x));
  }
}

TEST(Quant, Q8_0AndQ4_0DequantizeFormula) {
  const auto x = random_row(256, 7);
  for (DType t : {DType::kQ8_0, DType::kQ4_0}) {
    std::vector<uint8_t> q(dtype_row_bytes(t, 256));
    quantize_row(t, x.data(), q.data(), 256);
    std::vector<float> y(256);
    dequantize_row(t, q.data(), y.data(), 256);
    for (int b = 0; b < 8; ++b) {
      const uint8_t* blk = q.data() + b * dtype_block_bytes(t);
      const float d = fp16_to_fp32(static_cast<uint16_t>(blk[0] | (blk[1] << 8)));
      for (int j = 0; j < 32; ++j) {
        float want;
        if (t == DType::kQ8_0) {
          want = d * static_cast<int8_t>(blk[2 + j]);
        } else {
          const uint8_t byte = blk[2 + (j % 16)];
          want = d * ((j < 16 ? (byte & 0xf) : (byte >> 4)) - 8);
        }
        ASSERT_EQ(y[b * 32 + j], want) << dtype_name(t) << " block " << b << " elem " << j;
      }
    }
  }
}

TEST(Quant, FloatFormatsBitExact) {
  const std::vector<float> x = {0.0f,     -0.0f, 1.0f,  65504.0f,      1e6f,
                                6e-8f,    3e-5f, -2.5f, 1.0009765625f, 1.00048828125f /* f16 tie -> even */,
                                INFINITY, 1e-40f};
  std::vector<uint16_t> h(x.size()), b(x.size());
  quantize_row(DType::kF16, x.data(), h.data(), static_cast<int64_t>(x.size()));
  quantize_row(DType::kBF16, x.data(), b.data(), static_cast<int64_t>(x.size()));
  const std::vector<uint16_t> want_h = {0x0000, 0x8000, 0x3c00, 0x7bff, 0x7c00, 0x0001,
                                        0x01f7, 0xc100, 0x3c01, 0x3c00, 0x7c00, 0x0000};
  EXPECT_EQ(h, want_h);
  for (size_t i = 0; i < x.size(); ++i) {
    uint32_t bits;
    std::memcpy(&bits, &x[i], 4);
    const uint32_t rounded = (bits + 0x7fff + ((bits >> 16) & 1)) >> 16;
    EXPECT_EQ(b[i], rounded) << i;
  }
  std::vector<float> back(x.size());
  dequantize_row(DType::kBF16, b.data(), back.data(), static_cast<int64_t>(x.size()));
  EXPECT_EQ(back[2], 1.0f);
  EXPECT_EQ(back[7], -2.5f);
}

// Packs a Q4_K block from integer fields the way ggml's get_scale_min_k4 reads them.
BlockQ4_K pack_q4_k(float d, float dmin, const int sc[8], const int m[8], const int q[256]) {
  BlockQ4_K b{};
  b.d = fp32_to_fp16(d);
  b.dmin = fp32_to_fp16(dmin);
  for (int j = 0; j < 8; ++j) {
    if (j < 4) {
      b.scales[j] |= sc[j] & 63;
      b.scales[j + 4] |= m[j] & 63;
    } else {
      b.scales[j + 4] |= (sc[j] & 0xf) | ((m[j] & 0xf) << 4);
      b.scales[j - 4] |= (sc[j] >> 4) << 6;
      b.scales[j] |= (m[j] >> 4) << 6;
    }
  }
  for (int i = 0; i < 256; ++i) {
    const int chunk = i / 64, within = i % 64;
    b.qs[chunk * 32 + within % 32] |= static_cast<uint8_t>(q[i] << (within < 32 ? 0 : 4));
  }
  return b;
}

TEST(Quant, Q4_KDequantizeLayout) {
  std::mt19937 rng(5);
  int sc[8], m[8], q[256];
  for (int j = 0; j < 8; ++j) {
    sc[j] = rng() % 64;
    m[j] = rng() % 64;
  }
  for (int& v : q) v = rng() % 16;
  const BlockQ4_K b = pack_q4_k(0.5f, 0.25f, sc, m, q);
  std::vector<float> y(256);
  dequantize_row(DType::kQ4_K, &b, y.data(), 256);
  for (int i = 0; i < 256; ++i) {
    const float want = 0.5f * sc[i / 32] * q[i] - 0.25f * m[i / 32];
    ASSERT_FLOAT_EQ(y[i], want) << i;
  }
}

TEST(Quant, Q6_KDequantizeLayout) {
  std::mt19937 rng(6);
  int8_t sc[16];
  int q[256];
  for (auto& s : sc) s = static_cast<int8_t>(static_cast<int>(rng() % 255) - 127);
  for (int& v : q) v = rng() % 64;
  BlockQ6_K b{};
  b.d = fp32_to_fp16(0.125f);
  std::memcpy(b.scales, sc, 16);
  // Element i = 128*h + 32*k + l: low 4 bits in ql[64h + l + 32*(k%2)] (high nibble if k >= 2),
  // high 2 bits in qh[32h + l] at bit 2k.
  for (int i = 0; i < 256; ++i) {
    const int h = i / 128, k = (i % 128) / 32, l = i % 32;
    b.ql[64 * h + l + 32 * (k % 2)] |= static_cast<uint8_t>((q[i] & 0xf) << (k >= 2 ? 4 : 0));
    b.qh[32 * h + l] |= static_cast<uint8_t>((q[i] >> 4) << (2 * k));
  }
  std::vector<float> y(256);
  dequantize_row(DType::kQ6_K, &b, y.data(), 256);
  for (int i = 0; i < 256; ++i) {
    ASSERT_FLOAT_EQ(y[i], 0.125f * sc[i / 16] * (q[i] - 32)) << i;
  }
}

TEST(Quant, KQuantsRoundTrip) {
  const auto x = random_row(1024, 9);
  for (DType t : {DType::kQ4_K, DType::kQ6_K}) {
    std::vector<uint8_t> q(dtype_row_bytes(t, 1024));
    quantize_row(t, x.data(), q.data(), 1024);
    std::vector<float> y(1024);
    dequantize_row(t, q.data(), y.data(), 1024);
    // Error bound per 256-block relative to its largest magnitude.
    for (int b = 0; b < 4; ++b) {
      float amax = 0;
      for (int i = 0; i < 256; ++i) amax = std::max(amax, std::fabs(x[b * 256 + i]));
      const float tol = amax * (t == DType::kQ4_K ? 0.15f : 0.04f);
      for (int i = 0; i < 256; ++i) {
        ASSERT_NEAR(y[b * 256 + i], x[b * 256 + i], tol) << dtype_name(t) << " " << b * 256 + i;
      }
    }
    // Requantizing the dequantized row is stable (a fixed point up to rounding).
    std::vector<uint8_t> q2(q.size());
    quantize_row(t, y.data(), q2.data(), 1024);
    std::vector<float> y2(1024);
    dequantize_row(t, q2.data(), y2.data(), 1024);
    double err = 0, ref = 0;
    for (int i = 0; i < 1024; ++i) {
      err += std::fabs(y2[i] - y[i]);
      ref += std::fabs(y[i]);
    }
    EXPECT_LT(err / ref, 0.05) << dtype_name(t);
  }
}

}  // namespace
}  // namespace parallm::cpu
