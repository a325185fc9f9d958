// matmul / matmul_multi against "dequantize W to f32, multiply in f64", for
// every weight dtype x every ISA level this CPU supports x a grid of shapes
// (odd n_out, 1..70 tokens, padded row strides, 1..3 threads).
#include "kernels/cpu/matmul.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/cpu/block_pack.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/packed.h"
#include "kernels/cpu/quant.h"

namespace parallm::cpu {
namespace {

// Every dtype: the 32-value blocks (q4_1, q5_*, iq4_nl) and the 256-value
// ones (q2_k .. q6_k, iq4_xs) run through the same row kernels as q4_k.
constexpr auto& kAllTypes = kAllDTypes;

std::vector<Isa> supported_isas() {
  std::vector<Isa> v;
  for (Isa i : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512}) {
    if (isa_supported(i)) v.push_back(i);
  }
  return v;
}

// Restores the process-wide ISA after a test.
struct IsaGuard {
  Isa saved = active_isa();
  ~IsaGuard() { set_active_isa(saved); }
};

struct Matrix {
  DType t;
  int64_t n_out, n_in;
  size_t stride;
  std::vector<uint8_t> bytes;  // n_out rows at `stride`
  std::vector<float> deq;      // [n_out, n_in], what the rows hold
};

Matrix make_matrix(DType t, int64_t n_out, int64_t n_in, size_t pad, uint32_t seed) {
  Matrix m{t, n_out, n_in, dtype_row_bytes(t, n_in) + pad, {}, {}};
  m.bytes.assign(m.stride * n_out, 0xAB);  // padding holds garbage the kernel must not read
  m.deq.resize(n_out * n_in);
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 0.5f);
  std::vector<float> row(n_in);
  for (int64_t o = 0; o < n_out; ++o) {
    for (auto& v : row) v = dist(rng);
    quantize_row(t, row.data(), m.bytes.data() + o * m.stride, n_in);
    dequantize_row(t, m.bytes.data() + o * m.stride, m.deq.data() + o * n_in, n_in);
  }
  return m;
}

std::vector<float> make_x(int64_t n_tokens, int64_t n_in, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(n_tokens * n_in);
  for (auto& v : x) v = dist(rng);
  return x;
}

// Per-output reference and allowed error.
struct Reference {
  std::vector<double> y, tol;
};

Reference reference(const Matrix& m, const std::vector<float>& x, int64_t n_tokens, bool int8_x) {
  Reference r;
  r.y.resize(n_tokens * m.n_out);
  r.tol.resize(n_tokens * m.n_out);
  for (int64_t t = 0; t < n_tokens; ++t) {
    const float* xt = x.data() + t * m.n_in;
    for (int64_t o = 0; o < m.n_out; ++o) {
      const float* w = m.deq.data() + o * m.n_in;
      double s = 0, abs_sum = 0, q_err = 0;
      for (int64_t b = 0; b < m.n_in; b += 32) {
        double amax = 0, wabs = 0;
        for (int64_t i = b; i < std::min(b + 32, m.n_in); ++i) {
          s += static_cast<double>(w[i]) * xt[i];
          abs_sum += std::fabs(static_cast<double>(w[i]) * xt[i]);
          amax = std::max(amax, static_cast<double>(std::fabs(xt[i])));
          wabs += std::fabs(w[i]);
        }
        // x rounded to 8 bits per 32-block: |dx| <= amax/254 per element.
        q_err += wabs * amax / 254.0;
      }
      r.y[t * m.n_out + o] = s;
      // f32 accumulation error, plus the activation rounding when x is int8.
      r.tol[t * m.n_out + o] = 2e-6 * abs_sum + (int8_x ? q_err * 1.01 + 1e-4 * abs_sum : 0.0) + 1e-6;
    }
  }
  return r;
}

