// Token masks (see token_mask.h).
#include "constrain/token_mask.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace parallm::constrain {

VocabIndex::VocabIndex(const std::vector<std::string>& pieces)
    : n_vocab_(static_cast<int32_t>(pieces.size())), pieces_(pieces) {
  std::vector<int32_t> ids;
  for (size_t i = 0; i < pieces_.size(); ++i) {
    if (!pieces_[i].empty()) ids.push_back(static_cast<int32_t>(i));
  }
  std::sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) {
    return pieces_[static_cast<size_t>(a)] < pieces_[static_cast<size_t>(b)] ||
           (pieces_[static_cast<size_t>(a)] == pieces_[static_cast<size_t>(b)] && a < b);
  });
  const std::string* prev = nullptr;
  for (int32_t id : ids) {
    const std::string& p = pieces_[static_cast<size_t>(id)];
    int32_t l = 0;
    if (prev) {
      const size_t n = std::min(prev->size(), p.size());
      while (static_cast<size_t>(l) < n && (*prev)[static_cast<size_t>(l)] == p[static_cast<size_t>(l)]) ++l;
    }
    sorted_.push_back({id, l});
    max_len_ = std::max(max_len_, p.size());
    prev = &p;
  }
}

size_t CompiledConstraint::KeyHash::operator()(const std::vector<uint32_t>& k) const {
  uint64_t h = 1469598103934665603ull;
  for (uint32_t x : k) h = (h ^ x) * 1099511628211ull;
  return static_cast<size_t>(h);
}

MaskStats CompiledConstraint::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

std::shared_ptr<const TokenMask> CompiledConstraint::mask(Matcher* m, const Matcher::Set& set, const VocabIndex& vocab,
                                                          bool closing) const {
  std::vector<uint32_t> key = m->key(set);
  key.push_back(closing ? 1u : 0u);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (cache_vocab_ != &vocab) cache_.clear(), cache_vocab_ = &vocab;
    auto it = cache_.find(key);
    if (it != cache_.end()) {
      ++stats_.hits;
      return it->second;
    }
    ++stats_.misses;
  }
  auto out = std::make_shared<TokenMask>((static_cast<size_t>(vocab.n_vocab()) + 63) / 64, 0);
  const int32_t dist_now = closing ? m->distance(set) : 0;
  const size_t mark = m->mark();
  // sets[d]: the matcher set after the first d bytes of the current entry.
  std::vector<Matcher::Set> sets(vocab.max_len() + 1);
  sets[0] = set;
  size_t valid = 0;  // bytes of the previous entry that fed (sets[0..valid] hold)
  const auto& sorted = vocab.sorted();
  for (size_t i = 0; i < sorted.size(); ++i) {
    const VocabIndex::Entry& e = sorted[i];
    const std::string& p = vocab.piece(e.id);
    size_t d = std::min(valid, static_cast<size_t>(e.lcp));
    // A prefix already rejected: this entry shares it (lcp > valid).
    if (static_cast<size_t>(e.lcp) > valid) {
      valid = std::min(valid, static_cast<size_t>(e.lcp));
      continue;
    }
    for (; d < p.size(); ++d) {
      m->step(sets[d], static_cast<uint8_t>(p[d]), &sets[d + 1]);
      if (sets[d + 1].empty()) break;
    }
    valid = d;
    if (d == p.size() && (!closing || m->distance(sets[d]) < dist_now)) {
      (*out)[static_cast<size_t>(e.id) / 64] |= uint64_t{1} << (e.id % 64);
    }
  }
  m->release(mark);
  std::lock_guard<std::mutex> lock(mu_);
  if (cache_.size() > 50000) cache_.clear();  // bounded memory: a cold cache only costs time
  cache_.emplace(std::move(key), out);
  return out;
}

TokenConstraint::TokenConstraint(std::shared_ptr<const CompiledConstraint> c, const VocabIndex* vocab,
                                 std::vector<int32_t> end_ids, int64_t max_tokens)
    : c_(std::move(c)), vocab_(vocab), end_ids_(std::move(end_ids)), budget_tokens_(max_tokens), matcher_(&c_->grammar()) {}

bool TokenConstraint::apply(float* logits, int32_t n_vocab) {
  const Matcher::Set& set = matcher_.current();
  // Closing: when the tokens left barely hold the shortest completion (one
  // byte a token at worst, plus the end token), every token must shorten it.
  const bool closing = matcher_.distance(set) + 2 >= budget_tokens_;
  std::shared_ptr<const TokenMask> mask;
  if (matcher_.can_continue(set)) {
    mask = c_->mask(&matcher_, set, *vocab_, closing);
    if (closing) {  // no token shortens it: fall back to any allowed token
      bool any = false;
      for (uint64_t w : *mask) any = any || w != 0;
      if (!any) mask = c_->mask(&matcher_, set, *vocab_, false);
    }
  }
  const bool accepting = matcher_.accepting(set) && !end_ids_.empty();
  bool any = accepting, any_finite = false;
  if (mask) {
    for (int32_t id = 0; id < n_vocab && id < vocab_->n_vocab(); ++id) {
      if ((*mask)[static_cast<size_t>(id) / 64] >> (id % 64) & 1) {
        any = true;
        if (logits[id] != -INFINITY) {
          any_finite = true;
          break;
        }
      }
    }
  }
  if (!any) return false;
  std::vector<float> end_logits;
  for (int32_t id : end_ids_) end_logits.push_back(id >= 0 && id < n_vocab ? logits[id] : 0.0f);
  for (int32_t id = 0; id < n_vocab; ++id) {
    const bool ok = mask && id < vocab_->n_vocab() && ((*mask)[static_cast<size_t>(id) / 64] >> (id % 64) & 1);
    if (!ok) {
      logits[id] = -INFINITY;
    } else if (!any_finite && !accepting) {
      // Every allowed token was banned (logit_bias, min_tokens): the
      // constraint wins, so the output still matches.
      logits[id] = 0.0f;
    }
  }
  if (accepting) {
    for (size_t i = 0; i < end_ids_.size(); ++i) {
      const int32_t id = end_ids_[i];
      if (id < 0 || id >= n_vocab) continue;
      // The end of the structure: the answer may end here, whatever
      // min_tokens or logit_bias did to the end token.
      const float l = end_logits[i];
      logits[id] = l == -INFINITY || std::isnan(l) ? 0.0f : l;
    }
  }
  return true;
}

void TokenConstraint::accept(int32_t id) {
  --budget_tokens_;
  if (id < 0 || id >= vocab_->n_vocab()) return;
  if (std::find(end_ids_.begin(), end_ids_.end(), id) != end_ids_.end()) return;
  matcher_.feed(vocab_->piece(id));
}

}  // namespace parallm::constrain
