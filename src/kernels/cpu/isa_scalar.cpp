// Scalar kernel table: the portable fallback and the speed baseline. Every
// weight row is dequantized once (quant.cpp) and dotted with each token.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/isa_table.h"
#include "kernels/cpu/quant.h"

namespace parallm::cpu {

namespace {

bool wants_xq(DType, int64_t, bool) { return false; }
size_t xq_bytes(int64_t, int64_t) { return 0; }
void quantize_x(const float*, void*, int64_t, int64_t, int64_t, int64_t) {}

void rows(const RowsTask& a) {
  if (a.packed) {
    packed_rows_portable(a);
    return;
  }
  thread_local std::vector<float> wrow;
  if (wrow.size() < static_cast<size_t>(a.n_in)) wrow.resize(a.n_in);
  for (int64_t o = a.o_begin; o < a.o_end; ++o) {
    dequantize_row(a.wtype, a.w + o * a.w_stride, wrow.data(), a.n_in);
    for (int64_t t = 0; t < a.n_tokens; ++t) {
      const float* xt = a.x + t * a.n_in;
      float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
      int64_t i = 0;
      for (; i + 4 <= a.n_in; i += 4) {
        s0 += wrow[i] * xt[i];
        s1 += wrow[i + 1] * xt[i + 1];
        s2 += wrow[i + 2] * xt[i + 2];
        s3 += wrow[i + 3] * xt[i + 3];
      }
      for (; i < a.n_in; ++i) s0 += wrow[i] * xt[i];
      a.out[t * a.out_stride + o] = (s0 + s1) + (s2 + s3);
    }
  }
}

void f32_to_f16(const float* s, uint16_t* d, int64_t n) {
  for (int64_t i = 0; i < n; ++i) d[i] = fp32_to_fp16(s[i]);
}
void f16_to_f32(const uint16_t* s, float* d, int64_t n) {
  for (int64_t i = 0; i < n; ++i) d[i] = fp16_to_fp32(s[i]);
}
void f32_to_bf16(const float* s, uint16_t* d, int64_t n) {
  for (int64_t i = 0; i < n; ++i) d[i] = fp32_to_bf16(s[i]);
}
void bf16_to_f32(const uint16_t* s, float* d, int64_t n) {
  for (int64_t i = 0; i < n; ++i) d[i] = bf16_to_fp32(s[i]);
}

void rmsnorm_row(float* out, const float* x, const float* w, int64_t n, float eps) {
  float ss[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int j = 0; j < 8; ++j) ss[j] += x[i + j] * x[i + j];
  }
  for (; i < n; ++i) ss[0] += x[i] * x[i];
  const float sum = ((ss[0] + ss[1]) + (ss[2] + ss[3])) + ((ss[4] + ss[5]) + (ss[6] + ss[7]));
  const float scale = 1.0f / std::sqrt(sum / static_cast<float>(n) + eps);
  for (i = 0; i < n; ++i) out[i] = x[i] * scale * w[i];
}

float exp_shifted(float* x, int64_t n, float scale) {
  float mx = -INFINITY;
  for (int64_t i = 0; i < n; ++i) mx = std::max(mx, x[i]);
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp((x[i] - mx) * scale);
    sum += x[i];
  }
  return sum;
}

void softmax(float* x, int64_t n) {
  const float inv = 1.0f / exp_shifted(x, n, 1.0f);
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

void swiglu(float* out, const float* gate, const float* up, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    out[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

float dot(const float* a, const float* b, int64_t n) {
  float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    s0 += a[i] * b[i];
    s1 += a[i + 1] * b[i + 1];
    s2 += a[i + 2] * b[i + 2];
    s3 += a[i + 3] * b[i + 3];
  }
  for (; i < n; ++i) s0 += a[i] * b[i];
  return (s0 + s1) + (s2 + s3);
}

void axpy(float* y, float a, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += a * x[i];
}

float read_sum(const float* p, int64_t n, int streams) {
  float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  int64_t i = 0;
  if (streams == 2) {
    const int64_t h = n / 4 * 2;
    const float* q = p + h;
    for (; i < h; i += 2) {
      s0 += p[i];
      s1 += p[i + 1];
      s2 += q[i];
      s3 += q[i + 1];
    }
    i = 2 * h;
  } else {
    for (; i + 4 <= n; i += 4) {
      s0 += p[i];
      s1 += p[i + 1];
      s2 += p[i + 2];
      s3 += p[i + 3];
    }
  }
  for (; i < n; ++i) s0 += p[i];
  return s0 + s1 + s2 + s3;
}

double fma_burn(int64_t iters, float* sink) {
  float a[8] = {1, 1, 1, 1, 1, 1, 1, 1};
  const float m = 0.999999f, c = 1e-7f;
  for (int64_t i = 0; i < iters; ++i) {
    for (float& v : a) v = std::fma(v, m, c);
  }
  *sink = a[0] + a[1] + a[2] + a[3] + a[4] + a[5] + a[6] + a[7];
  return 2.0 * 8 * static_cast<double>(iters);
}

const IsaKernels kTable = {Isa::kScalar, wants_xq,    xq_bytes,    quantize_x,  rows,     f32_to_f16,
                           f16_to_f32,   f32_to_bf16, bf16_to_f32, rmsnorm_row, softmax,  exp_shifted,
                           swiglu,       dot,         axpy,        read_sum,    fma_burn, nullptr,
                           nullptr,      nullptr,     nullptr,     nullptr};

}  // namespace

const IsaKernels& scalar_kernels() { return kTable; }

}  // namespace parallm::cpu