// x as the 8-bit kernels see it: per 32-block d = amax / 127 and q = x / d
// rounded to nearest even (f32 arithmetic, as the SIMD quantizers do),
// clamped to +-127, then d * q. The integer kernels sum u * q exactly, so
// against this x they differ from the f64 product only by f32 rounding.
std::vector<float> round_x_to_int8(const std::vector<float>& x) {
  std::vector<float> r(x.size());
  for (size_t b = 0; b < x.size(); b += 32) {
    float amax = 0.0f;
    for (size_t i = b; i < b + 32; ++i) amax = std::max(amax, std::fabs(x[i]));
    const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    for (size_t i = b; i < b + 32; ++i) r[i] = d * std::clamp(std::nearbyint(x[i] * id), -127.0f, 127.0f);
  }
  return r;
}

void expect_close(const std::vector<float>& got, const Reference& r, const std::string& what) {
  int bad = 0;
  for (size_t i = 0; i < got.size() && bad < 5; ++i) {
    if (!(std::fabs(got[i] - r.y[i]) <= r.tol[i])) {
      ADD_FAILURE() << what << " index " << i << ": got " << got[i] << " want " << r.y[i] << " tol " << r.tol[i];
      ++bad;
    }
  }
}

// q8_0/q4_0 run on 8-bit activations: AVX2 in mat-vec only, AVX-512 in the
// GEMM too (gemm_q8_avx512.cpp). Every other block type but q6_k does on
// AVX2 and AVX-512 in mat-vec (blocks_avx2.cpp).
bool may_use_int8_x(Isa isa, DType t, int64_t n_tokens) {
  if (t == DType::kQ8_0 || t == DType::kQ4_0) return isa == Isa::kAvx512 || (isa == Isa::kAvx2 && n_tokens < 8);
  return dtype_is_quantized(t) && t != DType::kQ6_K && isa != Isa::kScalar && n_tokens < 8;
}

TEST(Matmul, EveryDtypeIsaAndShape) {
  IsaGuard guard;
  ThreadPool pool2(2), pool3(3);
  // 48, 100, 130: batches the GEMM cuts into 48-token blocks (gemm_avx512.cpp).
  const int64_t token_counts[] = {1, 2, 3, 5, 6, 7, 8, 13, 33, 48, 70, 100, 130};
  struct Shape {
    int64_t n_out, n_in;
    size_t pad;
  };
  // n_in = 96 and 800: block counts that are not a multiple of 4 (kernel tails);
  // k-quants only take the multiples of 256. n_in = 4352: the f32 GEMM's k
  // blocks (2048, 2048, 256), accumulated across calls of its micro-kernel.
  const Shape shapes[] = {{37, 256, 0}, {67, 512, 64}, {1, 768, 34}, {11, 96, 6}, {13, 800, 0}, {53, 4352, 0}};
  uint32_t seed = 100;
  for (DType t : kAllTypes) {
    for (const Shape& s : shapes) {
      if (s.n_in % dtype_block_elems(t) != 0) continue;
      const Matrix m = make_matrix(t, s.n_out, s.n_in, s.pad, ++seed);
      for (int64_t nt : token_counts) {
        const auto x = make_x(nt, s.n_in, ++seed);
        const Reference exact = reference(m, x, nt, false);
        const Reference int8x = reference(m, x, nt, true);
        for (Isa isa : supported_isas()) {
          set_active_isa(isa);
          ThreadPool& pool = (nt % 2 == 0) ? pool2 : pool3;
          std::vector<float> out(nt * s.n_out, NAN);
          matmul(out.data(), m.bytes.data(), t, m.stride, x.data(), nt, s.n_in, s.n_out, pool);
          expect_close(out, may_use_int8_x(isa, t, nt) ? int8x : exact,
                       std::string(dtype_name(t)) + " " + isa_name(isa) + " n_out=" + std::to_string(s.n_out) +
                           " n_in=" + std::to_string(s.n_in) + " n_tokens=" + std::to_string(nt));
        }
      }
    }
  }
}

