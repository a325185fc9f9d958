#include "model/moe.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "kernels/cpu/ops.h"
#include "util/check.h"

namespace parallm {

double MoeStats::imbalance() const {
  if (tokens_per_expert.empty()) return 1.0;
  uint64_t total = std::accumulate(tokens_per_expert.begin(), tokens_per_expert.end(), uint64_t{0});
  if (total == 0) return 1.0;
  uint64_t mx = *std::max_element(tokens_per_expert.begin(), tokens_per_expert.end());
  return static_cast<double>(mx) * static_cast<double>(tokens_per_expert.size()) / static_cast<double>(total);
}

namespace {

struct Route {
  int32_t token;   // row in the routed batch
  int32_t expert;  // global expert id
  float weight;
};

// Top-k experts per token, their weights from the router's scores:
//  - scores: the softmax over all experts' logits, or each logit's sigmoid;
//  - choice: the scores plus the router bias where there is one (DeepSeek-V3
//    corrects the balance with it; the weights do not see it);
//  - groups: with n_expert_groups > 1 the top-k is taken within the
//    n_expert_groups_used groups of best score (a group's score: its top two
//    choices' sum with a bias, as V3's noaux_tc, else its best score, as
//    V2's group_limited_greedy);
//  - weights: the chosen scores, renormalized to sum to 1 when
//    norm_topk_prob (then equal to a softmax over the chosen logits, as
//    Mixtral computes it), times routed_scale.
std::vector<Route> route_tokens(const float* h, int64_t n_tokens, const ModelConfig& c, const MoeWeights& mw,
                                ThreadPool& pool) {
  if (n_tokens == 0) return {};
  const int64_t n_exp = c.n_expert, k_used = c.n_expert_used;
  std::vector<float> logits(static_cast<size_t>(n_tokens * n_exp));
  linear_forward(logits.data(), mw.router, h, n_tokens, pool);
  std::vector<Route> routes;
  routes.reserve(static_cast<size_t>(n_tokens * k_used));
  std::vector<int32_t> order(static_cast<size_t>(n_exp)), group_order(static_cast<size_t>(c.n_expert_groups));
  std::vector<float> scores(static_cast<size_t>(n_exp)), choice(scores.size()), group_score(group_order.size());
  std::vector<uint8_t> kept(group_order.size());
  const int64_t per_group = n_exp / c.n_expert_groups;
  for (int64_t t = 0; t < n_tokens; ++t) {
    const float* lg = logits.data() + t * n_exp;
    if (c.router_scoring == RouterScoring::kSigmoid) {
      for (int64_t e = 0; e < n_exp; ++e) scores[e] = 1.0f / (1.0f + std::exp(-lg[e]));
    } else {
      const float mx = *std::max_element(lg, lg + n_exp);
      float sum = 0.f;
      for (int64_t e = 0; e < n_exp; ++e) sum += (scores[e] = std::exp(lg[e] - mx));
      for (int64_t e = 0; e < n_exp; ++e) scores[e] /= sum;
    }
    for (int64_t e = 0; e < n_exp; ++e) choice[e] = scores[e] + (mw.router_bias ? mw.router_bias[e] : 0.0f);
    if (c.n_expert_groups > 1) {
      for (int64_t g = 0; g < c.n_expert_groups; ++g) {
        const float* gc = choice.data() + g * per_group;
        if (mw.router_bias != nullptr) {
          float a = -INFINITY, b = -INFINITY;  // the group's two best
          for (int64_t j = 0; j < per_group; ++j) {
            if (gc[j] > a) {
              b = a;
              a = gc[j];
            } else if (gc[j] > b) {
              b = gc[j];
            }
          }
          group_score[g] = per_group > 1 ? a + b : a;
        } else {
          group_score[g] = *std::max_element(gc, gc + per_group);
        }
      }
      std::iota(group_order.begin(), group_order.end(), 0);
      std::partial_sort(group_order.begin(), group_order.begin() + c.n_expert_groups_used, group_order.end(),
                        [&](int32_t a, int32_t b) {
                          return group_score[a] > group_score[b] || (group_score[a] == group_score[b] && a < b);
                        });
      std::fill(kept.begin(), kept.end(), 0);
      for (int64_t i = 0; i < c.n_expert_groups_used; ++i) kept[group_order[i]] = 1;
      for (int64_t e = 0; e < n_exp; ++e) {
        if (!kept[e / per_group]) choice[e] = -INFINITY;
      }
    }
    std::iota(order.begin(), order.end(), 0);
    // Ties broken by the lower expert id, so every rank picks the same experts.
    std::partial_sort(order.begin(), order.begin() + k_used, order.end(),
                      [&](int32_t a, int32_t b) { return choice[a] > choice[b] || (choice[a] == choice[b] && a < b); });
    float sum = 0.f;
    for (int64_t k = 0; k < k_used; ++k) sum += scores[order[k]];
    const float norm = c.norm_topk_prob && sum > 0.f ? 1.0f / sum : 1.0f;
    for (int64_t k = 0; k < k_used; ++k) {
      routes.push_back({static_cast<int32_t>(t), order[k], scores[order[k]] * norm * c.routed_scale});
    }
  }
  return routes;
}

// Runs the owned experts over `rows` [n_rows, n_embd] given routes into them;
// accumulates weight * expert(row) into out [n_rows, n_embd].
void run_local_experts(float* out, const float* rows, const std::vector<Route>& routes, const ModelConfig& c,
                       const MoeWeights& w, ThreadPool& pool) {
  const int64_t n_embd = c.n_embd;
  const int64_t n_local = static_cast<int64_t>(w.gate.size());
  std::vector<float> xin, g, u, d;
  for (int64_t e = 0; e < n_local; ++e) {
    const int32_t ge = static_cast<int32_t>(w.expert_begin + e);
    std::vector<const Route*> mine;
    for (const Route& r : routes) {
      if (r.expert == ge) mine.push_back(&r);
    }
    if (mine.empty()) continue;
    const int64_t n = static_cast<int64_t>(mine.size());
    const int64_t n_ff = w.gate[e].n_out;
    xin.resize(static_cast<size_t>(n * n_embd));
    g.resize(static_cast<size_t>(n * n_ff));
    u.resize(static_cast<size_t>(n * n_ff));
    d.resize(static_cast<size_t>(n * n_embd));
    for (int64_t i = 0; i < n; ++i) {
      std::memcpy(xin.data() + i * n_embd, rows + mine[i]->token * n_embd, static_cast<size_t>(n_embd) * 4);
    }
    float* outs[2] = {g.data(), u.data()};
    const Linear* ls[2] = {&w.gate[e], &w.up[e]};
    linear_forward_multi(outs, ls, 2, xin.data(), n, pool);
    cpu::swiglu(g.data(), g.data(), u.data(), n * n_ff);
    linear_forward(d.data(), w.down[e], g.data(), n, pool);
    for (int64_t i = 0; i < n; ++i) {
      float* o = out + mine[i]->token * n_embd;
      const float* di = d.data() + i * n_embd;
      const float wt = mine[i]->weight;
      for (int64_t j = 0; j < n_embd; ++j) o[j] += wt * di[j];
    }
  }
}

}  // namespace

void moe_forward(float* out, const float* h, int64_t n_tokens, const ModelConfig& c, const MoeWeights& w,
                 Communicator* ep_comm, MoeStats* stats, ThreadPool& pool) {
  const int64_t n_embd = c.n_embd;
  if (stats->tokens_per_expert.empty()) stats->tokens_per_expert.assign(static_cast<size_t>(c.n_expert), 0);
  const int ep = ep_comm ? ep_comm->size() : 1;
  if (ep == 1) {
    std::vector<Route> routes = route_tokens(h, n_tokens, c, w, pool);
    for (const Route& r : routes) stats->tokens_per_expert[r.expert]++;
    std::fill(out, out + n_tokens * n_embd, 0.f);
    run_local_experts(out, h, routes, c, w, pool);
    return;
  }
  // Expert parallel. This rank routes tokens [t0, t1).
  const int me = ep_comm->rank();
  int64_t t0, t1;
  ThreadPool::split(n_tokens, 1, me, ep, &t0, &t1);
  const int64_t n_mine = t1 - t0;
  std::vector<Route> routes = route_tokens(h + t0 * n_embd, n_mine, c, w, pool);
  const int64_t per_rank = c.n_expert / ep;
  // Dispatch: for each destination rank, the (token row, expert, weight) triples and the token vectors.
  std::vector<std::vector<Route>> to(static_cast<size_t>(ep));
  for (const Route& r : routes) to[static_cast<size_t>(r.expert / per_rank)].push_back(r);
  const size_t row_bytes = static_cast<size_t>(n_embd) * 4;
  const size_t item_bytes = sizeof(Route) + row_bytes;
  std::vector<size_t> send_bytes(ep), send_off(ep), recv_bytes(ep), recv_off(ep);
  std::vector<uint8_t> send_buf;
  for (int p = 0; p < ep; ++p) {
    send_off[p] = send_buf.size();
    for (const Route& r : to[p]) {
      size_t at = send_buf.size();
      send_buf.resize(at + item_bytes);
      std::memcpy(send_buf.data() + at, &r, sizeof(Route));
      std::memcpy(send_buf.data() + at + sizeof(Route), h + (t0 + r.token) * n_embd, row_bytes);
    }
    send_bytes[p] = send_buf.size() - send_off[p];
  }
  // Exchange sizes first (one size_t per peer), then the items.
  std::vector<size_t> all_sizes(static_cast<size_t>(ep * ep));
  ep_comm->all_gather(send_bytes.data(), all_sizes.data(), sizeof(size_t) * ep);
  size_t total_in = 0;
  for (int p = 0; p < ep; ++p) {
    recv_bytes[p] = all_sizes[static_cast<size_t>(p * ep + me)];
    recv_off[p] = total_in;
    total_in += recv_bytes[p];
  }
  std::vector<uint8_t> recv_buf(total_in);
  ep_comm->all_to_all_v(send_buf.data(), send_bytes.data(), send_off.data(), recv_buf.data(), recv_bytes.data(),
                        recv_off.data());
  // Run owned experts over the received items (row i = item i).
  const int64_t n_items = static_cast<int64_t>(total_in / item_bytes);
  std::vector<float> rows(static_cast<size_t>(n_items * n_embd)), results(rows.size(), 0.f);
  std::vector<Route> local_routes(static_cast<size_t>(n_items));
  for (int64_t i = 0; i < n_items; ++i) {
    Route r;
    std::memcpy(&r, recv_buf.data() + i * item_bytes, sizeof(Route));
    std::memcpy(rows.data() + i * n_embd, recv_buf.data() + i * item_bytes + sizeof(Route), row_bytes);
    local_routes[i] = {static_cast<int32_t>(i), r.expert, r.weight};
    stats->tokens_per_expert[r.expert]++;
  }
  run_local_experts(results.data(), rows.data(), local_routes, c, w, pool);
  // Combine: send each result row back to where it came from (same offsets, rows only).
  std::vector<size_t> back_send_bytes(ep), back_send_off(ep), back_recv_bytes(ep), back_recv_off(ep);
  for (int p = 0; p < ep; ++p) {
    back_send_bytes[p] = recv_bytes[p] / item_bytes * row_bytes;
    back_send_off[p] = recv_off[p] / item_bytes * row_bytes;
    back_recv_bytes[p] = send_bytes[p] / item_bytes * row_bytes;
    back_recv_off[p] = send_off[p] / item_bytes * row_bytes;
  }
  std::vector<float> back(routes.size() * static_cast<size_t>(n_embd));
  ep_comm->all_to_all_v(results.data(), back_send_bytes.data(), back_send_off.data(), back.data(),
                        back_recv_bytes.data(), back_recv_off.data());
  // Sum each token's expert outputs (already weighted) into its row of my shard.
  std::vector<float> shard(static_cast<size_t>(std::max<int64_t>(n_mine, 1) * n_embd), 0.f);
  size_t item = 0;
  for (int p = 0; p < ep; ++p) {
    for (const Route& r : to[p]) {
      float* o = shard.data() + r.token * n_embd;
      const float* src = back.data() + item * static_cast<size_t>(n_embd);
      for (int64_t j = 0; j < n_embd; ++j) o[j] += src[j];
      ++item;
    }
  }
  // Restore the full batch on every rank. Shards differ in size by at most one
  // token, so gather a padded block per rank and unpack.
  const int64_t max_shard = (n_tokens + ep - 1) / ep;
  std::vector<float> padded(static_cast<size_t>(max_shard * n_embd), 0.f);
  std::copy(shard.begin(), shard.begin() + n_mine * n_embd, padded.begin());
  std::vector<float> gathered(static_cast<size_t>(ep * max_shard * n_embd));
  ep_comm->all_gather(padded.data(), gathered.data(), padded.size() * 4);
  for (int p = 0; p < ep; ++p) {
    int64_t b, e;
    ThreadPool::split(n_tokens, 1, p, ep, &b, &e);
    std::memcpy(out + b * n_embd, gathered.data() + p * max_shard * n_embd, static_cast<size_t>((e - b) * n_embd) * 4);
  }
}

}  // namespace parallm
