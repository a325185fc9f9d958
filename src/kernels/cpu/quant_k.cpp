// Reference conversions of the 256-element super-block types q2_k, q3_k,
// q5_k and iq4_xs (layouts in core/dtype.h, formulas and accuracy in quant.h).
// The quantizers are two-level round-to-nearest fits: each sub-block's own
// scale (and min) first, then the super-block scale that codes those in the
// layout's few bits, then the quants against the scales as stored.
#include <algorithm>
#include <cmath>

#include "kernels/cpu/quant_blocks.h"

namespace parallm::cpu {

namespace {

inline float as_stored(float v, uint16_t* h) {
  *h = fp32_to_fp16(v);
  return fp16_to_fp32(*h);
}

inline int clamp_round(float v, int lo, int hi) { return static_cast<int>(std::clamp<long>(std::lround(v), lo, hi)); }

// The value of largest magnitude, with its sign.
float signed_amax(const float* x, int n) {
  float amax = 0.0f, mx = 0.0f;
  for (int j = 0; j < n; ++j) {
    if (std::fabs(x[j]) > amax) {
      amax = std::fabs(x[j]);
      mx = x[j];
    }
  }
  return mx;
}

// For w = scale * q - min with q in [0, levels-1] and min >= 0: the min/max
// fit of n values (the minimum is clamped to <= 0, so that min >= 0).
// NOTE: also trying narrower ranges that clip the extremes (7 widths x 2
// placements, least squared error per sub-block) left q2_k's and q5_k's
// round-trip errors on normal rows unchanged (0.327 and 0.037 of the RMS)
// for 14 trial passes; not kept.
void fit_scale_min(const float* x, int n, int levels, float* scale, float* min) {
  float lo = 0.0f, hi = x[0];
  for (int j = 0; j < n; ++j) {
    lo = std::min(lo, x[j]);
    hi = std::max(hi, x[j]);
  }
  *scale = (hi - lo) / static_cast<float>(levels - 1);
  *min = -lo;
}

// Affine super-blocks (q2_k: 16 x 16, 4-bit sc/m; q5_k: 8 x 32, 6-bit):
// codes sub-block scales and mins against d and dmin (stored), and the
// quants q[256] in [0, levels-1] against the coded values.
template <int kSub>
void fit_affine(const float* x, int levels, int code_max, uint16_t* dh, uint16_t* dminh, uint8_t* sc, uint8_t* m,
                uint8_t* q) {
  constexpr int kN = kQK_K / kSub;
  float scale[kSub], minv[kSub];
  for (int j = 0; j < kSub; ++j) fit_scale_min(x + j * kN, kN, levels, &scale[j], &minv[j]);
  const float d = as_stored(*std::max_element(scale, scale + kSub) / code_max, dh);
  const float dmin = as_stored(*std::max_element(minv, minv + kSub) / code_max, dminh);
  for (int j = 0; j < kSub; ++j) {
    sc[j] = static_cast<uint8_t>(d > 0 ? clamp_round(scale[j] / d, 0, code_max) : 0);
    m[j] = static_cast<uint8_t>(dmin > 0 ? clamp_round(minv[j] / dmin, 0, code_max) : 0);
    const float ds = d * sc[j], dm = dmin * m[j];
    for (int l = 0; l < kN; ++l) {
      q[j * kN + l] = static_cast<uint8_t>(ds > 0 ? clamp_round((x[j * kN + l] + dm) / ds, 0, levels - 1) : 0);
    }
  }
}

// 2-bit fields of element 128*h + 32*k + l (l < 32) at bits 2k of qs[32h + l].
void pack_2bit(const uint8_t* q, uint8_t* qs) {
  std::fill(qs, qs + kQK_K / 4, 0);
  for (int i = 0; i < kQK_K; ++i)
    qs[32 * (i / 128) + i % 32] |= static_cast<uint8_t>((q[i] & 3) << (2 * ((i % 128) / 32)));
}
inline int field_2bit(const uint8_t* qs, int i) { return (qs[32 * (i / 128) + i % 32] >> (2 * ((i % 128) / 32))) & 3; }

}  // namespace

void pack_scale_min_k4(const uint8_t* sc, const uint8_t* m, uint8_t* scales) {
  for (int j = 0; j < 4; ++j) {
    scales[j] = static_cast<uint8_t>((sc[j] & 63) | ((sc[j + 4] >> 4) << 6));
    scales[j + 4] = static_cast<uint8_t>((m[j] & 63) | ((m[j + 4] >> 4) << 6));
    scales[j + 8] = static_cast<uint8_t>((sc[j + 4] & 0xf) | ((m[j + 4] & 0xf) << 4));
  }
}

void quantize_q2_k(const float* x, BlockQ2_K* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, x += kQK_K) {
    uint8_t sc[16], m[16], q[kQK_K];
    fit_affine<16>(x, 4, 15, &y[b].d, &y[b].dmin, sc, m, q);
    for (int j = 0; j < 16; ++j) y[b].scales[j] = static_cast<uint8_t>(sc[j] | (m[j] << 4));
    pack_2bit(q, y[b].qs);
  }
}

