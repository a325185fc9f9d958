// MoE routing and row movement (kernels/cuda/moe.h).
//   moe_topk: one thread per token runs math/moe.h's rule over its row of
//   logits (n_expert <= 256, k passes of a scan: a few thousand operations
//   per token, against a router GEMM of n_embd * n_expert per token).
//   gather_rows / scatter_add_rows: one thread per element, grid-stride.
//   Rows of one scatter call are distinct (moe.h), so no two threads add to
//   the same element and no atomics are needed.
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/linear_checks.h"
#include "kernels/cuda/math/moe.h"
#include "kernels/cuda/moe.h"

namespace parallm::cuda {

namespace {

constexpr int kTopkThreads = 64;

// ids, weights [n_tokens, k]; logits [n_tokens, n_expert]; bias [n_expert] or null.
__global__ void __launch_bounds__(kTopkThreads)
    moe_topk_kernel(int32_t* ids, float* weights, const float* logits, const float* bias, int64_t n_tokens,
                    int n_expert, int k, TopKRule rule) {
  const int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= n_tokens) return;
  moe_topk_token(ids + t * k, weights + t * k, logits + t * n_expert, bias, n_expert, k, rule);
}

// out [n_rows, n_embd] = x[rows[i]].
__global__ void gather_rows_kernel(float* out, const float* x, const int32_t* rows, int64_t n_rows, int64_t n_embd) {
  const int64_t n = n_rows * n_embd;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < n;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = e / n_embd;
    out[e] = gather_element(x, rows, n_embd, i, e - i * n_embd);
  }
}

// out[rows[i]] += weights[i] * y[i], y [n_rows, n_embd].
__global__ void scatter_add_rows_kernel(float* out, const float* y, const int32_t* rows, const float* weights,
                                        int64_t n_rows, int64_t n_embd) {
  const int64_t n = n_rows * n_embd;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < n;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = e / n_embd;
    scatter_add_element(out, y, rows, weights, n_embd, i, e - i * n_embd);
  }
}

}  // namespace

void moe_topk(int32_t* ids, float* weights, const float* logits, const float* bias, int64_t n_tokens, int64_t n_expert,
              int64_t k, TopKRule rule, StreamHandle stream) {
  check_moe_topk_args(n_tokens, n_expert, k);
  if (n_tokens == 0) return;
  const auto blocks = static_cast<unsigned>((n_tokens + kTopkThreads - 1) / kTopkThreads);
  moe_topk_kernel<<<blocks, kTopkThreads, 0, stream>>>(ids, weights, logits, bias, n_tokens, static_cast<int>(n_expert),
                                                       static_cast<int>(k), rule);
  check_launch("moe_topk_kernel");
}

void gather_rows(float* out, const float* x, const int32_t* rows, int64_t n_rows, int64_t n_embd, StreamHandle stream) {
  check_rows_args(n_rows, n_embd);
  if (n_rows == 0) return;
  gather_rows_kernel<<<blocks_for(n_rows * n_embd), kItemThreads, 0, stream>>>(out, x, rows, n_rows, n_embd);
  check_launch("gather_rows_kernel");
}

void scatter_add_rows(float* out, const float* y, const int32_t* rows, const float* weights, int64_t n_rows,
                      int64_t n_embd, StreamHandle stream) {
  check_rows_args(n_rows, n_embd);
  if (n_rows == 0) return;
  scatter_add_rows_kernel<<<blocks_for(n_rows * n_embd), kItemThreads, 0, stream>>>(out, y, rows, weights, n_rows,
                                                                                    n_embd);
  check_launch("scatter_add_rows_kernel");
}

}  // namespace parallm::cuda