// The AVX2 integer mat-vec of the block types (blocks_avx2.cpp) against x
// rounded here the way the kernel rounds it (per 32-block d = amax/127, q =
// x/d to nearest even), multiplied in f64: only f32 rounding of the scales
// and sums remains, far inside the activation-rounding bound above (which a
// wrong scale of one sub-block in 32 can still meet).
TEST(Matmul, Avx2BlockDotsEqualTheRoundedXProduct) {
  if (!isa_supported(Isa::kAvx2)) GTEST_SKIP() << "no AVX2";
  IsaGuard guard;
  set_active_isa(Isa::kAvx2);
  ThreadPool pool(2);
  uint32_t seed = 900;
  for (DType t : kAllTypes) {
    if (!may_use_int8_x(Isa::kAvx2, t, 1) || t == DType::kQ8_0 || t == DType::kQ4_0) continue;
    for (int64_t n_in : {256, 768}) {
      const Matrix m = make_matrix(t, 37, n_in, 16, ++seed);
      for (int64_t nt : {1, 2, 3, 5}) {
        const auto x = make_x(nt, n_in, ++seed);
        std::vector<float> out(nt * m.n_out, NAN);
        matmul(out.data(), m.bytes.data(), t, m.stride, x.data(), nt, n_in, m.n_out, pool);
        for (int64_t tk = 0; tk < nt; ++tk) {
          const float* xt = x.data() + tk * n_in;
          for (int64_t o = 0; o < m.n_out; ++o) {
            const float* w = m.deq.data() + o * n_in;
            double y = 0, mag = 0;
            for (int64_t b = 0; b < n_in; b += 32) {
              float amax = 0, wmax = 0;
              for (int64_t i = b; i < b + 32; ++i) amax = std::max(amax, std::fabs(xt[i]));
              for (int64_t i = b; i < b + 32; ++i) wmax = std::max(wmax, std::fabs(w[i]));
              const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
              double s = 0, qabs = 0;
              for (int64_t i = b; i < b + 32; ++i) {
                const double q = std::clamp(std::nearbyint(xt[i] * id), -127.0f, 127.0f);
                s += static_cast<double>(w[i]) * q;
                qabs += std::fabs(q);
              }
              y += s * d;
              // The kernel's f32 terms (scale * sum, offset * sum) are up to
              // a few times the block's largest weight per quant.
              mag += 4.0 * wmax * qabs * d;
            }
            const double got = out[tk * m.n_out + o];
            ASSERT_NEAR(got, y, 1e-5 * mag + 1e-6)
                << dtype_name(t) << " n_in=" << n_in << " n_tokens=" << nt << " row " << o;
          }
        }
      }
    }
  }
}

TEST(Matmul, FloatWeightsAnyRowLength) {
  IsaGuard guard;
  ThreadPool pool(2);
  for (DType t : {DType::kF32, DType::kF16, DType::kBF16}) {
    for (int64_t n_in : {1, 15, 17, 100, 200}) {
      const Matrix m = make_matrix(t, 9, n_in, 6, 7 + static_cast<uint32_t>(n_in));
      for (int64_t nt : {1, 4, 9}) {
        const auto x = make_x(nt, n_in, 3);
        const Reference r = reference(m, x, nt, false);
        for (Isa isa : supported_isas()) {
          set_active_isa(isa);
          std::vector<float> out(nt * 9, NAN);
          matmul(out.data(), m.bytes.data(), t, m.stride, x.data(), nt, n_in, 9, pool);
          expect_close(out, r,
                       std::string(dtype_name(t)) + " " + isa_name(isa) + " n_in=" + std::to_string(n_in) +
                           " n_tokens=" + std::to_string(nt));
        }
      }
    }
  }
}

