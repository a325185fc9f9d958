#include "sampling/sampler.h"

#include <algorithm>
#include <cmath>

#include "kernels/cpu/ops.h"
#include "util/check.h"

namespace parallm {

// NOTE: the one-pass loop (`if (x[i] > x[best]) best = i`) re-reads x[best]
// at an address that depends on the previous compare: a load-latency chain,
// ~40 us on 32,000 logits (llama-110m Q4_0 decode: 835 tokens/s with it, 905
// without, alternating runs). Two passes instead: the maximum over 16
// independent lanes (no chain, and the compiler may vectorize it), then the
// first index that holds it. NaN never wins.
int32_t argmax(const float* x, int32_t n) {
  constexpr int32_t kLanes = 16;
  float lane[kLanes];
  for (float& m : lane) m = -INFINITY;
  int32_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int32_t j = 0; j < kLanes; ++j) lane[j] = x[i + j] > lane[j] ? x[i + j] : lane[j];
  }
  float m = -INFINITY;
  for (; i < n; ++i) m = x[i] > m ? x[i] : m;
  for (float v : lane) m = v > m ? v : m;
  for (i = 0; i < n; ++i) {
    if (x[i] == m) return i;
  }
  return 0;  // every logit NaN
}

Sampler::Sampler(const SamplingParams& params) : p_(params), rng_(params.seed) {}

void Sampler::add_prompt_token(int32_t id) { prompt_counts_[id]++; }
void Sampler::add_output_token(int32_t id) {
  output_counts_[id]++;
  ++n_output_;
  if (json_pieces_ != nullptr && id >= 0 && static_cast<size_t>(id) < json_pieces_->size()) {
    json_.feed((*json_pieces_)[static_cast<size_t>(id)]);
  }
  if (constraint_) constraint_->accept(id);
}

void Sampler::constrain(const constrain::VocabIndex* vocab, std::vector<int32_t> end_ids, int64_t max_tokens) {
  if (!p_.constraint || vocab == nullptr) return;
  constraint_ = std::make_unique<constrain::TokenConstraint>(p_.constraint, vocab, std::move(end_ids), max_tokens);
}

void Sampler::constrain_json(const std::vector<std::string>* pieces, std::vector<int32_t> end_ids) {
  json_pieces_ = p_.json_object ? pieces : nullptr;
  json_end_ids_ = std::move(end_ids);
}

