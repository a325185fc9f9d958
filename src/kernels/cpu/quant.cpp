// Scalar reference quantizers and dequantizers (see quant.h for the formulas).
#include "kernels/cpu/quant.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/cpu/quant_blocks.h"
#include "util/check.h"

namespace parallm::cpu {

namespace {

inline uint16_t load_u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}
inline void store_u16(uint8_t* p, uint16_t v) { std::memcpy(p, &v, 2); }

// 1 / d, or 0 where that overflows: a block of values so tiny that its f16
// scale is 0 anyway (found by fuzz_quantized_module: x / d was infinite,
// and converting it to an integer undefined).
inline float safe_inverse(float d) {
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  return std::isfinite(id) ? id : 0.0f;
}

void quantize_q8_0(const float* x, BlockQ8_0* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, x += kQK8_0) {
    float amax = 0.0f;
    for (int j = 0; j < kQK8_0; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127.0f;
    const float id = safe_inverse(d);
    y[b].d = fp32_to_fp16(d);
    for (int j = 0; j < kQK8_0; ++j) y[b].qs[j] = static_cast<int8_t>(std::roundf(x[j] * id));
  }
}

void quantize_q4_0(const float* x, BlockQ4_0* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, x += kQK4_0) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < kQK4_0; ++j) {
      if (amax < std::fabs(x[j])) {
        amax = std::fabs(x[j]);
        max = x[j];
      }
    }
    const float d = max / -8.0f;
    const float id = safe_inverse(d);
    y[b].d = fp32_to_fp16(d);
    for (int j = 0; j < kQK4_0 / 2; ++j) {
      const int8_t q0 = std::min<int8_t>(15, static_cast<int8_t>(x[j] * id + 8.5f));
      const int8_t q1 = std::min<int8_t>(15, static_cast<int8_t>(x[kQK4_0 / 2 + j] * id + 8.5f));
      y[b].qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
  }
}

// Q4_K: 8 sub-blocks of 32; w = d*sc*q - dmin*m, q in [0,15], sc/m 6-bit.
void quantize_q4_k(const float* x, BlockQ4_K* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, x += kQK_K) {
    float scale[8], minv[8];
    for (int j = 0; j < 8; ++j) {
      float lo = 0.0f, hi = 0.0f;
      for (int l = 0; l < 32; ++l) {
        lo = std::min(lo, x[j * 32 + l]);
        hi = std::max(hi, x[j * 32 + l]);
      }
      scale[j] = (hi - lo) / 15.0f;
      minv[j] = -lo;
    }
    const float max_scale = *std::max_element(scale, scale + 8);
    const float max_min = *std::max_element(minv, minv + 8);
    const float d = fp16_to_fp32(fp32_to_fp16(max_scale / 63.0f));
    const float dmin = fp16_to_fp32(fp32_to_fp16(max_min / 63.0f));
    y[b].d = fp32_to_fp16(max_scale / 63.0f);
    y[b].dmin = fp32_to_fp16(max_min / 63.0f);
    uint8_t sc[8], m[8], q[kQK_K];
    for (int j = 0; j < 8; ++j) {
      sc[j] = static_cast<uint8_t>(std::clamp<int>(std::lround(d > 0 ? scale[j] / d : 0), 0, 63));
      m[j] = static_cast<uint8_t>(std::clamp<int>(std::lround(dmin > 0 ? minv[j] / dmin : 0), 0, 63));
      const float ds = d * sc[j], dm = dmin * m[j];
      for (int l = 0; l < 32; ++l) {
        const int v = ds > 0 ? static_cast<int>(std::lround((x[j * 32 + l] + dm) / ds)) : 0;
        q[j * 32 + l] = static_cast<uint8_t>(std::clamp(v, 0, 15));
      }
    }
    pack_scale_min_k4(sc, m, y[b].scales);
    for (int c = 0; c < 4; ++c) {
      for (int l = 0; l < 32; ++l) {
        y[b].qs[c * 32 + l] = static_cast<uint8_t>(q[c * 64 + l] | (q[c * 64 + 32 + l] << 4));
      }
    }
  }
}