TEST(Matmul, MultiEqualsSeparateCalls) {
  IsaGuard guard;
  ThreadPool pool(2);
  const int64_t n_in = 256;
  const Matrix a = make_matrix(DType::kF16, 48, n_in, 0, 1);
  const Matrix b = make_matrix(DType::kQ8_0, 17, n_in, 0, 2);
  const Matrix c = make_matrix(DType::kQ4_K, 33, n_in, 0, 3);
  for (int64_t nt : {1, 3, 20}) {
    const auto x = make_x(nt, n_in, 4);
    for (Isa isa : supported_isas()) {
      set_active_isa(isa);
      std::vector<float> oa(nt * 48), ob(nt * 17), oc(nt * 33);
      const MatmulTarget targets[] = {{oa.data(), a.bytes.data(), a.t, a.stride, 48},
                                      {ob.data(), b.bytes.data(), b.t, b.stride, 17},
                                      {oc.data(), c.bytes.data(), c.t, c.stride, 33}};
      matmul_multi(targets, 3, x.data(), nt, n_in, pool);
      for (const auto* m : {&a, &b, &c}) {
        std::vector<float> want(nt * m->n_out);
        matmul(want.data(), m->bytes.data(), m->t, m->stride, x.data(), nt, n_in, m->n_out, pool);
        const std::vector<float>& got = m == &a ? oa : m == &b ? ob : oc;
        EXPECT_EQ(got, want) << dtype_name(m->t) << " " << isa_name(isa) << " n_tokens=" << nt;
      }
    }
  }
}

// Packed matrices (packed.h: q8_0 / q4_0, and every other block type in
// block_pack.h's layout): the same reference on every ISA, with row counts
// around the 16-row groups (the padding rows must not be written) and token
// counts around the 8-token tiles, fused with an unpacked target.
TEST(Matmul, PackedEveryIsaAndShape) {
  IsaGuard guard;
  ThreadPool pool2(2), pool3(3);
  struct Shape {
    int64_t n_out, n_in;
  };
  const Shape shapes[] = {{1, 32}, {15, 96}, {16, 768}, {17, 256}, {37, 800}, {67, 512}};
  uint32_t seed = 500;
  for (DType t : kAllTypes) {
    if (!packable(t)) continue;
    for (const Shape& s : shapes) {
      if (s.n_in % dtype_block_elems(t) != 0) continue;
      const Matrix m = make_matrix(t, s.n_out, s.n_in, 6, ++seed);
      std::vector<uint8_t> packed(packed_bytes(t, s.n_out, s.n_in) + 1, 0xCD);
      pack_rows(t, m.bytes.data(), m.stride, s.n_out, s.n_in, packed.data());
      ASSERT_EQ(packed.back(), 0xCD) << "pack_rows wrote past packed_bytes";
      const Matrix f = make_matrix(DType::kF16, 5, s.n_in, 0, ++seed);
      for (int64_t nt : {1, 2, 3, 7, 8, 9, 16, 33}) {
        const auto x = make_x(nt, s.n_in, ++seed);
        const Reference exact = reference(m, x, nt, false), int8x = reference(m, x, nt, true);
        const Reference f_ref = reference(f, x, nt, false);
        Reference rounded = reference(m, round_x_to_int8(x), nt, false);
        for (double& tol : rounded.tol) tol *= 4;  // scales and mins multiply in f32 too
        for (Isa isa : supported_isas()) {
          set_active_isa(isa);
          // Sentinels after the last token catch stores of padding rows.
          std::vector<float> out(nt * s.n_out + 16, NAN), fout(nt * 5);
          const MatmulTarget targets[] = {{fout.data(), f.bytes.data(), f.t, f.stride, 5},
                                          {out.data(), packed.data(), t, packed_group_bytes(t, s.n_in), s.n_out, true}};
          matmul_multi(targets, 2, x.data(), nt, s.n_in, nt % 2 == 0 ? pool2 : pool3);
          const std::string what = std::string("packed ") + dtype_name(t) + " " + isa_name(isa) +
                                   " n_out=" + std::to_string(s.n_out) + " n_in=" + std::to_string(s.n_in) +
                                   " n_tokens=" + std::to_string(nt);
          for (int i = 0; i < 16; ++i) ASSERT_TRUE(std::isnan(out[nt * s.n_out + i])) << what << " wrote past the end";
          out.resize(nt * s.n_out);
          const bool int8_kernel = isa == Isa::kAvx512 || (isa == Isa::kAvx2 && block_packable(t));
          expect_close(out, int8_kernel ? int8x : exact, what);
          // The block-packed kernels' integer sums are exact on both SIMD
          // levels (block_pack_avx512.cpp, block_pack_avx2.cpp).
          if (block_packable(t) && isa != Isa::kScalar) expect_close(out, rounded, what + " (against 8-bit x)");
          expect_close(fout, f_ref, what + " (fused f16 target)");
        }
      }
    }
  }
}

