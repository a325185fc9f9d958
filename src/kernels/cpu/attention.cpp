// Paged attention, one work item per (query token, KV head): the item loads
// each key block once (converting f16/bf16 to f32 block-wise) and scores it
// against every query head of its GQA group, then a numerically stable
// softmax and the weighted sum of values. Scores are computed in f32 with f32
// accumulation. NOTE: the inner loops are plain C++ written so that g++
// vectorizes them; attention is a small share of the time at the context
// lengths parallm targets on CPU (see docs/PERFORMANCE.md).
#include "kernels/cpu/attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cpu/ops.h"
#include "util/check.h"

namespace parallm::cpu {

namespace {

size_t elem_bytes(DType t) { return t == DType::kF32 ? 4 : 2; }

// Pointer to the row of (slot, kv_head) in a pool.
inline const uint8_t* kv_row(const void* pool, const PagedKv& kv, int64_t slot, int64_t head) {
  size_t row = static_cast<size_t>((slot * kv.n_kv_head + head) * kv.head_dim);
  return static_cast<const uint8_t*>(pool) + row * elem_bytes(kv.dtype);
}

// Loads `n` rows of head_dim values (each `row_stride` elements apart) as f32.
inline void load_rows(float* dst, const uint8_t* src, DType t, int64_t n, int64_t head_dim, int64_t row_stride) {
  size_t eb = elem_bytes(t);
  for (int64_t r = 0; r < n; ++r) {
    const uint8_t* s = src + static_cast<size_t>(r * row_stride) * eb;
    if (t == DType::kF32) {
      std::memcpy(dst + r * head_dim, s, static_cast<size_t>(head_dim) * 4);
    } else {
      load_row_f32(t, s, dst + r * head_dim, head_dim);
    }
  }
}

}  // namespace

void kv_write(const PagedKv& kv, const float* k, const float* v, const int64_t* slots, int64_t n_tokens) {
  PARALLM_CHECK(kv.dtype == DType::kF32 || kv.dtype == DType::kF16 || kv.dtype == DType::kBF16);
  const int64_t width = kv.n_kv_head * kv.head_dim;
  const size_t eb = elem_bytes(kv.dtype);
  for (int64_t t = 0; t < n_tokens; ++t) {
    uint8_t* kd = static_cast<uint8_t*>(kv.k) + static_cast<size_t>(slots[t] * width) * eb;
    uint8_t* vd = static_cast<uint8_t*>(kv.v) + static_cast<size_t>(slots[t] * width) * eb;
    convert_row(kv.dtype, k + t * width, kd, width);
    convert_row(kv.dtype, v + t * width, vd, width);
  }
}

void paged_attention(float* out, const float* q, const PagedKv& kv, const int32_t* positions,
                     const int32_t* seq_of_token, const int32_t* const* block_tables, int64_t n_tokens,
                     int64_t n_head, float scale, ThreadPool& pool) {
  const int64_t n_kv_head = kv.n_kv_head, hd = kv.head_dim, bs = kv.block_size;
  PARALLM_CHECK(n_head % n_kv_head == 0);
  const int64_t group = n_head / n_kv_head;
  const int64_t n_items = n_tokens * n_kv_head;
  int32_t max_pos = 0;
  for (int64_t t = 0; t < n_tokens; ++t) max_pos = std::max(max_pos, positions[t]);
  const int64_t max_len = max_pos + 1;

  pool.run([&](int ti, int nt) {
    int64_t begin, end;
    ThreadPool::split(n_items, 1, ti, nt, &begin, &end);
    std::vector<float> scores(static_cast<size_t>(group * max_len));
    std::vector<float> kbuf(static_cast<size_t>(bs * hd)), vbuf(static_cast<size_t>(bs * hd));
    for (int64_t item = begin; item < end; ++item) {
      const int64_t t = item / n_kv_head, h_kv = item % n_kv_head;
      const int64_t len = positions[t] + 1;
      const int32_t* table = block_tables[seq_of_token[t]];
      const float* qg = q + (t * n_head + h_kv * group) * hd;  // [group, hd]
      // Scores.
      for (int64_t p0 = 0; p0 < len; p0 += bs) {
        const int64_t n = std::min(bs, len - p0);
        const int64_t slot0 = static_cast<int64_t>(table[p0 / bs]) * bs;
        load_rows(kbuf.data(), kv_row(kv.k, kv, slot0, h_kv), kv.dtype, n, hd, n_kv_head * hd);
        for (int64_t g = 0; g < group; ++g) {
          const float* qh = qg + g * hd;
          float* sc = scores.data() + g * max_len + p0;
          for (int64_t r = 0; r < n; ++r) {
            const float* kr = kbuf.data() + r * hd;
            float acc = 0.f;
            for (int64_t d = 0; d < hd; ++d) acc += qh[d] * kr[d];
            sc[r] = acc * scale;
          }
        }
      }
      // Softmax per query head.
      for (int64_t g = 0; g < group; ++g) {
        float* sc = scores.data() + g * max_len;
        float mx = sc[0];
        for (int64_t p = 1; p < len; ++p) mx = std::max(mx, sc[p]);
        float sum = 0.f;
        for (int64_t p = 0; p < len; ++p) {
          sc[p] = std::exp(sc[p] - mx);
          sum += sc[p];
        }
        const float inv = 1.f / sum;
        for (int64_t p = 0; p < len; ++p) sc[p] *= inv;
      }
      // Weighted sum of values.
      float* og = out + (t * n_head + h_kv * group) * hd;
      std::fill(og, og + group * hd, 0.f);
      for (int64_t p0 = 0; p0 < len; p0 += bs) {
        const int64_t n = std::min(bs, len - p0);
        const int64_t slot0 = static_cast<int64_t>(table[p0 / bs]) * bs;
        load_rows(vbuf.data(), kv_row(kv.v, kv, slot0, h_kv), kv.dtype, n, hd, n_kv_head * hd);
        for (int64_t g = 0; g < group; ++g) {
          const float* sc = scores.data() + g * max_len + p0;
          float* oh = og + g * hd;
          for (int64_t r = 0; r < n; ++r) {
            const float w = sc[r];
            const float* vr = vbuf.data() + r * hd;
            for (int64_t d = 0; d < hd; ++d) oh[d] += w * vr[d];
          }
        }
      }
    }
  });
}

}  // namespace parallm::cpu
