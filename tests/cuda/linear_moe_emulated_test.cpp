// The emulated linear, dequantization and MoE launchers (kernels/cuda/
// emulated) against independent CPU code: the CPU's matmul (the kernel under
// model/linear's linear_forward; cuda_test does not link parallm_model, so
// the bias is added here as linear_forward does), a double-precision product
// of cpu::dequantize_row's weights, cpu::dequantize_row + fp32_to_fp16, a
// top-k written from route_tokens' rule with a sort, and plain loops.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "cuda_test_data.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/quant.h"
#include "kernels/cuda/emulated/launchers.h"
#include "kernels/cuda/math/linear.h"
#include "util/check.h"
#include "util/thread_pool.h"

namespace parallm::cuda {
namespace {

struct LinearCase {
  std::vector<uint8_t> w;  // [n_out] rows of dtype_row_bytes(t, n_in)
  std::vector<float> bias, x;
};

LinearCase make_linear_case(DType t, int64_t n_tokens, int64_t n_out, int64_t n_in, uint32_t seed) {
  LinearCase c;
  c.w = test::random_table(t, n_out, n_in, seed);
  c.bias = test::random_floats(n_out, seed + 1000);
  c.x = test::random_floats(n_tokens * n_in, seed + 2000);
  return c;
}

// What the emulated linear promises for x: f32 as is, except that the GEMM
// path (n_tokens > kMatVecMaxTokens, f16 / bf16 weights) rounds x to the
// weight dtype.
float x_as_used(DType t, int64_t n_tokens, float v) {
  if (n_tokens <= kMatVecMaxTokens) return v;
  if (t == DType::kF16) return fp16_to_fp32(fp32_to_fp16(v));
  if (t == DType::kBF16) return bf16_to_fp32(fp32_to_bf16(v));
  return v;
}

// The relative rounding of x in that path: half an ulp of f16 (10 stored
// mantissa bits) or bf16 (7).
double x_rounding(DType t, int64_t n_tokens) {
  if (n_tokens <= kMatVecMaxTokens) return 0.0;
  if (t == DType::kF16) return std::ldexp(1.0, -11);
  if (t == DType::kBF16) return std::ldexp(1.0, -8);
  return 0.0;
}

// f32 accumulation of an n_in-term sum: the emulation's fmaf chains (n_in / 32
// terms per lane, then a 5-level tree) and the CPU's 4-way sums each round
// once per term, at most ~n_in * 2^-24 of sum |w x| in the worst case and
// ~sqrt(n_in) * 2^-24 typically; 1e-5 of sum |w x| bounds every shape here
// (n_in <= 4096: worst case 2.4e-4, observed below 1e-6).
constexpr double kF32Rel = 1e-5;

TEST(CudaEmulated, LinearMatchesCpuMatmulAndDoubleReference) {
  ThreadPool pool(2);
  const cpu::Isa saved = cpu::active_isa();
  double max_err_double = 0, max_err_cpu = 0, max_err_best = 0;
  for (DType t : {DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0}) {
    for (int64_t n_in : {64, 96, 4096, 100}) {
      if (t == DType::kQ8_0 && n_in % 32 != 0) continue;
      for (int64_t n_tokens : {1, 3, 8, 9, 33}) {
        for (int64_t n_out : {37, 5}) {
          for (bool with_bias : {true, false}) {
            SCOPED_TRACE(std::string(dtype_name(t)) + " n_in " + std::to_string(n_in) + " n_tokens " +
                         std::to_string(n_tokens) + " n_out " + std::to_string(n_out) + (with_bias ? " bias" : ""));
            const LinearCase c = make_linear_case(t, n_tokens, n_out, n_in, static_cast<uint32_t>(n_in + n_out));
            const float* bias = with_bias ? c.bias.data() : nullptr;
            std::vector<float> out(static_cast<size_t>(n_tokens * n_out), 777.0f);
            emulated::linear(out.data(), c.w.data(), t, bias, c.x.data(), n_tokens, n_out, n_in, nullptr);

            // The CPU's linear: scalar kernels (dequantize_row, then f32 dots
            // of f32 x, the layer's definition) and the machine's best ones
            // (AVX2 / AVX-512 round x through 8-bit blocks for q8_0 decode,
            // matmul.h: allowed exactly the error that rounding can make).
            const size_t row_bytes = dtype_row_bytes(t, n_in);
            std::vector<float> cpu_scalar(out.size()), cpu_best(out.size());
            cpu::set_active_isa(cpu::Isa::kScalar);
            cpu::matmul(cpu_scalar.data(), c.w.data(), t, row_bytes, c.x.data(), n_tokens, n_in, n_out, pool);
            cpu::set_active_isa(cpu::best_isa());
            cpu::matmul(cpu_best.data(), c.w.data(), t, row_bytes, c.x.data(), n_tokens, n_in, n_out, pool);
            cpu::set_active_isa(saved);
            const bool best_rounds_x = t == DType::kQ8_0 && cpu::best_isa() != cpu::Isa::kScalar;

            std::vector<float> wrow(static_cast<size_t>(n_in));
            for (int64_t o = 0; o < n_out; ++o) {
              cpu::dequantize_row(t, c.w.data() + o * row_bytes, wrow.data(), n_in);
              for (int64_t tk = 0; tk < n_tokens; ++tk) {
                const float* xt = c.x.data() + tk * n_in;
                // xq_bound: what rounding x to 8 bits per 32-block (d = amax / 127,
                // |error| <= d / 2 per element) can move the dot product.
                double want = 0, mag = 0, xq_bound = 0;
                for (int64_t i = 0; i < n_in; ++i) {
                  if (best_rounds_x) {
                    float amax = 0;
                    for (int64_t j = i / 32 * 32; j < i / 32 * 32 + 32; ++j) amax = std::max(amax, std::fabs(xt[j]));
                    xq_bound += std::fabs(static_cast<double>(wrow[i])) * amax / 254.0 * 1.001;
                  }
                  want += static_cast<double>(wrow[i]) * x_as_used(t, n_tokens, xt[i]);
                  mag += std::fabs(static_cast<double>(wrow[i]) * xt[i]);
                }
                const double b = bias != nullptr ? bias[o] : 0.0;
                want += b;
                mag += std::fabs(b);
                const size_t at = static_cast<size_t>(tk * n_out + o);
                const double got = out[at];
                ASSERT_TRUE(std::isfinite(got)) << "token " << tk << " row " << o;
                // Against the exact product of what the emulation multiplies.
                const double err_double = std::fabs(got - want) / mag;
                ASSERT_LE(err_double, kF32Rel) << "token " << tk << " row " << o;
                max_err_double = std::max(max_err_double, err_double);
                // Against the CPU (bias added as linear_forward does): the same
                // up to f32 rounding, plus the rounding of x the GEMM path makes.
                const double tol_cpu = kF32Rel + x_rounding(t, n_tokens);
                const double scalar = static_cast<double>(cpu_scalar[at]) + b;
                const double err_cpu = std::fabs(got - scalar) / mag;
                ASSERT_LE(err_cpu, tol_cpu) << "token " << tk << " row " << o << " scalar CPU " << scalar;
                if (x_rounding(t, n_tokens) == 0) max_err_cpu = std::max(max_err_cpu, err_cpu);
                const double best = static_cast<double>(cpu_best[at]) + b;
                if (x_rounding(t, n_tokens) == 0) max_err_best = std::max(max_err_best, std::fabs(got - best) / mag);
                ASSERT_LE(std::fabs(got - best), tol_cpu * mag + xq_bound)
                    << "token " << tk << " row " << o << " CPU (" << cpu::isa_name(cpu::best_isa()) << ") " << best;
              }
            }
          }
        }
      }
    }
  }
  std::printf(
      "linear: max |emulated - exact| / sum|wx| %.3g; |emulated - CPU| / sum|wx| (f32 x paths): scalar %.3g, %s "
      "%.3g\n",
      max_err_double, max_err_cpu, cpu::isa_name(cpu::best_isa()), max_err_best);
}

// A mat-vec token's result does not depend on the batch around it: each
// token has its own accumulators in the same order (q8_0 at any batch size,
// other types up to kMatVecMaxTokens).
TEST(CudaEmulated, LinearMatVecTokensAreIndependentOfTheBatch) {
  for (DType t : {DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0}) {
    const int64_t n_in = 320, n_out = 19;
    const int64_t n_tokens = t == DType::kQ8_0 ? 21 : kMatVecMaxTokens;
    SCOPED_TRACE(dtype_name(t));
    const LinearCase c = make_linear_case(t, n_tokens, n_out, n_in, 9);
    std::vector<float> batch(static_cast<size_t>(n_tokens * n_out)), one(static_cast<size_t>(n_out));
    emulated::linear(batch.data(), c.w.data(), t, c.bias.data(), c.x.data(), n_tokens, n_out, n_in, nullptr);
    for (int64_t tk = 0; tk < n_tokens; ++tk) {
      emulated::linear(one.data(), c.w.data(), t, c.bias.data(), c.x.data() + tk * n_in, 1, n_out, n_in, nullptr);
      ASSERT_EQ(0, std::memcmp(one.data(), batch.data() + tk * n_out, one.size() * 4)) << "token " << tk;
    }
  }
}

TEST(CudaEmulated, LinearOfNoTokensOrRowsWritesNothing) {
  const LinearCase c = make_linear_case(DType::kF16, 2, 4, 64, 1);
  std::vector<float> out(8, 5.0f);
  emulated::linear(out.data(), c.w.data(), DType::kF16, nullptr, c.x.data(), 0, 4, 64, nullptr);
  emulated::linear(out.data(), c.w.data(), DType::kF16, nullptr, c.x.data(), 2, 0, 64, nullptr);
  EXPECT_EQ(out, std::vector<float>(8, 5.0f));
}

// Rows of every dtype dequantize_rows_f16 reads: quantized from normal values
// (the scales a quantizer picks), and raw random bytes (any scale bits:
// subnormal, huge, inf and NaN scales, every nibble), plus f32 / f16 / bf16
// rows holding the values f16 rounding treats specially.
std::vector<uint8_t> special_rows(DType t, int64_t n_rows, int64_t n_cols, uint32_t seed) {
  std::vector<uint8_t> rows = test::random_table(t, n_rows, n_cols, seed);
  const float specials[] = {0.0f,     -0.0f,    NAN,      -NAN,      INFINITY,  -INFINITY, 65504.0f, 65519.0f,
                            65520.0f, 1e6f,     -1e6f,    6.1e-5f,   6.0e-8f,   2.9e-8f,   3.0e-8f,  -5.96e-8f,
                            1e-10f,   1.00049f, 1.00146f, -2.00098f, 0.333333f, 3.1e-5f,   4.5e-6f,  1.0f};
  if (t == DType::kF32 || t == DType::kF16 || t == DType::kBF16) {
    std::vector<float> row(static_cast<size_t>(n_cols));
    for (int64_t i = 0; i < n_cols; ++i) row[i] = specials[i % std::size(specials)] * (i % 7 == 6 ? 1.5f : 1.0f);
    cpu::quantize_row(t, row.data(), rows.data(), n_cols);  // row 0
  }
  if (n_rows > 1) {  // the last row: random bytes
    std::mt19937 rng(seed);
    const size_t row_bytes = dtype_row_bytes(t, n_cols);
    for (size_t i = 0; i < row_bytes; ++i) rows[(n_rows - 1) * row_bytes + i] = static_cast<uint8_t>(rng());
  }
  return rows;
}

TEST(CudaEmulated, DequantizeRowsF16IsCpuDequantizeThenF16) {
  for (DType t : {DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0, DType::kQ4_0, DType::kQ4_K, DType::kQ6_K}) {
    for (int64_t n_cols : {256, 512, 96}) {
      if (n_cols % dtype_block_elems(t) != 0) continue;
      SCOPED_TRACE(std::string(dtype_name(t)) + " n_cols " + std::to_string(n_cols));
      const int64_t n_rows = 6;
      const std::vector<uint8_t> src = special_rows(t, n_rows, n_cols, 17);
      std::vector<uint16_t> out(static_cast<size_t>(n_rows * n_cols), 0xabcd);
      emulated::dequantize_rows_f16(out.data(), src.data(), t, n_rows, n_cols, nullptr);
      std::vector<float> f(static_cast<size_t>(n_cols));
      const size_t row_bytes = dtype_row_bytes(t, n_cols);
      for (int64_t r = 0; r < n_rows; ++r) {
        cpu::dequantize_row(t, src.data() + r * row_bytes, f.data(), n_cols);
        for (int64_t i = 0; i < n_cols; ++i) {
          ASSERT_EQ(out[r * n_cols + i], fp32_to_fp16(f[i])) << "row " << r << " col " << i << " value " << f[i];
        }
      }
    }
  }
}

// The f16 / bf16 rounding of the math against core/dtype's, over every
// exponent and the rounding boundaries.
TEST(CudaEmulated, F16AndBf16RoundingMatchCore) {
  std::mt19937 rng(5);
  for (int n = 0; n < 2000000; ++n) {
    uint32_t bits = static_cast<uint32_t>(rng());
    if (n % 4 == 1) bits = (bits & 0xffffe000u) | 0x1000u;  // exactly half an f16 ulp
    if (n % 4 == 2) bits = (bits & 0xffff0000u) | 0x8000u;  // exactly half a bf16 ulp
    float f;
    std::memcpy(&f, &bits, 4);
    ASSERT_EQ(f32_to_f16_bits(f), fp32_to_fp16(f)) << std::hex << bits;
    ASSERT_EQ(f32_to_bf16_bits(f), fp32_to_bf16(f)) << std::hex << bits;
  }
}

// ---------------------------------------------------------------- MoE

// route_tokens' rule (model/moe.cpp, no expert groups), written again: scores
// in f32 as it computes them, the experts sorted by (choice descending, id
// ascending), the first k.
void reference_topk(int32_t* ids, float* weights, const float* lg, const float* bias, int n_exp, int k, TopKRule rule) {
  std::vector<float> scores(static_cast<size_t>(n_exp)), choice(scores.size());
  if (rule.sigmoid) {
    for (int e = 0; e < n_exp; ++e) scores[e] = 1.0f / (1.0f + std::exp(-lg[e]));
  } else {
    const float mx = *std::max_element(lg, lg + n_exp);
    float sum = 0.f;
    for (int e = 0; e < n_exp; ++e) sum += (scores[e] = std::exp(lg[e] - mx));
    for (int e = 0; e < n_exp; ++e) scores[e] /= sum;
  }
  for (int e = 0; e < n_exp; ++e) choice[e] = scores[e] + (bias ? bias[e] : 0.0f);
  std::vector<int32_t> order(static_cast<size_t>(n_exp));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return choice[a] > choice[b]; });
  float sum = 0.f;
  for (int r = 0; r < k; ++r) sum += scores[order[r]];
  const float norm = rule.norm_topk && sum > 0.f ? 1.0f / sum : 1.0f;
  for (int r = 0; r < k; ++r) {
    ids[r] = order[r];
    weights[r] = scores[order[r]] * norm * rule.routed_scale;
  }
}