void quantize_q5_k(const float* x, BlockQ5_K* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, x += kQK_K) {
    uint8_t sc[8], m[8], q[kQK_K];
    fit_affine<8>(x, 32, 63, &y[b].d, &y[b].dmin, sc, m, q);
    pack_scale_min_k4(sc, m, y[b].scales);
    std::fill(y[b].qh, y[b].qh + 32, 0);
    for (int i = 0; i < kQK_K; ++i) {
      const int j = i / 32, l = i % 32;
      uint8_t& byte = y[b].qs[32 * (j / 2) + l];
      if (j % 2 == 0) byte = static_cast<uint8_t>(q[i] & 0xf);
      if (j % 2 == 1) byte = static_cast<uint8_t>(byte | ((q[i] & 0xf) << 4));
      y[b].qh[l] = static_cast<uint8_t>(y[b].qh[l] | ((q[i] >> 4) << j));
    }
  }
}

// Symmetric: each 16-value sub-block's largest magnitude maps to -4, the
// sub-block scales to 6 signed bits against d (the largest one to -32).
void quantize_q3_k(const float* x, BlockQ3_K* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, x += kQK_K) {
    float s[16];
    for (int j = 0; j < 16; ++j) s[j] = signed_amax(x + 16 * j, 16) / -4.0f;
    const float d = as_stored(signed_amax(s, 16) / -32.0f, &y[b].d);
    std::fill(y[b].scales, y[b].scales + 12, 0);
    std::fill(y[b].hmask, y[b].hmask + 32, 0);
    uint8_t q[kQK_K];
    for (int j = 0; j < 16; ++j) {
      const int sc = d != 0.0f ? clamp_round(s[j] / d, -32, 31) : 0;
      const int v = sc + 32;
      y[b].scales[j % 8] = static_cast<uint8_t>(y[b].scales[j % 8] | ((v & 0xf) << (4 * (j / 8))));
      y[b].scales[8 + j % 4] = static_cast<uint8_t>(y[b].scales[8 + j % 4] | ((v >> 4) << (2 * (j / 4))));
      const float ds = d * sc;
      for (int l = 0; l < 16; ++l)
        q[16 * j + l] = static_cast<uint8_t>((ds != 0.0f ? clamp_round(x[16 * j + l] / ds, -4, 3) : 0) + 4);
    }
    pack_2bit(q, y[b].qs);
    for (int i = 0; i < kQK_K; ++i)
      y[b].hmask[i % 32] = static_cast<uint8_t>(y[b].hmask[i % 32] | ((q[i] >> 2) << (i / 32)));
  }
}