int32_t Sampler::sample(float* logits, int32_t n_vocab) {
  if (p_.repetition_penalty != 1.0f) {
    auto penalize = [&](int32_t id) {
      if (id < 0 || id >= n_vocab) return;
      float& l = logits[id];
      l = l > 0 ? l / p_.repetition_penalty : l * p_.repetition_penalty;
    };
    for (const auto& [id, n] : prompt_counts_) {
      if (!output_counts_.count(id)) penalize(id);
    }
    for (const auto& [id, n] : output_counts_) penalize(id);
  }
  if (p_.presence_penalty != 0.0f || p_.frequency_penalty != 0.0f) {
    for (const auto& [id, n] : output_counts_) {
      if (id < 0 || id >= n_vocab) continue;
      logits[id] -= p_.presence_penalty + p_.frequency_penalty * static_cast<float>(n);
    }
  }
  for (const auto& [id, bias] : p_.logit_bias) {
    if (id >= 0 && id < n_vocab) logits[id] += bias;
  }
  if (n_output_ < p_.min_tokens) {
    for (int32_t id : min_tokens_ban_) {
      if (id >= 0 && id < n_vocab) logits[id] = -INFINITY;
    }
  }
  if (json_pieces_ != nullptr) {
    // Tokens that cannot continue the JSON object go to -inf; when none can
    // (an end token is needed but the request has none), the mask is skipped
    // rather than leaving nothing to draw.
    thread_local std::vector<uint8_t> allowed;
    allowed.assign(static_cast<size_t>(n_vocab), 0);
    bool any = false;
    const bool done = json_.complete();
    for (int32_t id = 0; id < n_vocab && !done; ++id) {
      if (static_cast<size_t>(id) >= json_pieces_->size() || logits[id] == -INFINITY) continue;
      const std::string& piece = (*json_pieces_)[static_cast<size_t>(id)];
      if (piece.empty()) continue;
      if (json_.accepts(piece)) allowed[static_cast<size_t>(id)] = 1, any = true;
    }
    if (done) {  // the object is complete: the answer ends, min_tokens or not
      for (int32_t id : json_end_ids_) {
        if (id < 0 || id >= n_vocab) continue;
        allowed[static_cast<size_t>(id)] = 1, any = true;
        if (logits[id] == -INFINITY) logits[id] = 0.0f;
      }
    }
    if (any) {
      for (int32_t id = 0; id < n_vocab; ++id) {
        if (!allowed[static_cast<size_t>(id)]) logits[id] = -INFINITY;
      }
    }
  }
  if (constraint_ && !constraint_->apply(logits, n_vocab)) {
    // A dead end (no token continues the structure and it may not end
    // here: a vocabulary without the bytes it needs): the end tokens, so
    // the answer stops rather than leaving the grammar.
    constraint_->force_end(logits, n_vocab);
  }
  if (p_.greedy()) return argmax(logits, n_vocab);

  // Softmax over logits / temperature.
  const bool filtered = p_.top_k > 0 || p_.top_p < 1.0f || p_.min_p > 0.0f;
  if (!filtered) {
    // No truncation: draw straight from the distribution in id order. NOTE: a
    // sort of the whole vocabulary per token was a quarter of a 32-stream
    // serving step; the filters below need an order, plain sampling does not.
    // The weights exp((l - max) / T) come from one vectorized kernel (two
    // passes) and need no normalizing, since the draw is scaled by their sum;
    // it first picks a chunk of ids by the chunks' sums, so no loop runs
    // 32,000 dependent adds.
    cpu::exp_shifted(logits, n_vocab, 1.0f / p_.temperature);
    constexpr int32_t kChunk = 512, kLanes = 16;
    const int32_t n_chunks = (n_vocab + kChunk - 1) / kChunk;
    chunk_sums_.assign(static_cast<size_t>(n_chunks), 0.0);
    double total = 0.0;
    for (int32_t c = 0; c < n_chunks; ++c) {
      const int32_t b = c * kChunk, e = std::min(n_vocab, b + kChunk);
      float lane[kLanes] = {};
      int32_t i = b;
      for (; i + kLanes <= e; i += kLanes) {
        for (int j = 0; j < kLanes; ++j) lane[j] += logits[i + j];
      }
      double cs = 0.0;
      for (; i < e; ++i) cs += logits[i];
      for (float l : lane) cs += l;
      chunk_sums_[static_cast<size_t>(c)] = cs;
      total += cs;
    }
    double r = static_cast<double>(rng_() >> 11) * (1.0 / 9007199254740992.0) * total;
    int32_t c = 0;
    while (c < n_chunks - 1 && r >= chunk_sums_[static_cast<size_t>(c)]) r -= chunk_sums_[static_cast<size_t>(c++)];
    const int32_t e = std::min(n_vocab, (c + 1) * kChunk);
    for (int32_t i = c * kChunk; i < e; ++i) {
      r -= logits[i];
      if (r < 0) return i;
    }
    // Rounding left r just past the chunk: its last id with any mass.
    for (int32_t i = e - 1; i > 0; --i) {
      if (logits[i] > 0) return i;
    }
    return 0;
  }
  const float mx = logits[argmax(logits, n_vocab)];
  candidates_.clear();
  double sum = 0.0;
  for (int32_t i = 0; i < n_vocab; ++i) {
    float pr = std::exp((logits[i] - mx) / p_.temperature);
    sum += pr;
    candidates_.emplace_back(pr, i);
  }
  auto by_prob = [](const auto& a, const auto& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  };
  size_t keep = candidates_.size();
  if (p_.top_k > 0 && static_cast<size_t>(p_.top_k) < keep) {
    keep = static_cast<size_t>(p_.top_k);
    std::partial_sort(candidates_.begin(), candidates_.begin() + static_cast<long>(keep), candidates_.end(), by_prob);
  } else {
    std::sort(candidates_.begin(), candidates_.end(), by_prob);
  }
  for (auto& c : candidates_) c.first = static_cast<float>(c.first / sum);
  if (p_.top_p < 1.0f) {
    double kept_sum = 0.0;
    double total = 0.0;
    for (size_t i = 0; i < keep; ++i) total += candidates_[i].first;
    size_t n = 0;
    while (n < keep) {
      kept_sum += candidates_[n].first;
      ++n;
      if (kept_sum >= p_.top_p * total) break;
    }
    keep = n;
  }
  if (p_.min_p > 0.0f) {
    const float floor = p_.min_p * candidates_[0].first;
    size_t n = 1;
    while (n < keep && candidates_[n].first >= floor) ++n;
    keep = n;
  }
  double kept = 0.0;
  for (size_t i = 0; i < keep; ++i) kept += candidates_[i].first;
  // 53 random bits -> uniform in [0, kept).
  double r = static_cast<double>(rng_() >> 11) * (1.0 / 9007199254740992.0) * kept;
  for (size_t i = 0; i < keep; ++i) {
    r -= candidates_[i].first;
    if (r < 0) return candidates_[i].second;
  }
  return candidates_[keep - 1].second;
}

}  // namespace parallm
