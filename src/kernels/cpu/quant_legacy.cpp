// Reference conversions of the 32-element block types q4_1, q5_0, q5_1 and
// iq4_nl (layouts in core/dtype.h, formulas and accuracy in quant.h).
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <iterator>

#include "kernels/cpu/quant_blocks.h"

namespace parallm::cpu {

namespace {

constexpr int kBlock = 32;

// Rounds to the f16 the block stores and back, so that the quants are fitted
// to the scale the dequantizer will see.
inline float as_stored(float v, uint16_t* h) {
  *h = fp32_to_fp16(v);
  return fp16_to_fp32(*h);
}

// q[j] in 0..2^bits-1 for x ~= d * q + m (a min/max fit: m = the minimum).
void fit_min_max(const float* x, int levels, uint16_t* dh, uint16_t* mh, uint8_t* q) {
  float lo = x[0], hi = x[0];
  for (int j = 1; j < kBlock; ++j) {
    lo = std::min(lo, x[j]);
    hi = std::max(hi, x[j]);
  }
  const float d = as_stored((hi - lo) / static_cast<float>(levels - 1), dh);
  const float m = as_stored(lo, mh);
  for (int j = 0; j < kBlock; ++j) {
    const long v = d > 0 ? std::lround((x[j] - m) / d) : 0;
    q[j] = static_cast<uint8_t>(std::clamp<long>(v, 0, levels - 1));
  }
}

// Element j < 16 in the low nibble of qs[j], j >= 16 in the high nibble of qs[j - 16].
void pack_nibbles(const uint8_t* q, uint8_t* qs) {
  for (int j = 0; j < kBlock / 2; ++j) qs[j] = static_cast<uint8_t>((q[j] & 0xf) | ((q[j + kBlock / 2] & 0xf) << 4));
}
inline int nibble(const uint8_t* qs, int j) { return j < kBlock / 2 ? qs[j] & 0xf : qs[j - kBlock / 2] >> 4; }

// Bit 4 of element j at bit j of a little-endian uint32.
void pack_high_bits(const uint8_t* q, uint8_t* qh) {
  uint32_t h = 0;
  for (int j = 0; j < kBlock; ++j) h |= static_cast<uint32_t>((q[j] >> 4) & 1) << j;
  for (int k = 0; k < 4; ++k) qh[k] = static_cast<uint8_t>(h >> (8 * k));
}
inline int high_bit(const uint8_t* qh, int j) { return (qh[j / 8] >> (j % 8)) & 1; }

// The IQ4_NL levels' midpoints: level i is nearest for v in [mid[i-1], mid[i]).
constexpr auto kIq4nlMid = [] {
  std::array<float, 15> m{};
  for (int i = 0; i < 15; ++i) m[i] = 0.5f * (kIq4nlValues[i] + kIq4nlValues[i + 1]);
  return m;
}();

}  // namespace

int nearest_iq4nl(float v) {
  return static_cast<int>(std::upper_bound(kIq4nlMid.begin(), kIq4nlMid.end(), v) - kIq4nlMid.begin());
}

float fit_iq4nl(const float* x, int n, uint8_t* idx) {
  float amax = 0.0f, mx = 0.0f;
  for (int j = 0; j < n; ++j) {
    if (std::fabs(x[j]) > amax) {
      amax = std::fabs(x[j]);
      mx = x[j];
    }
  }
  if (amax == 0.0f) {
    std::fill(idx, idx + n, static_cast<uint8_t>(nearest_iq4nl(0.0f)));
    return 0.0f;
  }
  // The largest magnitude mapped onto either end of the codebook or a little
  // inside it (the levels are sparse at the ends, so a smaller scale often
  // fits the bulk of the values better).
  constexpr float kTargets[] = {-127, -121, -115, -109, -103, 113, 107, 101};
  float best_d = 0.0f, best_err = INFINITY;
  for (float t : kTargets) {
    const float d = mx / t, id = 1.0f / d;
    float err = 0.0f;
    for (int j = 0; j < n; ++j) {
      const float e = x[j] - d * kIq4nlValues[nearest_iq4nl(x[j] * id)];
      err += e * e;
    }
    if (err < best_err) {
      best_err = err;
      best_d = d;
    }
  }
  const float id = 1.0f / best_d;
  for (int j = 0; j < n; ++j) idx[j] = static_cast<uint8_t>(nearest_iq4nl(x[j] * id));
  return best_d;
}

void quantize_q4_1(const float* x, BlockQ4_1* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, x += kBlock) {
    uint8_t q[kBlock];
    fit_min_max(x, 16, &y[b].d, &y[b].m, q);
    pack_nibbles(q, y[b].qs);
  }
}

void quantize_q5_1(const float* x, BlockQ5_1* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, x += kBlock) {
    uint8_t q[kBlock];
    fit_min_max(x, 32, &y[b].d, &y[b].m, q);
    pack_nibbles(q, y[b].qs);
    pack_high_bits(q, y[b].qh);
  }
}

// Symmetric like q4_0: the value of largest magnitude maps to -16.
void quantize_q5_0(const float* x, BlockQ5_0* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, x += kBlock) {
    float amax = 0.0f, mx = 0.0f;
    for (int j = 0; j < kBlock; ++j) {
      if (std::fabs(x[j]) > amax) {
        amax = std::fabs(x[j]);
        mx = x[j];
      }
    }
    const float d = as_stored(mx / -16.0f, &y[b].d);
    uint8_t q[kBlock];
    for (int j = 0; j < kBlock; ++j) {
      const long v = d != 0.0f ? std::lround(x[j] / d) : 0;
      q[j] = static_cast<uint8_t>(std::clamp<long>(v + 16, 0, 31));
    }
    pack_nibbles(q, y[b].qs);
    pack_high_bits(q, y[b].qh);
  }
}

void quantize_iq4_nl(const float* x, BlockIQ4_NL* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, x += kBlock) {
    uint8_t q[kBlock];
    const float d = as_stored(fit_iq4nl(x, kBlock, q), &y[b].d);
    // Levels again for the stored scale.
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    for (int j = 0; j < kBlock; ++j) q[j] = static_cast<uint8_t>(nearest_iq4nl(x[j] * id));
    pack_nibbles(q, y[b].qs);
  }
}

void dequantize_q4_1(const BlockQ4_1* x, float* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, y += kBlock) {
    const float d = fp16_to_fp32(x[b].d), m = fp16_to_fp32(x[b].m);
    for (int j = 0; j < kBlock; ++j) y[j] = d * nibble(x[b].qs, j) + m;
  }
}

void dequantize_q5_0(const BlockQ5_0* x, float* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, y += kBlock) {
    const float d = fp16_to_fp32(x[b].d);
    for (int j = 0; j < kBlock; ++j) y[j] = d * ((nibble(x[b].qs, j) | (high_bit(x[b].qh, j) << 4)) - 16);
  }
}

void dequantize_q5_1(const BlockQ5_1* x, float* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, y += kBlock) {
    const float d = fp16_to_fp32(x[b].d), m = fp16_to_fp32(x[b].m);
    for (int j = 0; j < kBlock; ++j) y[j] = d * (nibble(x[b].qs, j) | (high_bit(x[b].qh, j) << 4)) + m;
  }
}

void dequantize_iq4_nl(const BlockIQ4_NL* x, float* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, y += kBlock) {
    const float d = fp16_to_fp32(x[b].d);
    for (int j = 0; j < kBlock; ++j) y[j] = d * kIq4nlValues[nibble(x[b].qs, j)];
  }
}

}  // namespace parallm::cpu
