// Quantized checkpoint layouts (loader/quantized_checkpoint.h) against
// decoders written here from the published layouts: GPTQ, AWQ and
// compressed-tensors int4 words built nibble by nibble, fp8 e4m3 bytes from
// their bit fields, and the stored matrix read back through the kernels'
// own dequantizer. The end-to-end checks (real checkpoint layouts against
// the NumPy reference forward) are tests/loader/quantized_checkpoint_test.py.
#include "loader/quantized_checkpoint.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <random>

#include "kernels/cpu/quant.h"
#include "util/check.h"

namespace parallm {
namespace {

struct Owned {
  std::vector<std::vector<uint8_t>> bytes;
  std::vector<SafetensorsTensor> tensors;
};

// A tensor over bytes kept alive by `o` (reserve()d so pointers stay put).
const SafetensorsTensor* add(Owned& o, const std::string& dtype, std::vector<int64_t> shape,
                             std::vector<uint8_t> data) {
  o.bytes.push_back(std::move(data));
  SafetensorsTensor t;
  t.st_dtype = dtype;
  t.is_float = dtype == "F32" || dtype == "F16" || dtype == "BF16";
  t.shape = std::move(shape);
  t.data = o.bytes.back().data();
  t.nbytes = o.bytes.back().size();
  o.tensors.push_back(t);
  return &o.tensors.back();
}

std::vector<uint8_t> words(const std::vector<uint32_t>& w) {
  std::vector<uint8_t> b(w.size() * 4);
  std::memcpy(b.data(), w.data(), b.size());
  return b;
}
std::vector<uint8_t> halves(const std::vector<float>& v) {
  std::vector<uint8_t> b(v.size() * 2);
  for (size_t i = 0; i < v.size(); ++i) {
    const uint16_t h = fp32_to_fp16(v[i]);
    std::memcpy(b.data() + 2 * i, &h, 2);
  }
  return b;
}

// W as the kernels will read it back.
std::vector<float> read_back(const WeightTensor& w) {
  std::vector<float> out(static_cast<size_t>(w.shape[0] * w.shape[1]));
  for (int64_t o = 0; o < w.shape[0]; ++o) {
    cpu::dequantize_row(w.dtype, w.data + o * dtype_row_bytes(w.dtype, w.shape[1]), out.data() + o * w.shape[1],
                        w.shape[1]);
  }
  return out;
}

struct Int4Case {
  int64_t out = 16, in = 64, group = 32;
  bool desc_act = false, sym = false;
};

// Random quants, zero points and f16 scales; the exact W they stand for.
struct Int4Data {
  std::vector<int> q;          // [out, in]
  std::vector<int> z;          // [groups, out], the true zero point
  std::vector<float> s;        // [groups, out], f16-representable
  std::vector<int32_t> g_idx;  // [in]
  std::vector<float> w;        // [out, in]
  int64_t groups = 0;
};

Int4Data int4_data(const Int4Case& c, uint32_t seed) {
  std::mt19937 rng(seed);
  Int4Data d;
  d.groups = (c.in + c.group - 1) / c.group;
  d.g_idx.resize(static_cast<size_t>(c.in));
  for (int64_t i = 0; i < c.in; ++i) d.g_idx[i] = static_cast<int32_t>(i / c.group);
  if (c.desc_act) std::shuffle(d.g_idx.begin(), d.g_idx.end(), rng);
  d.q.resize(static_cast<size_t>(c.out * c.in));
  for (auto& v : d.q) v = static_cast<int>(rng() % 16);
  d.z.resize(static_cast<size_t>(d.groups * c.out));
  d.s.resize(d.z.size());
  for (size_t i = 0; i < d.z.size(); ++i) {
    d.z[i] = c.sym ? 8 : 1 + static_cast<int>(rng() % 15);
    d.s[i] = fp16_to_fp32(fp32_to_fp16(0.001f + 0.01f * static_cast<float>(rng() % 1000) / 1000.0f));
  }
  d.w.resize(d.q.size());
  for (int64_t o = 0; o < c.out; ++o) {
    for (int64_t i = 0; i < c.in; ++i) {
      const size_t g = static_cast<size_t>(d.g_idx[i] * c.out + o);
      d.w[o * c.in + i] = static_cast<float>(d.q[o * c.in + i] - d.z[g]) * d.s[g];
    }
  }
  return d;
}

// Eight nibbles in a word, value k at bits 4k.
uint32_t pack8(const int* v) {
  uint32_t w = 0;
  for (int k = 0; k < 8; ++k) w |= static_cast<uint32_t>(v[k] & 15) << (4 * k);
  return w;
}

QuantScheme scheme(QuantMethod m, int64_t group, bool sym) {
  QuantScheme s;
  s.method = m;
  s.name = m == QuantMethod::kGptq ? "gptq" : (m == QuantMethod::kAwq ? "awq" : "compressed-tensors");
  s.group_size = group;
  s.has_zeros = !sym;
  return s;
}

QuantParts gptq_parts(Owned& o, const Int4Case& c, const Int4Data& d) {
  std::vector<uint32_t> qw(static_cast<size_t>(c.in / 8 * c.out)), qz(static_cast<size_t>(d.groups * c.out / 8));
  for (int64_t r = 0; r < c.in / 8; ++r) {
    for (int64_t col = 0; col < c.out; ++col) {
      int v[8];
      for (int k = 0; k < 8; ++k) v[k] = d.q[col * c.in + 8 * r + k];
      qw[r * c.out + col] = pack8(v);
    }
  }
  for (int64_t g = 0; g < d.groups; ++g) {
    for (int64_t w = 0; w < c.out / 8; ++w) {
      int v[8];
      for (int k = 0; k < 8; ++k) v[k] = d.z[g * c.out + 8 * w + k] - 1;  // AutoGPTQ stores z - 1
      qz[g * (c.out / 8) + w] = pack8(v);
    }
  }
  QuantParts p;
  p["qweight"] = add(o, "I32", {c.in / 8, c.out}, words(qw));
  p["qzeros"] = add(o, "I32", {d.groups, c.out / 8}, words(qz));
  p["scales"] = add(o, "F16", {d.groups, c.out}, halves(d.s));
  if (c.desc_act) {
    std::vector<uint32_t> g(d.g_idx.begin(), d.g_idx.end());
    p["g_idx"] = add(o, "I32", {c.in}, words(g));
  }
  return p;
}

QuantParts awq_parts(Owned& o, const Int4Case& c, const Int4Data& d) {
  constexpr int kOrder[8] = {0, 2, 4, 6, 1, 3, 5, 7};  // nibble k holds output 8w + kOrder[k]
  std::vector<uint32_t> qw(static_cast<size_t>(c.in * c.out / 8)), qz(static_cast<size_t>(d.groups * c.out / 8));
  for (int64_t i = 0; i < c.in; ++i) {
    for (int64_t w = 0; w < c.out / 8; ++w) {
      int v[8];
      for (int k = 0; k < 8; ++k) v[k] = d.q[(8 * w + kOrder[k]) * c.in + i];
      qw[i * (c.out / 8) + w] = pack8(v);
    }
  }
  for (int64_t g = 0; g < d.groups; ++g) {
    for (int64_t w = 0; w < c.out / 8; ++w) {
      int v[8];
      for (int k = 0; k < 8; ++k) v[k] = d.z[g * c.out + 8 * w + kOrder[k]];
      qz[g * (c.out / 8) + w] = pack8(v);
    }
  }
  QuantParts p;
  p["qweight"] = add(o, "I32", {c.in, c.out / 8}, words(qw));
  p["qzeros"] = add(o, "I32", {d.groups, c.out / 8}, words(qz));
  p["scales"] = add(o, "F16", {d.groups, c.out}, halves(d.s));
  return p;
}

QuantParts compressed_parts(Owned& o, const Int4Case& c, const Int4Data& d) {
  std::vector<uint32_t> packed(static_cast<size_t>(c.out * c.in / 8));
  for (int64_t r = 0; r < c.out; ++r) {
    for (int64_t w = 0; w < c.in / 8; ++w) packed[r * (c.in / 8) + w] = pack8(&d.q[r * c.in + 8 * w]);
  }
  std::vector<float> st(d.s.size());  // [out, groups]
  for (int64_t g = 0; g < d.groups; ++g) {
    for (int64_t r = 0; r < c.out; ++r) st[r * d.groups + g] = d.s[g * c.out + r];
  }
  QuantParts p;
  p["weight_packed"] = add(o, "I32", {c.out, c.in / 8}, words(packed));
  p["weight_scale"] = add(o, "F16", {c.out, d.groups}, halves(st));
  return p;
}

void expect_matrix(const std::vector<float>& got, const std::vector<float>& want, float tol, const std::string& what) {
  ASSERT_EQ(got.size(), want.size());
  float worst = 0;
  for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::fabs(got[i] - want[i]));
  EXPECT_LE(worst, tol) << what;
}

TEST(QuantizedCheckpoint, Int4LayoutsDequantizeExactlyAndPackIntoGgmlBlocks) {
  for (QuantMethod m : {QuantMethod::kGptq, QuantMethod::kAwq, QuantMethod::kCompressedInt4}) {
    for (Int4Case c :
         {Int4Case{16, 64, 32, false, false}, Int4Case{16, 128, 64, false, true}, Int4Case{24, 256, 128, false, false},
          Int4Case{16, 64, 32, true, false}, Int4Case{8, 96, 32, true, true}}) {
      if (m != QuantMethod::kGptq && c.desc_act) continue;  // g_idx is GPTQ's
      if (m == QuantMethod::kCompressedInt4) c.sym = true;
      if (m == QuantMethod::kAwq) c.sym = false;
      const std::string what = std::to_string(static_cast<int>(m)) + " " + std::to_string(c.out) + "x" +
                               std::to_string(c.in) + " group " + std::to_string(c.group) +
                               (c.desc_act ? " desc_act" : "") + (c.sym ? " sym" : "");
      SCOPED_TRACE(what);
      const Int4Data d = int4_data(c, 11);
      Owned o;
      o.tensors.reserve(8);
      const QuantParts parts = m == QuantMethod::kGptq  ? gptq_parts(o, c, d)
                               : m == QuantMethod::kAwq ? awq_parts(o, c, d)
                                                        : compressed_parts(o, c, d);
      const QuantScheme s = scheme(m, c.group, c.sym);
      ModelFile model;
      // f32: exactly W.
      const WeightTensor f = dequantize_module(s, parts, "w", DType::kF32, &model);
      EXPECT_EQ(f.shape, (std::vector<int64_t>{c.out, c.in}));
      expect_matrix(read_back(f), d.w, 0.0f, what);
      // The default: q4_0 for symmetric data (exact), q4_1 with zero points
      // (m = -z s rounded to f16), q8_0 when groups are scattered (desc_act).
      const WeightTensor q = dequantize_module(s, parts, "w", std::nullopt, &model);
      const DType want = c.desc_act ? DType::kQ8_0 : (c.sym ? DType::kQ4_0 : DType::kQ4_1);
      EXPECT_EQ(q.dtype, want);
      float smax = 0;
      for (float v : d.s) smax = std::max(smax, v);
      const float tol = want == DType::kQ4_0 ? 0.0f : (want == DType::kQ4_1 ? 15 * smax / 1024 : 15 * smax / 127);
      expect_matrix(read_back(q), d.w, tol, what);
    }
  }
}

TEST(QuantizedCheckpoint, Fp8ScalesPerTensorChannelAndBlock) {
  // Every finite e4m3 code, decoded from its bit fields here.
  auto e4m3 = [](uint8_t b) {
    const int e = (b >> 3) & 15, m = b & 7;
    const double v = e == 0 ? m / 8.0 * std::pow(2.0, -6) : (1 + m / 8.0) * std::pow(2.0, e - 7);
    return static_cast<float>(b & 0x80 ? -v : v);
  };
  const int64_t out = 6, in = 40;
  std::mt19937 rng(5);
  std::vector<uint8_t> codes(static_cast<size_t>(out * in));
  for (auto& b : codes) {
    do {
      b = static_cast<uint8_t>(rng());
    } while ((b & 0x7f) == 0x7f);  // not NaN
  }
  QuantScheme s;
  s.method = QuantMethod::kFp8;
  s.name = "fp8";
  for (int layout = 0; layout < 3; ++layout) {
    SCOPED_TRACE(layout);
    Owned o;
    o.tensors.reserve(4);
    QuantParts p;
    p["weight"] = add(o, "F8_E4M3", {out, in}, codes);
    std::vector<float> scale;
    if (layout == 0) {
      scale = {0.03f};
      p["weight_scale"] =
          add(o, "F32", {}, {reinterpret_cast<uint8_t*>(scale.data()), reinterpret_cast<uint8_t*>(scale.data()) + 4});
    } else if (layout == 1) {
      for (int64_t r = 0; r < out; ++r) scale.push_back(0.01f * static_cast<float>(r + 1));
      p["weight_scale"] =
          add(o, "F32", {out, 1},
              {reinterpret_cast<uint8_t*>(scale.data()), reinterpret_cast<uint8_t*>(scale.data()) + 4 * out});
    } else {
      s.fp8_block = {4, 16};  // blocks of 4 rows x 16 columns: 2 x 3, the last ones partial
      for (int i = 0; i < 6; ++i) scale.push_back(0.005f * static_cast<float>(i + 1));
      p["weight_scale_inv"] = add(
          o, "F32", {2, 3}, {reinterpret_cast<uint8_t*>(scale.data()), reinterpret_cast<uint8_t*>(scale.data()) + 24});
    }
    std::vector<float> want(codes.size());
    for (int64_t r = 0; r < out; ++r) {
      for (int64_t i = 0; i < in; ++i) {
        const float sc = layout == 0 ? scale[0] : (layout == 1 ? scale[r] : scale[(r / 4) * 3 + i / 16]);
        want[r * in + i] = e4m3(codes[r * in + i]) * sc;
      }
    }
    ModelFile model;
    expect_matrix(read_back(dequantize_module(s, p, "w", DType::kF32, &model)), want, 0.0f, "f32");
    const WeightTensor q8 = dequantize_module(s, p, "w", std::nullopt, &model);  // in 40 is not whole 32s
    EXPECT_EQ(q8.dtype, DType::kF16);
  }
}

TEST(QuantizedCheckpoint, ContradictingShapesAndSchemesAreInputErrors) {
  auto err = [](const std::function<void()>& f) {
    try {
      f();
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(err([] {
              parse_quant_scheme(R"({"quantization_config": {"quant_method": "bitsandbytes"}})", "c");
            }).find("'bitsandbytes'"),
            std::string::npos);
  EXPECT_NE(err([] {
              parse_quant_scheme(R"({"quantization_config": {"quant_method": "gptq", "bits": 8}})", "c");
            }).find("8-bit"),
            std::string::npos);
  EXPECT_NE(err([] {
              parse_quant_scheme(R"({"quantization_config": {"quant_method": "awq", "version": "gemv"}})", "c");
            }).find("gemv"),
            std::string::npos);
  EXPECT_EQ(parse_quant_scheme(R"({"model_type": "llama"})", "c").method, QuantMethod::kNone);
  const QuantScheme g = parse_quant_scheme(
      R"({"quantization_config": {"quant_method": "gptq", "bits": 4, "group_size": -1, "sym": false}})", "c");
  EXPECT_EQ(g.method, QuantMethod::kGptq);
  EXPECT_EQ(g.group_size, 0);
  EXPECT_TRUE(g.has_zeros);

  const Int4Case c;
  const Int4Data d = int4_data(c, 3);
  Owned o;
  o.tensors.reserve(8);
  QuantParts p = gptq_parts(o, c, d);
  ModelFile model;
  QuantScheme s = scheme(QuantMethod::kGptq, 16, false);  // 4 groups expected, 2 stored
  EXPECT_NE(err([&] { dequantize_module(s, p, "blk.0.attn_q.weight", std::nullopt, &model); }).find("scale groups"),
            std::string::npos);
  s.group_size = 32;
  QuantParts missing = p;
  missing.erase("qzeros");
  EXPECT_NE(err([&] { dequantize_module(s, missing, "m", std::nullopt, &model); }).find("qzeros"), std::string::npos);
  QuantParts wrong = p;
  wrong["scales"] = add(o, "F16", {2, c.out + 8}, std::vector<uint8_t>(2 * 2 * (c.out + 8)));
  EXPECT_NE(err([&] { dequantize_module(s, wrong, "m", std::nullopt, &model); }).find("scales of shape"),
            std::string::npos);
  std::vector<uint32_t> bad_idx(static_cast<size_t>(c.in), 7);
  QuantParts idx = p;
  idx["g_idx"] = add(o, "I32", {c.in}, words(bad_idx));
  EXPECT_NE(err([&] { dequantize_module(s, idx, "m", std::nullopt, &model); }).find("g_idx 7"), std::string::npos);
}

}  // namespace
}  // namespace parallm
