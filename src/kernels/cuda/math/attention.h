// Per-item math of paged attention (kernels/cuda/attention.h), shared by the
// CUDA kernel and its emulation so both compute the same operations in the
// same order. The kernel's shape (attention.cu), which the emulation loops
// over:
//   one block of kAttnWarps warps per (token, query head); the keys the token
//   sees, [lo, len), are cut into tiles of kAttnTile = 32 starting at lo, and
//   warp w takes tiles w, w + kAttnWarps, ...
//   in a tile lane j scores key p0 + j against the whole query row
//   (attn_key_score), the warp takes the tile's max (order-free) and the sum
//   of its weights in the butterfly order of attn_lane_tree_sum, and updates
//   its online-softmax state (AttnRunning: running max m, sum of weights l)
//   and, per lane, the accumulators of the value dims it owns (pairs lane,
//   lane + 32, ...): rescaled once per tile, then weight * value added in key
//   order
//   at the end the warps' states meet in warp order (attn_combined_*).
// Every multiply-add is an explicit fmaf and every other product an
// mul_rn, so nvcc's contraction cannot make the device's arithmetic
// differ from the host's; what still differs is expf / tanhf (CUDA's are
// within 2 ulp), so the two agree to a few f32 ulps.
#pragma once
#include "core/dtype.h"
#include "kernels/cuda/math/hd.h"
#include "kernels/cuda/math/kv_cache.h"