TEST(Matmul, UnpackRestoresEveryRow) {
  for (DType t : {DType::kQ8_0, DType::kQ4_0}) {
    const Matrix m = make_matrix(t, 35, 160, 0, 9);
    std::vector<uint8_t> packed(packed_bytes(t, 35, 160));
    pack_rows(t, m.bytes.data(), m.stride, 35, 160, packed.data());
    std::vector<uint8_t> row(dtype_row_bytes(t, 160));
    for (int64_t o = 0; o < 35; ++o) {
      unpack_row(t, packed.data(), packed_group_bytes(t, 160), o, 160, row.data());
      EXPECT_TRUE(std::equal(row.begin(), row.end(), m.bytes.begin() + o * m.stride)) << dtype_name(t) << " row " << o;
    }
  }
}

// Every packable type: a packed row reads back as the same floats, bit for
// bit, as dequantize_row of the row that was packed. The rows are random
// bytes (every scale, min and quant pattern, negative scales included) with
// each f16 field set to a random finite value.
TEST(Matmul, PackedRowsDequantizeBitExactly) {
  std::mt19937 rng(77);
  std::uniform_int_distribution<int> byte(0, 255);
  std::normal_distribution<float> scale(0.0f, 0.05f);
  for (DType t : kAllTypes) {
    if (!packable(t)) continue;
    const int64_t n_in = 512, n_out = 19;
    const size_t row_bytes = dtype_row_bytes(t, n_in), block = dtype_block_bytes(t);
    std::vector<uint8_t> rows(row_bytes * n_out);
    for (auto& b : rows) b = static_cast<uint8_t>(byte(rng));
    // The f16 fields of each block (d, and dmin or m where the type has one).
    std::vector<size_t> halves;
    switch (t) {
      case DType::kQ6_K:
        halves = {offsetof(BlockQ6_K, d)};
        break;
      case DType::kQ2_K:
        halves = {offsetof(BlockQ2_K, d), offsetof(BlockQ2_K, dmin)};
        break;
      case DType::kQ3_K:
        halves = {offsetof(BlockQ3_K, d)};
        break;
      case DType::kQ4_1:
      case DType::kQ5_1:
      case DType::kQ4_K:
      case DType::kQ5_K:
        halves = {0, 2};
        break;
      default:
        halves = {0};
    }
    for (size_t b = 0; b < rows.size(); b += block) {
      for (size_t h : halves) {
        const uint16_t v = fp32_to_fp16(scale(rng));
        std::memcpy(rows.data() + b + h, &v, 2);
      }
    }
    std::vector<uint8_t> packed(packed_bytes(t, n_out, n_in));
    pack_rows(t, rows.data(), row_bytes, n_out, n_in, packed.data());
    std::vector<float> want(n_in), got(n_in);
    for (int64_t o = 0; o < n_out; ++o) {
      dequantize_row(t, rows.data() + o * row_bytes, want.data(), n_in);
      dequantize_packed_row(t, packed.data(), packed_group_bytes(t, n_in), o, n_in, got.data());
      ASSERT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * 4)) << dtype_name(t) << " row " << o;
    }
  }
}

}  // namespace
}  // namespace parallm::cpu
