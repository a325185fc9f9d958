// Transformer-block ops (see ops.h). The row bodies are per ISA
// (isa_table.h); rope and add are plain C++ compiled once per ISA level
// (target_clones, -O3 in CMakeLists.txt), cos/sin once per token and pair.
// NOTE: at -O2 for the baseline ISA, rotating q and k of a 32-sequence batch
// was 2% of a decode step; vectorized for the CPU it is a tenth of that.
#include "kernels/cpu/ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cpu/isa_table.h"
#include "kernels/cpu/quant.h"
#include "util/check.h"

namespace parallm::cpu {

void rmsnorm(float* out, const float* x, const float* w, int64_t n_tokens, int64_t n_embd, float eps) {
  const IsaKernels& k = active_kernels();
  for (int64_t t = 0; t < n_tokens; ++t) k.rmsnorm_row(out + t * n_embd, x + t * n_embd, w, n_embd, eps);
}

void rope_table(float* cs, const int32_t* positions, int64_t n_tokens, int64_t head_dim, const float* inv_freq) {
  PARALLM_CHECK(head_dim % 2 == 0);
  const int64_t half = head_dim / 2;
  for (int64_t t = 0; t < n_tokens; ++t) {
    float* c = cs + t * head_dim;
    for (int64_t i = 0; i < half; ++i) {
      // NOTE: the angle in double: positions reach 1e5 and f32 would lose
      // the low bits of p * inv_freq before cos/sin see them.
      const double angle = static_cast<double>(positions[t]) * inv_freq[i];
      c[i] = static_cast<float>(std::cos(angle));
      c[half + i] = static_cast<float>(std::sin(angle));
    }
  }
}

__attribute__((target_clones("avx512f", "avx2", "default"))) void rope_apply(float* x, const float* cs,
                                                                             int64_t n_tokens, int64_t n_head,
                                                                             int64_t head_dim, RopeStyle style) {
  PARALLM_CHECK(head_dim % 2 == 0);
  const int64_t half = head_dim / 2;
  for (int64_t t = 0; t < n_tokens; ++t) {
    const float* cos_t = cs + t * head_dim;
    const float* sin_t = cos_t + half;
    for (int64_t h = 0; h < n_head; ++h) {
      float* v = x + (t * n_head + h) * head_dim;
      if (style == RopeStyle::kInterleaved) {
        for (int64_t i = 0; i < half; ++i) {
          const float a = v[2 * i], b = v[2 * i + 1];
          v[2 * i] = a * cos_t[i] - b * sin_t[i];
          v[2 * i + 1] = a * sin_t[i] + b * cos_t[i];
        }
      } else {
        for (int64_t i = 0; i < half; ++i) {
          const float a = v[i], b = v[i + half];
          v[i] = a * cos_t[i] - b * sin_t[i];
          v[i + half] = a * sin_t[i] + b * cos_t[i];
        }
      }
    }
  }
}

void rope(float* x, const int32_t* positions, int64_t n_tokens, int64_t n_head, int64_t head_dim, const float* inv_freq,
          RopeStyle style) {
  thread_local std::vector<float> cs;
  cs.resize(static_cast<size_t>(n_tokens * head_dim));
  rope_table(cs.data(), positions, n_tokens, head_dim, inv_freq);
  rope_apply(x, cs.data(), n_tokens, n_head, head_dim, style);
}

void softmax(float* x, int64_t n) {
  if (n > 0) active_kernels().softmax(x, n);
}

float exp_shifted(float* x, int64_t n, float scale) { return n > 0 ? active_kernels().exp_shifted(x, n, scale) : 0.0f; }

void swiglu(float* out, const float* gate, const float* up, int64_t n) { active_kernels().swiglu(out, gate, up, n); }

// NOTE: plain std::tanh; Gemma's FFN widths make this a small share beside
// the matmuls around it, and a vector tanh can come with a profile.
void geglu_tanh(float* out, const float* gate, const float* up, int64_t n) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  for (int64_t i = 0; i < n; ++i) {
    const float x = gate[i];
    const float g = 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * (x + 0.044715f * x * x * x)));
    out[i] = g * up[i];
  }
}

void softcap(float* x, int64_t n, float cap) {
  for (int64_t i = 0; i < n; ++i) x[i] = cap * std::tanh(x[i] / cap);
}

float dot(const float* a, const float* b, int64_t n) { return active_kernels().dot(a, b, n); }

void axpy(float* y, float a, const float* x, int64_t n) { active_kernels().axpy(y, a, x, n); }

__attribute__((target_clones("avx512f", "avx2", "default"))) void add(float* out, const float* a, const float* b,
                                                                      int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

void convert_row(DType t, const float* src, void* dst, int64_t n) {
  switch (t) {
    case DType::kF32:
      std::memmove(dst, src, static_cast<size_t>(n) * 4);
      return;
    case DType::kF16:
      active_kernels().f32_to_f16(src, static_cast<uint16_t*>(dst), n);
      return;
    case DType::kBF16:
      active_kernels().f32_to_bf16(src, static_cast<uint16_t*>(dst), n);
      return;
    case DType::kQ8_0:
      if (active_kernels().f32_to_q8_0 != nullptr) {
        active_kernels().f32_to_q8_0(src, dst, n);
      } else {
        quantize_row(t, src, dst, n);
      }
      return;
    default:
      PARALLM_CHECK_MSG(false, std::string("convert_row: unsupported dtype ") + dtype_name(t));
  }
}

void load_row_f32(DType t, const void* src, float* dst, int64_t n) {
  switch (t) {
    case DType::kF32:
      std::memmove(dst, src, static_cast<size_t>(n) * 4);
      return;
    case DType::kF16:
      active_kernels().f16_to_f32(static_cast<const uint16_t*>(src), dst, n);
      return;
    case DType::kBF16:
      active_kernels().bf16_to_f32(static_cast<const uint16_t*>(src), dst, n);
      return;
    case DType::kQ8_0:
      dequantize_row(t, src, dst, n);
      return;
    default:
      PARALLM_CHECK_MSG(false, std::string("load_row_f32: unsupported dtype ") + dtype_name(t));
  }
}

}  // namespace parallm::cpu