// Each 32-value sub-block's IQ4_NL scale (fit_iq4nl), coded in 6 signed bits
// against d (the largest one to -32), then the levels for the coded scale.
void quantize_iq4_xs(const float* x, BlockIQ4_XS* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, x += kQK_K) {
    float s[8];
    uint8_t idx[32];
    for (int j = 0; j < 8; ++j) s[j] = fit_iq4nl(x + 32 * j, 32, idx);
    const float d = as_stored(signed_amax(s, 8) / -32.0f, &y[b].d);
    y[b].scales_h = 0;
    std::fill(y[b].scales_l, y[b].scales_l + 4, 0);
    for (int j = 0; j < 8; ++j) {
      const int sc = d != 0.0f ? clamp_round(s[j] / d, -32, 31) : 0;
      const int v = sc + 32;
      y[b].scales_l[j / 2] = static_cast<uint8_t>(y[b].scales_l[j / 2] | ((v & 0xf) << (4 * (j % 2))));
      y[b].scales_h = static_cast<uint16_t>(y[b].scales_h | ((v >> 4) << (2 * j)));
      const float dl = d * sc, id = dl != 0.0f ? 1.0f / dl : 0.0f;
      for (int l = 0; l < 32; ++l) idx[l] = static_cast<uint8_t>(nearest_iq4nl(x[32 * j + l] * id));
      for (int l = 0; l < 16; ++l) y[b].qs[16 * j + l] = static_cast<uint8_t>(idx[l] | (idx[l + 16] << 4));
    }
  }
}

void dequantize_q2_k(const BlockQ2_K* x, float* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, y += kQK_K) {
    const float d = fp16_to_fp32(x[b].d), dmin = fp16_to_fp32(x[b].dmin);
    for (int i = 0; i < kQK_K; ++i) {
      const uint8_t s = x[b].scales[i / 16];
      y[i] = d * (s & 0xf) * field_2bit(x[b].qs, i) - dmin * (s >> 4);
    }
  }
}

void dequantize_q3_k(const BlockQ3_K* x, float* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, y += kQK_K) {
    const float d = fp16_to_fp32(x[b].d);
    for (int j = 0; j < 16; ++j) {
      const float ds = d * (q3_k_scale(x[b].scales, j) - 32);
      for (int l = 0; l < 16; ++l) {
        const int i = 16 * j + l;
        const int hi = (x[b].hmask[i % 32] >> (i / 32)) & 1;
        y[i] = ds * (field_2bit(x[b].qs, i) - (hi ? 0 : 4));
      }
    }
  }
}

void dequantize_q5_k(const BlockQ5_K* x, float* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, y += kQK_K) {
    const float d = fp16_to_fp32(x[b].d), dmin = fp16_to_fp32(x[b].dmin);
    for (int j = 0; j < 8; ++j) {
      int sc, m;
      q4_k_scale_min(x[b].scales, j, &sc, &m);
      const float ds = d * sc, dm = dmin * m;
      for (int l = 0; l < 32; ++l) {
        const int lo = (x[b].qs[32 * (j / 2) + l] >> (4 * (j % 2))) & 0xf;
        const int hi = (x[b].qh[l] >> j) & 1;
        y[32 * j + l] = ds * (lo | (hi << 4)) - dm;
      }
    }
  }
}

void dequantize_iq4_xs(const BlockIQ4_XS* x, float* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, y += kQK_K) {
    const float d = fp16_to_fp32(x[b].d);
    for (int j = 0; j < 8; ++j) {
      const float dl = d * (iq4_xs_scale(x[b], j) - 32);
      const uint8_t* qs = x[b].qs + 16 * j;
      for (int l = 0; l < 16; ++l) {
        y[32 * j + l] = dl * kIq4nlValues[qs[l] & 0xf];
        y[32 * j + l + 16] = dl * kIq4nlValues[qs[l] >> 4];
      }
    }
  }
}

}  // namespace parallm::cpu
