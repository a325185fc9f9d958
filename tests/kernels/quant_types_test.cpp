// The block types q4_1, q5_0, q5_1, iq4_nl, q2_k, q3_k, q5_k and iq4_xs:
// dequantize_row against decoders written here from ggml's published block
// layouts (ggml-common.h's structs, ggml-quants.c's dequantize_row_*), read
// from raw bytes at the fields' offsets, over blocks of random bytes with
// valid f16 scales, compared bit for bit; and each quantizer's round-trip
// error on normal rows.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <random>
#include <vector>

#include "kernels/cpu/quant.h"
#include "util/check.h"

namespace parallm::cpu {
namespace {

// IEEE binary16 -> float, from the format's definition.
float half(const uint8_t* p) {
  const int h = p[0] | (p[1] << 8);
  const int sign = h >> 15, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  const float mag =
      exp == 0 ? std::ldexp(static_cast<float>(mant), -24) : std::ldexp(static_cast<float>(1024 + mant), exp - 25);
  return sign ? -mag : mag;
}

const int8_t kLevels[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

// Each decoder: one block at p -> its elements at y.
void ref_q4_1(const uint8_t* p, float* y) {  // d, m, qs[16]
  const float d = half(p), m = half(p + 2);
  for (int j = 0; j < 16; ++j) {
    y[j] = (p[4 + j] & 0x0f) * d + m;
    y[j + 16] = (p[4 + j] >> 4) * d + m;
  }
}

void ref_q5_0(const uint8_t* p, float* y) {  // d, qh[4], qs[16]
  const float d = half(p);
  uint32_t qh;
  std::memcpy(&qh, p + 2, 4);
  for (int j = 0; j < 16; ++j) {
    const int h0 = ((qh >> j) << 4) & 0x10, h1 = (qh >> (j + 12)) & 0x10;
    y[j] = static_cast<float>(((p[6 + j] & 0x0f) | h0) - 16) * d;
    y[j + 16] = static_cast<float>(((p[6 + j] >> 4) | h1) - 16) * d;
  }
}

void ref_q5_1(const uint8_t* p, float* y) {  // d, m, qh[4], qs[16]
  const float d = half(p), m = half(p + 2);
  uint32_t qh;
  std::memcpy(&qh, p + 4, 4);
  for (int j = 0; j < 16; ++j) {
    const int h0 = ((qh >> j) << 4) & 0x10, h1 = (qh >> (j + 12)) & 0x10;
    y[j] = static_cast<float>((p[8 + j] & 0x0f) | h0) * d + m;
    y[j + 16] = static_cast<float>((p[8 + j] >> 4) | h1) * d + m;
  }
}

void ref_iq4_nl(const uint8_t* p, float* y) {  // d, qs[16]
  const float d = half(p);
  for (int j = 0; j < 16; ++j) {
    y[j] = d * kLevels[p[2 + j] & 0xf];
    y[j + 16] = d * kLevels[p[2 + j] >> 4];
  }
}

void ref_q2_k(const uint8_t* p, float* y) {  // scales[16], qs[64], d, dmin
  const uint8_t* sc = p;
  const uint8_t* q = p + 16;
  const float d = half(p + 80), dmin = half(p + 82);
  int is = 0;
  for (int n = 0; n < 256; n += 128, q += 32) {
    for (int shift = 0; shift < 8; shift += 2) {
      for (int half16 = 0; half16 < 2; ++half16) {
        const uint8_t s = sc[is++];
        const float dl = d * (s & 0xf), ml = dmin * (s >> 4);
        for (int l = 0; l < 16; ++l) *y++ = dl * ((q[l + 16 * half16] >> shift) & 3) - ml;
      }
    }
  }
}

void ref_q3_k(const uint8_t* p, float* y) {  // hmask[32], qs[64], scales[12], d
  const uint8_t* hm = p;
  const uint8_t* q = p + 32;
  const float d = half(p + 108);
  // The 16 6-bit scales: four little-endian words regrouped as in ggml.
  uint32_t aux[4];
  std::memcpy(aux, p + 96, 12);
  const uint32_t k1 = 0x03030303, k2 = 0x0f0f0f0f, tmp = aux[2];
  aux[2] = ((aux[0] >> 4) & k2) | (((tmp >> 4) & k1) << 4);
  aux[3] = ((aux[1] >> 4) & k2) | (((tmp >> 6) & k1) << 4);
  aux[0] = (aux[0] & k2) | (((tmp >> 0) & k1) << 4);
  aux[1] = (aux[1] & k2) | (((tmp >> 2) & k1) << 4);
  int8_t scales[16];
  std::memcpy(scales, aux, 16);
  int is = 0;
  uint8_t m = 1;
  for (int n = 0; n < 256; n += 128, q += 32) {
    for (int shift = 0; shift < 8; shift += 2, m <<= 1) {
      for (int half16 = 0; half16 < 2; ++half16) {
        const float dl = d * (scales[is++] - 32);
        for (int l = 16 * half16; l < 16 * half16 + 16; ++l) {
          *y++ = dl * (((q[l] >> shift) & 3) - ((hm[l] & m) ? 0 : 4));
        }
      }
    }
  }
}

// ggml's get_scale_min_k4 for Q4_K / Q5_K.
void scale_min_k4(int j, const uint8_t* q, int* d, int* m) {
  if (j < 4) {
    *d = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *d = (q[j + 4] & 0xf) | ((q[j - 4] >> 6) << 4);
    *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

void ref_q5_k(const uint8_t* p, float* y) {  // d, dmin, scales[12], qh[32], qs[128]
  const float d = half(p), dmin = half(p + 2);
  const uint8_t* scales = p + 4;
  const uint8_t* qh = p + 16;
  const uint8_t* ql = p + 48;
  uint8_t u1 = 1, u2 = 2;
  for (int j = 0, is = 0; j < 256; j += 64, ql += 32, is += 2, u1 <<= 2, u2 <<= 2) {
    int sc, m;
    scale_min_k4(is, scales, &sc, &m);
    const float d1 = d * sc, m1 = dmin * m;
    scale_min_k4(is + 1, scales, &sc, &m);
    const float d2 = d * sc, m2 = dmin * m;
    for (int l = 0; l < 32; ++l) *y++ = d1 * ((ql[l] & 0xf) + (qh[l] & u1 ? 16 : 0)) - m1;
    for (int l = 0; l < 32; ++l) *y++ = d2 * ((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
  }
}

void ref_iq4_xs(const uint8_t* p, float* y) {  // d, scales_h, scales_l[4], qs[128]
  const float d = half(p);
  const int scales_h = p[2] | (p[3] << 8);
  const uint8_t* qs = p + 8;
  for (int ib = 0; ib < 8; ++ib, qs += 16, y += 32) {
    const int ls = ((p[4 + ib / 2] >> 4 * (ib % 2)) & 0xf) | (((scales_h >> 2 * ib) & 3) << 4);
    const float dl = d * (ls - 32);
    for (int j = 0; j < 16; ++j) {
      y[j] = dl * kLevels[qs[j] & 0xf];
      y[j + 16] = dl * kLevels[qs[j] >> 4];
    }
  }
}

struct Layout {
  DType t;
  int elems, bytes;
  std::vector<int> half_offsets;  // the f16 fields, given valid values
  std::function<void(const uint8_t*, float*)> decode;
};

const std::vector<Layout>& layouts() {
  static const std::vector<Layout> v = {
      {DType::kQ4_1, 32, 20, {0, 2}, ref_q4_1},    {DType::kQ5_0, 32, 22, {0}, ref_q5_0},
      {DType::kQ5_1, 32, 24, {0, 2}, ref_q5_1},    {DType::kIQ4_NL, 32, 18, {0}, ref_iq4_nl},
      {DType::kQ2_K, 256, 84, {80, 82}, ref_q2_k}, {DType::kQ3_K, 256, 110, {108}, ref_q3_k},
      {DType::kQ5_K, 256, 176, {0, 2}, ref_q5_k},  {DType::kIQ4_XS, 256, 136, {0}, ref_iq4_xs},
  };
  return v;
}

TEST(QuantTypes, BlockSizesMatchTheLayouts) {
  for (const Layout& l : layouts()) {
    EXPECT_EQ(dtype_block_elems(l.t), l.elems) << dtype_name(l.t);
    EXPECT_EQ(dtype_block_bytes(l.t), static_cast<size_t>(l.bytes)) << dtype_name(l.t);
  }
}

TEST(QuantTypes, DequantizeMatchesTheReferenceDecoderBitForBit) {
  std::mt19937 rng(2024);
  constexpr int kBlocks = 64;
  for (const Layout& l : layouts()) {
    std::vector<uint8_t> bytes(static_cast<size_t>(kBlocks) * l.bytes);
    for (auto& b : bytes) b = static_cast<uint8_t>(rng());
    for (int b = 0; b < kBlocks; ++b) {
      for (int off : l.half_offsets) {
        // Sign, exponent 1..30 (normal, finite; some blocks below 2^-8 and
        // above 2^8), any mantissa; block 0 gets +0 and block 1 -0.
        uint16_t h = static_cast<uint16_t>(((rng() & 1) << 15) | ((1 + rng() % 30) << 10) | (rng() & 0x3ff));
        if (b < 2) h = b == 0 ? 0x0000 : 0x8000;
        bytes[b * l.bytes + off] = static_cast<uint8_t>(h & 0xff);
        bytes[b * l.bytes + off + 1] = static_cast<uint8_t>(h >> 8);
      }
    }
    const int64_t n = static_cast<int64_t>(kBlocks) * l.elems;
    std::vector<float> got(n), want(n);
    dequantize_row(l.t, bytes.data(), got.data(), n);
    for (int b = 0; b < kBlocks; ++b) l.decode(bytes.data() + b * l.bytes, want.data() + b * l.elems);
    for (int64_t i = 0; i < n; ++i) {
      uint32_t g, w;
      std::memcpy(&g, &got[i], 4);
      std::memcpy(&w, &want[i], 4);
      ASSERT_EQ(g, w) << dtype_name(l.t) << " element " << i << ": " << got[i] << " vs " << want[i];
    }
  }
}

// Normal rows (and an all-zero block, a row of one sign, a lone outlier):
// RMS error relative to the row's RMS, and each element's error relative to
// its super-block's largest magnitude, measured with this quantizer and kept
// here with a margin (docs/kernels.md lists the measured values).
struct Bound {
  double rel_rms;    // sqrt(mean err^2) / sqrt(mean x^2)
  double block_max;  // max |err| / max |x| of its 256-value block
};

const std::map<DType, Bound>& bounds() {
  static const std::map<DType, Bound> m = {
      {DType::kQ4_1, {0.09, 0.075}},  {DType::kQ5_0, {0.055, 0.065}},  {DType::kQ5_1, {0.045, 0.04}},
      {DType::kIQ4_NL, {0.09, 0.10}}, {DType::kQ2_K, {0.37, 0.36}},    {DType::kQ3_K, {0.19, 0.26}},
      {DType::kQ5_K, {0.045, 0.04}},  {DType::kIQ4_XS, {0.09, 0.105}},
  };
  return m;
}

std::vector<float> test_row(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  for (int j = 0; j < 32; ++j) v[256 + j] = 0.0f;                    // an all-zero 32-block
  for (int j = 0; j < 256; ++j) v[512 + j] = std::fabs(v[512 + j]);  // one sign only
  v[800] = 12.0f;                                                    // an outlier
  return v;
}

TEST(QuantTypes, RoundTripErrorIsBounded) {
  constexpr int64_t kN = 4096;
  for (const auto& [t, bound] : bounds()) {
    for (float scale : {1.0f, 1e-3f, 300.0f}) {
      std::vector<float> x = test_row(kN, 7);
      for (auto& v : x) v *= scale;
      std::vector<uint8_t> q(dtype_row_bytes(t, kN));
      quantize_row(t, x.data(), q.data(), kN);
      std::vector<float> y(kN);
      dequantize_row(t, q.data(), y.data(), kN);
      double se = 0, sx = 0, worst = 0;
      for (int64_t b = 0; b < kN; b += 256) {
        double amax = 0;
        for (int64_t i = b; i < b + 256; ++i) amax = std::max(amax, std::fabs(static_cast<double>(x[i])));
        for (int64_t i = b; i < b + 256; ++i) {
          const double e = static_cast<double>(y[i]) - x[i];
          se += e * e;
          sx += static_cast<double>(x[i]) * x[i];
          worst = std::max(worst, std::fabs(e) / amax);
        }
      }
      for (int j = 0; j < 32; ++j) EXPECT_EQ(y[256 + j], 0.0f) << dtype_name(t) << " zero block";
      const double rel_rms = std::sqrt(se / sx);
      EXPECT_LT(rel_rms, bound.rel_rms) << dtype_name(t) << " scale " << scale;
      EXPECT_LT(worst, bound.block_max) << dtype_name(t) << " scale " << scale;
      std::printf("%-7s scale %-6g rel_rms %.4f block_max %.4f\n", dtype_name(t), scale, rel_rms, worst);
    }
  }
}

TEST(QuantTypes, NamesParseAndRoundTrip) {
  for (DType t : kAllDTypes) {
    EXPECT_EQ(parse_dtype(dtype_name(t)), t);
    DType back;
    ASSERT_TRUE(dtype_from_ggml(dtype_to_ggml(t), &back)) << dtype_name(t);
    EXPECT_EQ(back, t);
    EXPECT_EQ(ggml_type_name(dtype_to_ggml(t)), dtype_name(t));
  }
  EXPECT_EQ(parse_dtype("Q5_K"), DType::kQ5_K);
  EXPECT_EQ(parse_dtype("IQ4_XS"), DType::kIQ4_XS);
  // The published ids (ggml.h's enum ggml_type).
  EXPECT_EQ(dtype_to_ggml(DType::kQ4_1), 3u);
  EXPECT_EQ(dtype_to_ggml(DType::kQ5_0), 6u);
  EXPECT_EQ(dtype_to_ggml(DType::kQ5_1), 7u);
  EXPECT_EQ(dtype_to_ggml(DType::kQ2_K), 10u);
  EXPECT_EQ(dtype_to_ggml(DType::kQ3_K), 11u);
  EXPECT_EQ(dtype_to_ggml(DType::kQ5_K), 13u);
  EXPECT_EQ(dtype_to_ggml(DType::kIQ4_NL), 20u);
  EXPECT_EQ(dtype_to_ggml(DType::kIQ4_XS), 23u);
  EXPECT_EQ(ggml_type_gguf_name(16), "IQ2_XXS");
  EXPECT_EQ(ggml_type_gguf_name(9), "Q8_1");
  EXPECT_EQ(ggml_type_gguf_name(39), "MXFP4");
  EXPECT_EQ(ggml_type_gguf_name(1000), "type 1000");
  DType unused;
  EXPECT_FALSE(dtype_from_ggml(16, &unused));
  EXPECT_FALSE(dtype_from_ggml(9, &unused));
  try {
    parse_dtype("q7_k");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("iq4_xs"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace parallm::cpu