struct TopkCase {
  const char* name;
  int64_t n_expert, k;
  TopKRule rule;
  bool with_bias;
};

// Logits rows: random, then rows with planted ties (the same best value at
// several experts; a whole row equal; ties just below the cut).
std::vector<float> topk_logits(int64_t n_tokens, int64_t n_expert, uint32_t seed) {
  std::vector<float> lg = test::random_floats(n_tokens * n_expert, seed, 2.0f);
  for (int64_t t = 0; t < n_tokens; ++t) {
    float* row = lg.data() + t * n_expert;
    switch (t % 4) {
      case 1:
        for (int64_t e = n_expert - 1; e >= 0; e -= 3) row[e] = 4.0f;  // ties at the top, higher ids first
        break;
      case 2:
        for (int64_t e = 0; e < n_expert; ++e) row[e] = 0.5f;  // all equal: ids 0..k-1
        break;
      case 3:
        for (int64_t e = 1; e < n_expert; e += 2) row[e] = row[0];  // ties around the middle
        break;
      default:
        break;
    }
  }
  return lg;
}

TEST(CudaEmulated, MoeTopkFollowsRouteTokensRule) {
  const TopkCase cases[] = {
      {"mixtral softmax norm", 8, 2, {false, true, 1.0f}, false},
      {"qwen2-moe softmax no norm", 60, 4, {false, false, 1.0f}, false},
      {"qwen3-moe softmax norm", 128, 8, {false, true, 1.0f}, false},
      {"deepseek-v3 sigmoid bias norm scale", 256, 8, {true, true, 2.5f}, true},
      {"sigmoid bias no norm", 64, 6, {true, false, 1.0f}, true},
      {"softmax bias", 16, 3, {false, true, 1.0f}, true},
      {"k = n_expert", 6, 6, {false, true, 1.0f}, false},
      {"one expert", 1, 1, {true, true, 1.0f}, false},
  };
  for (const TopkCase& tc : cases) {
    SCOPED_TRACE(tc.name);
    const int64_t n_tokens = 23;
    const std::vector<float> lg = topk_logits(n_tokens, tc.n_expert, 31);
    std::vector<float> bias = test::random_floats(tc.n_expert, 32, 0.1f);
    // Equal biases on a tied group: ties survive the bias.
    for (int64_t e = 0; e < tc.n_expert; e += 3) bias[e] = 0.05f;
    const float* b = tc.with_bias ? bias.data() : nullptr;
    const size_t n_out = static_cast<size_t>(n_tokens * tc.k);
    std::vector<int32_t> ids(n_out, -5);
    std::vector<float> weights(n_out, NAN);
    emulated::moe_topk(ids.data(), weights.data(), lg.data(), b, n_tokens, tc.n_expert, tc.k, tc.rule, nullptr);
    std::vector<int32_t> want_ids(static_cast<size_t>(tc.k));
    std::vector<float> want_w(static_cast<size_t>(tc.k));
    for (int64_t t = 0; t < n_tokens; ++t) {
      reference_topk(want_ids.data(), want_w.data(), lg.data() + t * tc.n_expert, b, static_cast<int>(tc.n_expert),
                     static_cast<int>(tc.k), tc.rule);
      for (int64_t r = 0; r < tc.k; ++r) {
        ASSERT_EQ(ids[t * tc.k + r], want_ids[r]) << "token " << t << " pick " << r;
        ASSERT_EQ(weights[t * tc.k + r], want_w[r]) << "token " << t << " pick " << r;
      }
      if (tc.rule.norm_topk) {
        double s = 0;
        for (int64_t r = 0; r < tc.k; ++r) s += weights[t * tc.k + r];
        ASSERT_NEAR(s, tc.rule.routed_scale, 1e-5 * tc.rule.routed_scale) << "token " << t;
      }
    }
    // Without a bias, the all-equal row (token 2) picks 0..k-1: ties to the lower id.
    if (!tc.with_bias) {
      for (int64_t r = 0; r < tc.k; ++r) EXPECT_EQ(ids[2 * tc.k + r], r);
    }
  }
}

