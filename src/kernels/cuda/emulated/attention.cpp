// Emulated paged attention: attention.cu's grid on the host. Per (token,
// query head) the query row is prepared as the block prepares it in shared
// memory; then each of the kAttnWarps warps in turn runs its tiles (lanes
// in lane order for the scores, the weights' sum through the butterfly's
// tree, each value dim's accumulator in key order), and the warps' states
// meet as at the kernel's end. All arithmetic is math/attention.h's.
#include "kernels/cuda/attention.h"

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "kernels/cuda/attention_checks.h"
#include "kernels/cuda/emulated/launchers.h"
#include "kernels/cuda/math/attention.h"

namespace parallm::cuda::emulated {

static_assert(std::is_same_v<decltype(&paged_attention), decltype(&cuda::paged_attention)>);

namespace {

// out, q: [n_tokens, n_head, head_dim]; the rest as paged_attention's.
template <DType T>
void attend_all(float* out, const float* q, const PagedKv& kv, const int32_t* positions, const int32_t* seq_of_token,
                const int32_t* block_tables, int64_t max_blocks_per_seq, int64_t n_tokens, int64_t n_head, float scale,
                AttendLimits limits) {
  const int64_t hd = kv.head_dim, bs = kv.block_size, n_pairs = hd / 2;
  const int64_t row_bytes = kv_row_bytes_of(T, hd);
  // The block's shared memory.
  float q_f32[kAttnMaxHeadDim];
  alignas(16) int8_t q_q8[kAttnMaxHeadDim];
  float q_d[kAttnMaxHeadDim / kQK8_0];
  float warp_m[kAttnWarps], warp_l[kAttnWarps];
  static thread_local float warp_acc[kAttnWarps * kAttnMaxHeadDim];
  // One warp's lanes.
  float s[kAttnTile], w[kAttnTile], tree[kAttnTile];
  float acc[kAttnMaxHeadDim];

  for (int64_t item = 0; item < n_tokens * n_head; ++item) {
    const int64_t t = item / n_head, h = item % n_head;
    const int64_t h_kv = h / (n_head / kv.n_kv_head);
    std::copy(q + (t * n_head + h) * hd, q + (t * n_head + h + 1) * hd, q_f32);
    if constexpr (T == DType::kQ8_0) {
      for (int64_t b = 0; b < hd / kQK8_0; ++b) {
        attn_quantize_query_block(q_f32 + b * kQK8_0, q_q8 + b * kQK8_0, q_d + b);
      }
    }
    const AttnQuery query{q_f32, q_q8, q_d};

    const int64_t len = static_cast<int64_t>(positions[t]) + 1;
    const int32_t* table = block_tables + static_cast<int64_t>(seq_of_token[t]) * max_blocks_per_seq;
    const int64_t lo = attn_first_key(len, limits.window);
    const int64_t n_tiles = len > lo ? (len - lo + kAttnTile - 1) / kAttnTile : 0;

    for (int warp = 0; warp < kAttnWarps; ++warp) {
      AttnRunning run{-INFINITY, 0.0f};
      std::fill(acc, acc + hd, 0.0f);
      for (int64_t tile = warp; tile < n_tiles; tile += kAttnWarps) {
        const int64_t p0 = lo + tile * kAttnTile;
        const int n = static_cast<int>(std::min<int64_t>(kAttnTile, len - p0));
        float tile_max = -INFINITY;
        for (int j = 0; j < kAttnTile; ++j) {
          s[j] = -INFINITY;
          if (j < n) {
            const AttnRow r = attn_row(kv.k, table, p0 + j, h_kv, kv.n_kv_head, bs, row_bytes);
            s[j] = attn_key_score<T>(query, r, bs, hd, scale, limits.softcap);
          }
          tile_max = fmaxf(tile_max, s[j]);
        }
        const float m_new = attn_new_max(run, tile_max);
        const float rescale = attn_rescale(run, m_new);
        for (int j = 0; j < kAttnTile; ++j) tree[j] = w[j] = attn_weight(s[j], j < n, m_new);
        attn_running_update(&run, m_new, rescale, attn_lane_tree_sum(tree));

        for (int64_t d = 0; d < 2 * n_pairs; ++d) acc[d] = mul_rn(acc[d], rescale);
        for (int j = 0; j < n; ++j) {
          const AttnRow r = attn_row(kv.v, table, p0 + j, h_kv, kv.n_kv_head, bs, row_bytes);
          for (int64_t i = 0; i < n_pairs; ++i) {
            float a, b;
            attn_value_pair<T>(r, bs, hd, i, &a, &b);
            acc[2 * i] = fmaf(w[j], a, acc[2 * i]);
            acc[2 * i + 1] = fmaf(w[j], b, acc[2 * i + 1]);
          }
        }
      }
      warp_m[warp] = run.m;
      warp_l[warp] = run.l;
      std::copy(acc, acc + hd, warp_acc + warp * kAttnMaxHeadDim);
    }

    const float m_all = attn_combined_max(warp_m);
    float factor[kAttnWarps];
    for (int v = 0; v < kAttnWarps; ++v) factor[v] = attn_warp_factor(warp_m[v], m_all);
    const float sum = attn_combined_sum(warp_l, factor);
    float* out_row = out + (t * n_head + h) * hd;
    for (int64_t d = 0; d < hd; ++d) out_row[d] = attn_combined_out(warp_acc, factor, sum, d);
  }
}

}  // namespace

void paged_attention(float* out, const float* q, const PagedKv& kv, const int32_t* positions,
                     const int32_t* seq_of_token, const int32_t* block_tables, int64_t max_blocks_per_seq,
                     int64_t n_tokens, int64_t n_head, float scale, AttendLimits limits, StreamHandle /*stream*/) {
  check_paged_attention_args(kv, max_blocks_per_seq, n_tokens, n_head, limits);
  switch (kv.dtype) {
    case DType::kF32:
      attend_all<DType::kF32>(out, q, kv, positions, seq_of_token, block_tables, max_blocks_per_seq, n_tokens, n_head,
                              scale, limits);
      return;
    case DType::kF16:
      attend_all<DType::kF16>(out, q, kv, positions, seq_of_token, block_tables, max_blocks_per_seq, n_tokens, n_head,
                              scale, limits);
      return;
    case DType::kBF16:
      attend_all<DType::kBF16>(out, q, kv, positions, seq_of_token, block_tables, max_blocks_per_seq, n_tokens, n_head,
                               scale, limits);
      return;
    default:  // q8_0; check_paged_attention_args rejected the rest
      attend_all<DType::kQ8_0>(out, q, kv, positions, seq_of_token, block_tables, max_blocks_per_seq, n_tokens, n_head,
                               scale, limits);
      return;
  }
}

}  // namespace parallm::cuda::emulated
