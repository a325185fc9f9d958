// Paged attention: one block of kAttnWarps warps per (token, query head),
// online softmax in f32 (math/attention.h describes the shape and holds the
// per-item math; emulated/attention.cpp runs the same loops on the host).
// Each lane of a warp scores one key of a 32-key tile against the query row
// in shared memory, so a decode token's many keys spread over the block's
// 128 lanes without a reduction per key; the tile's weights are then
// broadcast lane by lane while each lane accumulates the value dims it owns
// (coalesced value loads). The cache type is a template parameter: one
// kernel per dtype, no per-value switch.
#include "kernels/cuda/attention.h"
#include "kernels/cuda/attention_checks.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/math/attention.h"

namespace parallm::cuda {

namespace {

constexpr unsigned kFullWarp = 0xffffffffu;

// out, q: [n_tokens, n_head, head_dim]; positions, seq_of_token: [n_tokens];
// block_tables: [n_seqs, max_blocks_per_seq]. Block blockIdx.x is (token
// blockIdx.x / n_head, query head blockIdx.x % n_head).
template <DType T>
__global__ void __launch_bounds__(kAttnThreads)
    paged_attention_kernel(float* out, const float* q, PagedKv kv, const int32_t* positions,
                           const int32_t* seq_of_token, const int32_t* block_tables, int64_t max_blocks_per_seq,
                           int64_t n_head, float scale, AttendLimits limits) {
  __shared__ float q_f32[kAttnMaxHeadDim];
  __shared__ __align__(16) int8_t q_q8[kAttnMaxHeadDim];
  __shared__ float q_d[kAttnMaxHeadDim / kQK8_0];
  __shared__ float warp_m[kAttnWarps], warp_l[kAttnWarps];
  __shared__ float warp_acc[kAttnWarps * kAttnMaxHeadDim];

  const int64_t item = blockIdx.x, t = item / n_head, h = item % n_head;
  const int64_t hd = kv.head_dim, bs = kv.block_size, n_pairs = hd / 2;
  const int64_t h_kv = h / (n_head / kv.n_kv_head);
  const int64_t row_bytes = kv_row_bytes_of(T, hd);
  const int tid = static_cast<int>(threadIdx.x), lane = tid % 32, warp = tid / 32;

  const float* q_row = q + (t * n_head + h) * hd;
  for (int64_t d = tid; d < hd; d += kAttnThreads) q_f32[d] = q_row[d];
  __syncthreads();
  if constexpr (T == DType::kQ8_0) {
    for (int64_t b = tid; b < hd / kQK8_0; b += kAttnThreads) {
      attn_quantize_query_block(q_f32 + b * kQK8_0, q_q8 + b * kQK8_0, q_d + b);
    }
    __syncthreads();
  }
  const AttnQuery query{q_f32, q_q8, q_d};

  const int64_t len = static_cast<int64_t>(positions[t]) + 1;
  const int32_t* table = block_tables + static_cast<int64_t>(seq_of_token[t]) * max_blocks_per_seq;
  const int64_t lo = attn_first_key(len, limits.window);
  const int64_t n_tiles = len > lo ? (len - lo + kAttnTile - 1) / kAttnTile : 0;

  AttnRunning run{-INFINITY, 0.0f};
  float acc[kAttnPairsPerLane][2];
#pragma unroll
  for (int k = 0; k < kAttnPairsPerLane; ++k) acc[k][0] = acc[k][1] = 0.0f;

  for (int64_t tile = warp; tile < n_tiles; tile += kAttnWarps) {
    const int64_t p0 = lo + tile * kAttnTile;
    const int n = static_cast<int>(len - p0 < kAttnTile ? len - p0 : kAttnTile);
    const bool valid = lane < n;
    float s = -INFINITY;
    if (valid) {
      const AttnRow r = attn_row(kv.k, table, p0 + lane, h_kv, kv.n_kv_head, bs, row_bytes);
      s = attn_key_score<T>(query, r, bs, hd, scale, limits.softcap);
    }
    float tile_max = s;
    for (int o = kAttnTile / 2; o > 0; o /= 2) tile_max = fmaxf(tile_max, __shfl_xor_sync(kFullWarp, tile_max, o));
    const float m_new = attn_new_max(run, tile_max);
    const float rescale = attn_rescale(run, m_new);
    const float w = attn_weight(s, valid, m_new);
    float tile_sum = w;
    for (int o = kAttnTile / 2; o > 0; o /= 2) tile_sum = tile_sum + __shfl_xor_sync(kFullWarp, tile_sum, o);
    attn_running_update(&run, m_new, rescale, tile_sum);

#pragma unroll
    for (int k = 0; k < kAttnPairsPerLane; ++k) {
      acc[k][0] = mul_rn(acc[k][0], rescale);
      acc[k][1] = mul_rn(acc[k][1], rescale);
    }
    for (int j = 0; j < n; ++j) {
      const float wj = __shfl_sync(kFullWarp, w, j);
      const AttnRow r = attn_row(kv.v, table, p0 + j, h_kv, kv.n_kv_head, bs, row_bytes);
#pragma unroll
      for (int k = 0; k < kAttnPairsPerLane; ++k) {
        const int64_t i = lane + 32 * k;
        if (i < n_pairs) {
          float a, b;
          attn_value_pair<T>(r, bs, hd, i, &a, &b);
          acc[k][0] = fmaf(wj, a, acc[k][0]);
          acc[k][1] = fmaf(wj, b, acc[k][1]);
        }
      }
    }
  }

  if (lane == 0) {
    warp_m[warp] = run.m;
    warp_l[warp] = run.l;
  }
#pragma unroll
  for (int k = 0; k < kAttnPairsPerLane; ++k) {
    const int64_t i = lane + 32 * k;
    if (i < n_pairs) {
      warp_acc[warp * kAttnMaxHeadDim + 2 * i] = acc[k][0];
      warp_acc[warp * kAttnMaxHeadDim + 2 * i + 1] = acc[k][1];
    }
  }
  __syncthreads();
  const float m_all = attn_combined_max(warp_m);
  float factor[kAttnWarps];
#pragma unroll
  for (int v = 0; v < kAttnWarps; ++v) factor[v] = attn_warp_factor(warp_m[v], m_all);
  const float sum = attn_combined_sum(warp_l, factor);
  float* out_row = out + (t * n_head + h) * hd;
  for (int64_t d = tid; d < hd; d += kAttnThreads) out_row[d] = attn_combined_out(warp_acc, factor, sum, d);
}

}  // namespace

void paged_attention(float* out, const float* q, const PagedKv& kv, const int32_t* positions,
                     const int32_t* seq_of_token, const int32_t* block_tables, int64_t max_blocks_per_seq,
                     int64_t n_tokens, int64_t n_head, float scale, AttendLimits limits, StreamHandle stream) {
  check_paged_attention_args(kv, max_blocks_per_seq, n_tokens, n_head, limits);
  if (n_tokens == 0) return;
  const auto blocks = static_cast<unsigned>(n_tokens * n_head);
  switch (kv.dtype) {
    case DType::kF32:
      paged_attention_kernel<DType::kF32><<<blocks, kAttnThreads, 0, stream>>>(
          out, q, kv, positions, seq_of_token, block_tables, max_blocks_per_seq, n_head, scale, limits);
      break;
    case DType::kF16:
      paged_attention_kernel<DType::kF16><<<blocks, kAttnThreads, 0, stream>>>(
          out, q, kv, positions, seq_of_token, block_tables, max_blocks_per_seq, n_head, scale, limits);
      break;
    case DType::kBF16:
      paged_attention_kernel<DType::kBF16><<<blocks, kAttnThreads, 0, stream>>>(
          out, q, kv, positions, seq_of_token, block_tables, max_blocks_per_seq, n_head, scale, limits);
      break;
    default:  // q8_0; check_paged_attention_args rejected the rest
      paged_attention_kernel<DType::kQ8_0><<<blocks, kAttnThreads, 0, stream>>>(
          out, q, kv, positions, seq_of_token, block_tables, max_blocks_per_seq, n_head, scale, limits);
      break;
  }
  check_launch("paged_attention_kernel");
}

}  // namespace parallm::cuda