TEST(CudaEmulated, GatherAndScatterAddRowsMatchLoops) {
  const int64_t n_src = 13, n_embd = 70;
  const std::vector<float> x = test::random_floats(n_src * n_embd, 41);
  const std::vector<int32_t> rows = {12, 0, 5, 5, 7, 1};  // gather may repeat a row
  const auto n_rows = static_cast<int64_t>(rows.size());
  std::vector<float> g(static_cast<size_t>(n_rows * n_embd), NAN);
  emulated::gather_rows(g.data(), x.data(), rows.data(), n_rows, n_embd, nullptr);
  for (int64_t i = 0; i < n_rows; ++i) {
    for (int64_t j = 0; j < n_embd; ++j) ASSERT_EQ(g[i * n_embd + j], x[rows[i] * n_embd + j]) << i << "," << j;
  }
  // Scatter: distinct rows per call, two calls adding to the same rows.
  const std::vector<int32_t> dst = {3, 9, 0, 12};
  const std::vector<float> w1 = {0.25f, -1.5f, 2.0f, 0.7f}, w2 = {1.0f, 0.3f, -0.2f, 5.0f};
  const std::vector<float> y1 = test::random_floats(4 * n_embd, 42), y2 = test::random_floats(4 * n_embd, 43);
  std::vector<float> out = test::random_floats(n_src * n_embd, 44), want = out;
  emulated::scatter_add_rows(out.data(), y1.data(), dst.data(), w1.data(), 4, n_embd, nullptr);
  emulated::scatter_add_rows(out.data(), y2.data(), dst.data(), w2.data(), 4, n_embd, nullptr);
  for (int64_t i = 0; i < 4; ++i) {
    for (int64_t j = 0; j < n_embd; ++j) want[dst[i] * n_embd + j] += w1[i] * y1[i * n_embd + j];
  }
  for (int64_t i = 0; i < 4; ++i) {
    for (int64_t j = 0; j < n_embd; ++j) want[dst[i] * n_embd + j] += w2[i] * y2[i * n_embd + j];
  }
  // A fused multiply-add against a product then a sum: an ulp or so.
  for (size_t e = 0; e < out.size(); ++e) ASSERT_NEAR(out[e], want[e], 1e-6 * (1 + std::fabs(want[e]))) << e;
  // Rows not named are untouched.
  const std::vector<float> before = test::random_floats(n_src * n_embd, 44);
  for (int64_t j = 0; j < n_embd; ++j) EXPECT_EQ(out[4 * n_embd + j], before[4 * n_embd + j]);
}

