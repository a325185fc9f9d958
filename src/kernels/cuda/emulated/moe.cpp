// Emulated MoE routing and row movement (kernels/cuda/moe.h): the kernels'
// per-token and per-element math (math/moe.h), token by token and row by
// row. moe_topk is route_tokens' rule in its own order, so on the host its
// ids and weights are the CPU's bit for bit.
#include "kernels/cuda/math/moe.h"

#include <type_traits>

#include "kernels/cuda/emulated/launchers.h"
#include "kernels/cuda/linear_checks.h"
#include "kernels/cuda/moe.h"

namespace parallm::cuda::emulated {

static_assert(std::is_same_v<decltype(&moe_topk), decltype(&cuda::moe_topk)>);
static_assert(std::is_same_v<decltype(&gather_rows), decltype(&cuda::gather_rows)>);
static_assert(std::is_same_v<decltype(&scatter_add_rows), decltype(&cuda::scatter_add_rows)>);

void moe_topk(int32_t* ids, float* weights, const float* logits, const float* bias, int64_t n_tokens, int64_t n_expert,
              int64_t k, TopKRule rule, StreamHandle /*stream*/) {
  check_moe_topk_args(n_tokens, n_expert, k);
  for (int64_t t = 0; t < n_tokens; ++t) {
    moe_topk_token(ids + t * k, weights + t * k, logits + t * n_expert, bias, static_cast<int>(n_expert),
                   static_cast<int>(k), rule);
  }
}

void gather_rows(float* out, const float* x, const int32_t* rows, int64_t n_rows, int64_t n_embd,
                 StreamHandle /*stream*/) {
  check_rows_args(n_rows, n_embd);
  for (int64_t i = 0; i < n_rows; ++i) {
    for (int64_t j = 0; j < n_embd; ++j) out[i * n_embd + j] = gather_element(x, rows, n_embd, i, j);
  }
}

void scatter_add_rows(float* out, const float* y, const int32_t* rows, const float* weights, int64_t n_rows,
                      int64_t n_embd, StreamHandle /*stream*/) {
  check_rows_args(n_rows, n_embd);
  for (int64_t i = 0; i < n_rows; ++i) {
    for (int64_t j = 0; j < n_embd; ++j) scatter_add_element(out, y, rows, weights, n_embd, i, j);
  }
}

}  // namespace parallm::cuda::emulated