// Q6_K: 16 sub-blocks of 16; w = d*sc*(q-32), q in [0,63], sc int8.
void quantize_q6_k(const float* x, BlockQ6_K* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, x += kQK_K) {
    float scale[16];
    for (int j = 0; j < 16; ++j) {
      float amax = 0.0f;
      for (int l = 0; l < 16; ++l) amax = std::max(amax, std::fabs(x[j * 16 + l]));
      scale[j] = amax / 31.0f;
    }
    const float max_scale = *std::max_element(scale, scale + 16);
    y[b].d = fp32_to_fp16(max_scale / 127.0f);
    const float d = fp16_to_fp32(y[b].d);
    uint8_t q[kQK_K];
    for (int j = 0; j < 16; ++j) {
      const int sc = std::clamp<int>(std::lround(d > 0 ? scale[j] / d : 0), 0, 127);
      y[b].scales[j] = static_cast<int8_t>(sc);
      const float ds = d * sc;
      for (int l = 0; l < 16; ++l) {
        const int v = ds > 0 ? static_cast<int>(std::lround(x[j * 16 + l] / ds)) : 0;
        q[j * 16 + l] = static_cast<uint8_t>(std::clamp(v, -32, 31) + 32);
      }
    }
    for (int h = 0; h < 2; ++h) {
      const uint8_t* qq = q + h * 128;
      for (int l = 0; l < 32; ++l) {
        y[b].ql[h * 64 + l] = static_cast<uint8_t>((qq[l] & 0xf) | ((qq[l + 64] & 0xf) << 4));
        y[b].ql[h * 64 + l + 32] = static_cast<uint8_t>((qq[l + 32] & 0xf) | ((qq[l + 96] & 0xf) << 4));
        y[b].qh[h * 32 + l] = static_cast<uint8_t>((qq[l] >> 4) | ((qq[l + 32] >> 4) << 2) | ((qq[l + 64] >> 4) << 4) |
                                                   ((qq[l + 96] >> 4) << 6));
      }
    }
  }
}

void dequantize_q4_k(const BlockQ4_K* x, float* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b) {
    const float d = fp16_to_fp32(x[b].d), dmin = fp16_to_fp32(x[b].dmin);
    const uint8_t* s = x[b].scales;
    const uint8_t* q = x[b].qs;
    for (int j = 0; j < 8; ++j) {
      int sc, m;
      q4_k_scale_min(s, j, &sc, &m);
      const float ds = d * sc, dm = dmin * m;
      const uint8_t* qq = q + (j / 2) * 32;
      const int shift = (j % 2) * 4;
      for (int l = 0; l < 32; ++l) *y++ = ds * ((qq[l] >> shift) & 0xf) - dm;
    }
  }
}

void dequantize_q6_k(const BlockQ6_K* x, float* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b) {
    const float d = fp16_to_fp32(x[b].d);
    for (int h = 0; h < 2; ++h) {
      const uint8_t* ql = x[b].ql + h * 64;
      const uint8_t* qh = x[b].qh + h * 32;
      const int8_t* sc = x[b].scales + h * 8;
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16;
        const int q1 = ((ql[l] & 0xf) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q2 = ((ql[l + 32] & 0xf) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        y[l] = d * sc[is + 0] * q1;
        y[l + 32] = d * sc[is + 2] * q2;
        y[l + 64] = d * sc[is + 4] * q3;
        y[l + 96] = d * sc[is + 6] * q4;
      }
      y += 128;
    }
  }
}

}  // namespace