namespace parallm::cuda {

constexpr int kAttnWarps = 4;                                // warps per (token, query head) block
constexpr int kAttnThreads = kAttnWarps * 32;                // threads per block
constexpr int kAttnTile = 32;                                // keys per warp tile: one per lane
constexpr int kAttnMaxHeadDim = 256;                         // head_dim: even, at most this
constexpr int kAttnPairsPerLane = kAttnMaxHeadDim / 2 / 32;  // value dim pairs a lane owns

// Four bytes / two floats at p, which the caller has aligned (4 / 8 bytes):
// one load on the device, memcpy on the host (no aliasing questions).
PARALLM_HD inline uint32_t attn_load_u32(const uint8_t* p) {
#if defined(__CUDA_ARCH__)
  return *reinterpret_cast<const uint32_t*>(p);
#else
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
#endif
}
PARALLM_HD inline uint16_t attn_load_u16(const uint8_t* p) {
#if defined(__CUDA_ARCH__)
  return *reinterpret_cast<const uint16_t*>(p);
#else
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
#endif
}
PARALLM_HD inline void attn_load_f32_pair(const uint8_t* p, float* a, float* b) {
#if defined(__CUDA_ARCH__)
  const float2 f = *reinterpret_cast<const float2*>(p);
  *a = f.x;
  *b = f.y;
#else
  std::memcpy(a, p, 4);
  std::memcpy(b, p + 4, 4);
#endif
}

// f16 -> f32 is exact, so the device's conversion instruction gives hd.h's
// integer decode bit for bit, in one instruction instead of a dozen.
PARALLM_HD inline float attn_f16_to_f32(uint16_t h) {
#if defined(__CUDA_ARCH__)
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return f;
#else
  return f16_to_f32(h);
#endif
}

// The int8 dot product of four packed bytes each, added to c (exact).
PARALLM_HD inline int32_t attn_dot4_i8(uint32_t a, uint32_t b, int32_t c) {
#if defined(__CUDA_ARCH__)
  return __dp4a(static_cast<int>(a), static_cast<int>(b), c);
#else
  for (int i = 0; i < 4; ++i) {
    c += static_cast<int32_t>(static_cast<int8_t>(a >> (8 * i))) *
         static_cast<int32_t>(static_cast<int8_t>(b >> (8 * i)));
  }
  return c;
#endif
}

// Values 2i and 2i + 1 of row `row` of an f32 / f16 / bf16 chunk, widened.
template <DType T>
PARALLM_HD inline void kv_load_pair(const uint8_t* chunk, int64_t row, int64_t head_dim, int64_t i, float* a,
                                    float* b) {
  if constexpr (T == DType::kF32) {
    attn_load_f32_pair(chunk + (row * head_dim + 2 * i) * 4, a, b);
  } else {
    const uint32_t w = attn_load_u32(chunk + (row * head_dim + 2 * i) * 2);
    if constexpr (T == DType::kF16) {
      *a = attn_f16_to_f32(static_cast<uint16_t>(w & 0xffffu));
      *b = attn_f16_to_f32(static_cast<uint16_t>(w >> 16));
    } else {
      *a = bf16_to_f32(static_cast<uint16_t>(w & 0xffffu));
      *b = bf16_to_f32(static_cast<uint16_t>(w >> 16));
    }
  }
}

// Values 2i and 2i + 1 of row `row` of a q8_0 chunk, d * q as the CPU widens
// them (one pair never straddles two 32-value blocks: 2i is even).
PARALLM_HD inline void kv_load_pair_q8_0(const uint8_t* chunk, int64_t row, int64_t block_size, int64_t head_dim,
                                         int64_t i, float* a, float* b) {
  const uint16_t q2 = attn_load_u16(chunk + row * head_dim + 2 * i);
  const float d =
      attn_f16_to_f32(attn_load_u16(chunk + block_size * head_dim + ((2 * i / kQK8_0) * block_size + row) * 2));
  *a = mul_rn(d, static_cast<float>(static_cast<int8_t>(q2 & 0xffu)));
  *b = mul_rn(d, static_cast<float>(static_cast<int8_t>(q2 >> 8)));
}

// A query row as the scores read it: q [head_dim] f32 for f32 / f16 / bf16
// caches; for q8_0 its quants qq [head_dim] (4-byte aligned) and per 32
// values the f16-rounded scale, widened, qd [head_dim / 32] (the query is
// rounded through q8_0 like the keys, as the CPU kernel does).
struct AttnQuery {
  const float* q;
  const int8_t* qq;
  const float* qd;
};

// Block b of a query row for a q8_0 cache: x [32] -> qq [32], qd.
PARALLM_HD inline void attn_quantize_query_block(const float* x, int8_t* qq, float* qd) {
  *qd = f16_to_f32(kv_q8_0_quantize_block(x, qq));
}

// The dot product of the query with row `row` of a key chunk of cache type T
// (T != q8_0): four chains over the value pairs, pair i into chains
// (2 (i % 2), 2 (i % 2) + 1), summed (c0 + c1) + (c2 + c3).
template <DType T>
PARALLM_HD inline float attn_key_dot(const float* q, const uint8_t* chunk, int64_t row, int64_t head_dim) {
  float c0 = 0.0f, c1 = 0.0f, c2 = 0.0f, c3 = 0.0f;
  const int64_t n_pairs = head_dim / 2;
  int64_t i = 0;
  for (; i + 2 <= n_pairs; i += 2) {
    float a, b;
    kv_load_pair<T>(chunk, row, head_dim, i, &a, &b);
    c0 = fmaf(q[2 * i], a, c0);
    c1 = fmaf(q[2 * i + 1], b, c1);
    kv_load_pair<T>(chunk, row, head_dim, i + 1, &a, &b);
    c2 = fmaf(q[2 * i + 2], a, c2);
    c3 = fmaf(q[2 * i + 3], b, c3);
  }
  if (i < n_pairs) {
    float a, b;
    kv_load_pair<T>(chunk, row, head_dim, i, &a, &b);
    c0 = fmaf(q[2 * i], a, c0);
    c1 = fmaf(q[2 * i + 1], b, c1);
  }
  return (c0 + c1) + (c2 + c3);
}

// q8_0: per 32-value block the exact integer dot of the quants, then
// sum += (qd * kd) * isum in block order (isum <= 32 * 128 * 128 < 2^24:
// exact in f32).
PARALLM_HD inline float attn_key_dot_q8_0(const int8_t* qq, const float* qd, const uint8_t* chunk, int64_t row,
                                          int64_t block_size, int64_t head_dim) {
  const uint8_t* kq = chunk + row * head_dim;
  const uint8_t* ks = chunk + block_size * head_dim;
  const auto* qb = reinterpret_cast<const uint8_t*>(qq);
  float sum = 0.0f;
  for (int64_t b = 0; b < head_dim / kQK8_0; ++b) {
    int32_t isum = 0;
    for (int w = 0; w < kQK8_0 / 4; ++w) {
      isum = attn_dot4_i8(attn_load_u32(qb + b * kQK8_0 + 4 * w), attn_load_u32(kq + b * kQK8_0 + 4 * w), isum);
    }
    const float kd = attn_f16_to_f32(attn_load_u16(ks + (b * block_size + row) * 2));
    sum = fmaf(mul_rn(qd[b], kd), static_cast<float>(isum), sum);
  }
  return sum;
}

// A raw dot product -> the score the softmax sees: times the scale, then
// soft-capped (cpu::AttendLimits' rule) when softcap > 0.
PARALLM_HD inline float attn_score(float dot, float scale, float softcap) {
  const float s = mul_rn(dot, scale);
  return softcap > 0.0f ? mul_rn(softcap, tanhf(s / softcap)) : s;
}

// The first key a token sees among its len (positions 0..len - 1) under a
// sliding window of `window` positions, its own included (0 = all): keys
// [attn_first_key, len).
PARALLM_HD inline int64_t attn_first_key(int64_t len, int64_t window) {
  return window > 0 && len > window ? len - window : 0;
}

// Where key p's row of kv head h_kv lives: its chunk (through the
// sequence's block table) and its row there. 32-bit division: positions are
// int32, and 64-bit division is a long instruction sequence on the device.
struct AttnRow {
  const uint8_t* chunk;
  int64_t row;
};
PARALLM_HD inline AttnRow attn_row(const void* pool, const int32_t* table, int64_t p, int64_t h_kv, int64_t n_kv_head,
                                   int64_t block_size, int64_t row_bytes) {
  const auto p32 = static_cast<int32_t>(p), bs32 = static_cast<int32_t>(block_size);
  return {kv_chunk(pool, table[p32 / bs32], h_kv, n_kv_head, block_size, row_bytes), p32 % bs32};
}

// The score of the key at r (one lane of a tile).
template <DType T>
PARALLM_HD inline float attn_key_score(const AttnQuery& q, AttnRow r, int64_t block_size, int64_t head_dim, float scale,
                                       float softcap) {
  float dot;
  if constexpr (T == DType::kQ8_0) {
    dot = attn_key_dot_q8_0(q.qq, q.qd, r.chunk, r.row, block_size, head_dim);
  } else {
    dot = attn_key_dot<T>(q.q, r.chunk, r.row, head_dim);
  }
  return attn_score(dot, scale, softcap);
}

// Value pair i (dims 2i, 2i + 1) of the value row at r, widened.
template <DType T>
PARALLM_HD inline void attn_value_pair(AttnRow r, int64_t block_size, int64_t head_dim, int64_t i, float* a, float* b) {
  if constexpr (T == DType::kQ8_0) {
    kv_load_pair_q8_0(r.chunk, r.row, block_size, head_dim, i, a, b);
  } else {
    kv_load_pair<T>(r.chunk, r.row, head_dim, i, a, b);
  }
}

// The warp's butterfly sum (shuffle-xor 16, 8, 4, 2, 1) of one value per
// lane, as a halving tree over v [32] (overwritten): step s adds v[j + s]
// into v[j], which is what lane j < s computes; every lane ends with v[0]
// (IEEE addition commutes, so lane j and lane j ^ s hold the same sum).
PARALLM_HD inline float attn_lane_tree_sum(float* v) {
  for (int s = kAttnTile / 2; s > 0; s /= 2) {
    for (int j = 0; j < s; ++j) v[j] = v[j] + v[j + s];
  }
  return v[0];
}

// One warp's running softmax over the tiles it has seen.
struct AttnRunning {
  float m;  // the largest score so far (-inf: none yet)
  float l;  // the sum of exp(score - m)
};

// A tile whose largest score is tile_max: the new max, and the factor that
// rescales what was summed under the old one (0 before the first tile).
PARALLM_HD inline float attn_new_max(const AttnRunning& r, float tile_max) { return fmaxf(r.m, tile_max); }
PARALLM_HD inline float attn_rescale(const AttnRunning& r, float m_new) {
  return r.m == -INFINITY ? 0.0f : expf(r.m - m_new);
}
// Lane j's weight: exp(score - m_new), 0 for a lane past the tile's keys.
PARALLM_HD inline float attn_weight(float score, bool valid, float m_new) { return valid ? expf(score - m_new) : 0.0f; }
PARALLM_HD inline void attn_running_update(AttnRunning* r, float m_new, float rescale, float tile_sum) {
  r->l = fmaf(r->l, rescale, tile_sum);
  r->m = m_new;
}

// The warps' states [kAttnWarps] meet in warp order: the max of the maxes,
// and each warp's factor to it (0 for a warp that saw no key).
PARALLM_HD inline float attn_combined_max(const float* m) {
  float mx = -INFINITY;
  for (int w = 0; w < kAttnWarps; ++w) mx = fmaxf(mx, m[w]);
  return mx;
}
PARALLM_HD inline float attn_warp_factor(float m_w, float m_all) { return m_w == -INFINITY ? 0.0f : expf(m_w - m_all); }
PARALLM_HD inline float attn_combined_sum(const float* l, const float* factor) {
  float sum = 0.0f;
  for (int w = 0; w < kAttnWarps; ++w) sum = fmaf(l[w], factor[w], sum);
  return sum;
}
// Output dim d: acc [kAttnWarps][kAttnMaxHeadDim] the warps' accumulators.
// A token with no keys at all (it cannot have: its own position is one)
// would write 0, not 0 / 0.
PARALLM_HD inline float attn_combined_out(const float* acc, const float* factor, float sum, int64_t d) {
  float o = 0.0f;
  for (int w = 0; w < kAttnWarps; ++w) o = fmaf(acc[w * kAttnMaxHeadDim + d], factor[w], o);
  return sum > 0.0f ? o / sum : 0.0f;
}

}  // namespace parallm::cuda
