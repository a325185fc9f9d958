// Mixture-of-experts routing and data movement on a CUDA device (the CPU's
// is model/moe.cpp). The router's logits come from linear(); moe_topk picks
// each token's experts and weights; the rank then runs each owned expert's
// FFN over its tokens, gathered into a contiguous batch, and adds the
// weighted results back, one expert after the other (a fixed order: the
// same sums on every run). Per-item math: math/moe.h.
#pragma once
#include <cstdint>

#include "device/stream_handle.h"

namespace parallm::cuda {

// How moe_topk turns logits into weights, as ModelConfig's routing fields.
struct TopKRule {
  bool sigmoid = false;       // scores: sigmoid(logit) each; false: softmax over all experts
  bool norm_topk = true;      // weights: the chosen scores renormalized to sum 1 (Mixtral, Qwen3-MoE)
  float routed_scale = 1.0f;  // weights times this
};

// logits [n_tokens, n_expert] -> ids, weights [n_tokens, k]: token t's k
// experts of highest score (score + bias[e] when bias is not null; the
// weights do not see the bias), best first, ties to the lower id, exactly
// model/moe.cpp's choice; weight = score (renormalized when norm_topk) *
// routed_scale. k <= n_expert <= 256.
void moe_topk(int32_t* ids, float* weights, const float* logits, const float* bias, int64_t n_tokens, int64_t n_expert,
              int64_t k, TopKRule rule, StreamHandle stream);

// out [n_rows, n_embd]: out[i] = x[rows[i]].
void gather_rows(float* out, const float* x, const int32_t* rows, int64_t n_rows, int64_t n_embd, StreamHandle stream);

// out[rows[i]] += weights[i] * y[i] for i in [0, n_rows), in order of i
// (rows may repeat only across calls: within one call each row appears at
// most once, so no two items add to the same row).
void scatter_add_rows(float* out, const float* y, const int32_t* rows, const float* weights, int64_t n_rows,
                      int64_t n_embd, StreamHandle stream);

}  // namespace parallm::cuda