void quantize_row(DType t, const float* src, void* dst, int64_t n) {
  const int64_t nb = n / dtype_block_elems(t);
  PARALLM_CHECK(n % dtype_block_elems(t) == 0);
  switch (t) {
    case DType::kF32:
      std::memcpy(dst, src, static_cast<size_t>(n) * 4);
      return;
    case DType::kF16: {
      auto* d = static_cast<uint8_t*>(dst);
      for (int64_t i = 0; i < n; ++i) store_u16(d + 2 * i, fp32_to_fp16(src[i]));
      return;
    }
    case DType::kBF16: {
      auto* d = static_cast<uint8_t*>(dst);
      for (int64_t i = 0; i < n; ++i) store_u16(d + 2 * i, fp32_to_bf16(src[i]));
      return;
    }
    case DType::kQ8_0:
      quantize_q8_0(src, static_cast<BlockQ8_0*>(dst), nb);
      return;
    case DType::kQ4_0:
      quantize_q4_0(src, static_cast<BlockQ4_0*>(dst), nb);
      return;
    case DType::kQ4_K:
      quantize_q4_k(src, static_cast<BlockQ4_K*>(dst), nb);
      return;
    case DType::kQ6_K:
      quantize_q6_k(src, static_cast<BlockQ6_K*>(dst), nb);
      return;
    case DType::kQ4_1:
      quantize_q4_1(src, static_cast<BlockQ4_1*>(dst), nb);
      return;
    case DType::kQ5_0:
      quantize_q5_0(src, static_cast<BlockQ5_0*>(dst), nb);
      return;
    case DType::kQ5_1:
      quantize_q5_1(src, static_cast<BlockQ5_1*>(dst), nb);
      return;
    case DType::kIQ4_NL:
      quantize_iq4_nl(src, static_cast<BlockIQ4_NL*>(dst), nb);
      return;
    case DType::kQ2_K:
      quantize_q2_k(src, static_cast<BlockQ2_K*>(dst), nb);
      return;
    case DType::kQ3_K:
      quantize_q3_k(src, static_cast<BlockQ3_K*>(dst), nb);
      return;
    case DType::kQ5_K:
      quantize_q5_k(src, static_cast<BlockQ5_K*>(dst), nb);
      return;
    case DType::kIQ4_XS:
      quantize_iq4_xs(src, static_cast<BlockIQ4_XS*>(dst), nb);
      return;
  }
}

void dequantize_row(DType t, const void* src, float* dst, int64_t n) {
  const int64_t nb = n / dtype_block_elems(t);
  PARALLM_CHECK(n % dtype_block_elems(t) == 0);
  switch (t) {
    // NOTE: memcpy reads: rows of a column slice or a padded matrix need not
    // be aligned to their element size.
    case DType::kF32:
      std::memcpy(dst, src, static_cast<size_t>(n) * 4);
      return;
    case DType::kF16: {
      const auto* s = static_cast<const uint8_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = fp16_to_fp32(load_u16(s + 2 * i));
      return;
    }
    case DType::kBF16: {
      const auto* s = static_cast<const uint8_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_fp32(load_u16(s + 2 * i));
      return;
    }
    case DType::kQ8_0: {
      const auto* x = static_cast<const BlockQ8_0*>(src);
      for (int64_t b = 0; b < nb; ++b) {
        const float d = fp16_to_fp32(x[b].d);
        for (int j = 0; j < kQK8_0; ++j) dst[b * kQK8_0 + j] = d * x[b].qs[j];
      }
      return;
    }
    case DType::kQ4_0: {
      const auto* x = static_cast<const BlockQ4_0*>(src);
      for (int64_t b = 0; b < nb; ++b) {
        const float d = fp16_to_fp32(x[b].d);
        for (int j = 0; j < kQK4_0 / 2; ++j) {
          dst[b * kQK4_0 + j] = d * ((x[b].qs[j] & 0xf) - 8);
          dst[b * kQK4_0 + j + kQK4_0 / 2] = d * ((x[b].qs[j] >> 4) - 8);
        }
      }
      return;
    }
    case DType::kQ4_K:
      dequantize_q4_k(static_cast<const BlockQ4_K*>(src), dst, nb);
      return;
    case DType::kQ6_K:
      dequantize_q6_k(static_cast<const BlockQ6_K*>(src), dst, nb);
      return;
    case DType::kQ4_1:
      dequantize_q4_1(static_cast<const BlockQ4_1*>(src), dst, nb);
      return;
    case DType::kQ5_0:
      dequantize_q5_0(static_cast<const BlockQ5_0*>(src), dst, nb);
      return;
    case DType::kQ5_1:
      dequantize_q5_1(static_cast<const BlockQ5_1*>(src), dst, nb);
      return;
    case DType::kIQ4_NL:
      dequantize_iq4_nl(static_cast<const BlockIQ4_NL*>(src), dst, nb);
      return;
    case DType::kQ2_K:
      dequantize_q2_k(static_cast<const BlockQ2_K*>(src), dst, nb);
      return;
    case DType::kQ3_K:
      dequantize_q3_k(static_cast<const BlockQ3_K*>(src), dst, nb);
      return;
    case DType::kQ5_K:
      dequantize_q5_k(static_cast<const BlockQ5_K*>(src), dst, nb);
      return;
    case DType::kIQ4_XS:
      dequantize_iq4_xs(static_cast<const BlockIQ4_XS*>(src), dst, nb);
      return;
  }
}

}  // namespace parallm::cpu
