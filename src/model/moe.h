// Mixture-of-experts FFN: a router picks the top-k experts of each token, and
// the token's output is the weighted sum of those experts' SwiGLU FFNs. The
// weights are the router's softmax over the selected k (Mixtral, Qwen3-MoE),
// or their shares of the softmax over all experts (Qwen2-MoE:
// ModelConfig::norm_topk_prob false). DeepSeek scores by sigmoid or softmax,
// may pick within the best groups of experts first and may bias the choice,
// then scales the weights (ModelConfig's routing fields). A shared expert,
// where the model has one, is the caller's (model/llama_model.cpp).
//
// Expert parallel (ep > 1): rank r owns experts [expert_begin, expert_end).
// Every rank holds the same tokens (the residual stream is replicated), so each
// rank routes a 1/ep share of them, dispatches those token vectors to the
// owners of their experts with all_to_all_v, the owners run their experts and
// send the weighted results back with a second all_to_all_v, and an all_gather
// restores the full batch on every rank.
#pragma once
#include <cstdint>
#include <vector>

#include "comm/communicator.h"
#include "config/model_config.h"
#include "model/linear.h"
#include "util/thread_pool.h"

namespace parallm {

struct MoeWeights {
  Linear router;                       // [n_expert, n_embd], replicated
  const float* router_bias = nullptr;  // [n_expert] DeepSeek-V3: added to the scores for the choice only
  std::vector<Linear> gate, up;        // per owned expert: [n_ff_local, n_embd]
  std::vector<Linear> down;            // per owned expert: [n_embd, n_ff_local]
  int64_t expert_begin = 0;            // global id of gate[0]
};

// Tokens routed to each expert (global ids), accumulated over forwards.
struct MoeStats {
  std::vector<uint64_t> tokens_per_expert;  // [n_expert]
  // max / mean of tokens_per_expert: 1.0 is perfect balance.
  double imbalance() const;
};

// out [n_tokens, n_embd] = MoE(h [n_tokens, n_embd]). ep_comm null means all experts are local.
void moe_forward(float* out, const float* h, int64_t n_tokens, const ModelConfig& c, const MoeWeights& w,
                 Communicator* ep_comm, MoeStats* stats, ThreadPool& pool);

}  // namespace parallm