// ---------------------------------------------------------------- bad input

template <typename F>
void expect_input_error(F&& f, const std::string& needle) {
  try {
    f();
    FAIL() << "accepted; wanted an InputError naming " << needle;
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(CudaEmulated, LinearAndDequantizeRejectTypesTheyCannotRead) {
  const std::vector<uint8_t> w(1 << 16);
  const std::vector<float> x(256);
  std::vector<float> out(64);
  std::vector<uint16_t> h(1024);
  for (DType t : {DType::kQ4_0, DType::kQ4_K, DType::kQ6_K, DType::kQ5_K, DType::kIQ4_XS}) {
    EXPECT_FALSE(linear_math_dtype(t)) << dtype_name(t);
    expect_input_error([&] { emulated::linear(out.data(), w.data(), t, nullptr, x.data(), 1, 4, 256, nullptr); },
                       dtype_name(t));
  }
  expect_input_error(
      [&] { emulated::linear(out.data(), w.data(), DType::kQ8_0, nullptr, x.data(), 1, 4, 48, nullptr); },
      "multiple of 32");
  for (DType t : {DType::kQ5_K, DType::kQ4_1, DType::kIQ4_NL, DType::kQ2_K}) {
    expect_input_error([&] { emulated::dequantize_rows_f16(h.data(), w.data(), t, 1, 256, nullptr); }, dtype_name(t));
  }
  expect_input_error([&] { emulated::dequantize_rows_f16(h.data(), w.data(), DType::kQ4_K, 1, 128, nullptr); },
                     "multiple of 256");
  expect_input_error([&] { emulated::dequantize_rows_f16(h.data(), w.data(), DType::kQ4_0, 1, 40, nullptr); },
                     "multiple of 32");
}

TEST(CudaEmulated, BrokenShapesStop) {
  // The pool threads of other tests may still be alive: re-execute, not fork.
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const std::vector<float> logits(512), x(64);
  std::vector<int32_t> ids(512);
  std::vector<float> weights(512), out(64);
  EXPECT_DEATH(emulated::moe_topk(ids.data(), weights.data(), logits.data(), nullptr, 1, 8, 9, {}, nullptr),
               "moe_topk");
  EXPECT_DEATH(emulated::moe_topk(ids.data(), weights.data(), logits.data(), nullptr, 1, 257, 2, {}, nullptr),
               "moe_topk");
  EXPECT_DEATH(emulated::moe_topk(ids.data(), weights.data(), logits.data(), nullptr, 1, 8, 0, {}, nullptr),
               "moe_topk");
  EXPECT_DEATH(emulated::linear(out.data(), x.data(), DType::kF32, nullptr, x.data(), 1, 1, 0, nullptr), "n_in > 0");
  EXPECT_DEATH(emulated::linear(out.data(), x.data(), DType::kF32, nullptr, x.data(), -1, 1, 8, nullptr), "n_tokens");
  EXPECT_DEATH(emulated::gather_rows(out.data(), x.data(), ids.data(), 1, 0, nullptr), "n_embd > 0");
}

}  // namespace
}  // namespace parallm::cuda
