// Token masks (see token_mask.h).
#include "constrain/token_mask.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <numeric>

namespace parallm::constrain {

namespace {

// logits[id] = -inf where the mask's bit is clear (ids past n_mask count as
// clear). A position's allowed ids are scattered (free text allows about half
// of a vocabulary in no pattern): a per-id branch mispredicted on most of
// them, 4 ns an id, 130 us a step of each sequence, more than the rest of
// the mask's work together; AVX2 turns 8 bits into a blend of 8 logits.
uint64_t mask_word(const uint64_t* mask, int32_t n_mask, int32_t w0) {
  if (w0 >= n_mask) return 0;
  const uint64_t w = mask[w0 / 64];
  return n_mask - w0 >= 64 ? w : w & ((uint64_t{1} << (n_mask - w0)) - 1);
}

__attribute__((target("avx2"))) void mask_logits_avx2(float* logits, const uint64_t* mask, int32_t n_mask,
                                                      int32_t n_vocab) {
  const __m256i sel = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
  const __m256 neg_inf = _mm256_set1_ps(-INFINITY);
  int32_t w0 = 0;
  for (; w0 + 64 <= n_vocab; w0 += 64) {
    const uint64_t w = mask_word(mask, n_mask, w0);
    if (w == ~uint64_t{0}) continue;
    float* l = logits + w0;
    for (int k = 0; k < 8; ++k) {
      const __m256i b = _mm256_set1_epi32(static_cast<int>(w >> (8 * k) & 0xff));
      const __m256 keep = _mm256_castsi256_ps(_mm256_cmpeq_epi32(_mm256_and_si256(b, sel), sel));
      _mm256_storeu_ps(l + 8 * k, _mm256_blendv_ps(neg_inf, _mm256_loadu_ps(l + 8 * k), keep));
    }
  }
  const uint64_t w = mask_word(mask, n_mask, w0);
  for (int32_t i = 0; w0 + i < n_vocab; ++i) {
    if (!(w >> i & 1)) logits[w0 + i] = -INFINITY;
  }
}

void mask_logits_scalar(float* logits, const uint64_t* mask, int32_t n_mask, int32_t n_vocab) {
  for (int32_t w0 = 0; w0 < n_vocab; w0 += 64) {
    const uint64_t w = mask_word(mask, n_mask, w0);
    if (w == ~uint64_t{0}) continue;
    for (int32_t i = 0; i < 64 && w0 + i < n_vocab; ++i) {
      if (!(w >> i & 1)) logits[w0 + i] = -INFINITY;
    }
  }
}

void mask_logits(float* logits, const uint64_t* mask, int32_t n_mask, int32_t n_vocab) {
  static const bool avx2 = __builtin_cpu_supports("avx2");
  if (avx2) {
    mask_logits_avx2(logits, mask, n_mask, n_vocab);
  } else {
    mask_logits_scalar(logits, mask, n_mask, n_vocab);
  }
}

}  // namespace

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
    sorted_.push_back({id, l, static_cast<uint32_t>(bytes_.size()), static_cast<int32_t>(p.size())});
    bytes_ += p;
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

std::shared_ptr<const PositionMask> CompiledConstraint::mask(Matcher* m, const Matcher::Set& set,
                                                             const VocabIndex& vocab) const {
  std::vector<uint32_t> key = m->key(set);
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
  auto out = std::make_shared<const PositionMask>(walk(m, set, vocab, kUnreachable));
  std::lock_guard<std::mutex> lock(mu_);
  if (cache_.size() > 50000) cache_.clear();  // bounded memory: a cold cache only costs time
  cache_.emplace(std::move(key), out);
  return out;
}

PositionMask CompiledConstraint::walk(Matcher* m, const Matcher::Set& set, const VocabIndex& vocab,
                                      int32_t max_dist_after) {
  PositionMask out;
  out.bits.assign((static_cast<size_t>(vocab.n_vocab()) + 63) / 64, 0);
  const int32_t dist_now = m->distance(set);
  const size_t mark = m->mark();
  // sets[d]: the matcher set after the first d bytes of the current entry.
  thread_local std::vector<Matcher::Set> sets;
  if (sets.size() < vocab.max_len() + 1) sets.resize(vocab.max_len() + 1);
  sets[0] = set;
  size_t valid = 0;                      // bytes of the previous entry that fed (sets[0..valid] hold)
  std::vector<Matcher::Set>& at = sets;  // one thread-local lookup, not one per byte
  const char* bytes = vocab.sorted_bytes();
  for (const VocabIndex::Entry& e : vocab.sorted()) {
    // The previous entry failed at byte `valid` and this one shares it.
    if (static_cast<size_t>(e.lcp) > valid) continue;
    const char* p = bytes + e.begin;
    const size_t len = static_cast<size_t>(e.len);
    size_t d = static_cast<size_t>(e.lcp);
    for (; d < len; ++d) {
      m->step(at[d], static_cast<uint8_t>(p[d]), &at[d + 1]);
      if (at[d + 1].empty()) break;
    }
    valid = d;
    if (d < len) continue;
    const int32_t after = m->distance(at[d]);
    if (after > max_dist_after) continue;
    out.bits[static_cast<size_t>(e.id) / 64] |= uint64_t{1} << (e.id % 64);
    out.max_dist_after = std::max(out.max_dist_after, after);
    if (after > dist_now) out.lengthening.push_back({e.id, after});
  }
  m->release(mark);
  return out;
}

TokenConstraint::TokenConstraint(std::shared_ptr<const CompiledConstraint> c, const VocabIndex* vocab,
                                 std::vector<int32_t> end_ids, int64_t max_tokens)
    : c_(std::move(c)),
      vocab_(vocab),
      end_ids_(std::move(end_ids)),
      budget_tokens_(max_tokens),
      matcher_(&c_->grammar()) {}

bool TokenConstraint::apply(float* logits, int32_t n_vocab) {
  const Matcher::Set& set = matcher_.current();
  std::shared_ptr<const PositionMask> cached;
  PositionMask narrowed;
  const TokenMask* mask = nullptr;
  if (matcher_.can_continue(set)) {
    cached = c_->mask(&matcher_, set, *vocab_);
    mask = &cached->bits;
    // Tokens left after this one; each adds at least one byte.
    const int64_t left = budget_tokens_ - 1;
    if (cached->max_dist_after > left) {
      // Where the structure may end, the end tokens are a choice too: a
      // narrowed mask with no token left in it then means "end here".
      const bool can_end = matcher_.accepting(set) && !end_ids_.empty();
      bool any = false;
      if (matcher_.distance(set) <= left) {
        // The cached mask less the tokens that lengthen the completion past the budget.
        narrowed.bits = cached->bits;
        for (const auto& [id, after] : cached->lengthening) {
          if (after > left) narrowed.bits[static_cast<size_t>(id) / 64] &= ~(uint64_t{1} << (id % 64));
        }
        any = can_end;
        for (uint64_t w : narrowed.bits) any = any || w != 0;
      }
      if (!any) {  // the budget cannot hold it: at least come closer
        narrowed = CompiledConstraint::walk(&matcher_, set, *vocab_, matcher_.distance(set) - 1);
        any = can_end;
        for (uint64_t w : narrowed.bits) any = any || w != 0;
      }
      if (any) mask = &narrowed.bits;
    }
  }
  const bool accepting = matcher_.accepting(set) && !end_ids_.empty();
  const int32_t n_mask = mask ? std::min(n_vocab, vocab_->n_vocab()) : 0;
  bool any = accepting, any_finite = false;
  for (int32_t w0 = 0; w0 < n_mask && !any_finite; w0 += 64) {
    for (uint64_t w = (*mask)[static_cast<size_t>(w0) / 64]; w != 0; w &= w - 1) {
      const int32_t id = w0 + __builtin_ctzll(w);
      if (id >= n_mask) break;
      any = true;
      if (logits[id] != -INFINITY) {
        any_finite = true;
        break;
      }
    }
  }
  if (!any) return false;
  std::vector<float> end_logits;
  for (int32_t id : end_ids_) end_logits.push_back(id >= 0 && id < n_vocab ? logits[id] : 0.0f);
  if (!any_finite && !accepting) {
    // Every allowed token was banned (logit_bias, min_tokens): the
    // constraint wins, so the output still matches.
    for (int32_t id = 0; id < n_mask; ++id) {
      if ((*mask)[static_cast<size_t>(id) / 64] >> (id % 64) & 1) logits[id] = 0.0f;
    }
  }
  mask_logits(logits, mask ? mask->data() : nullptr, n_mask, n_vocab);
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

void TokenConstraint::force_end(float* logits, int32_t n_vocab) const {
  bool any = false;
  for (int32_t id : end_ids_) any = any || (id >= 0 && id < n_vocab);
  if (!any) return;
  std::vector<float> keep;
  for (int32_t id : end_ids_) keep.push_back(id >= 0 && id < n_vocab ? logits[id] : 0.0f);
  for (int32_t id = 0; id < n_vocab; ++id) logits[id] = -INFINITY;
  for (size_t i = 0; i < end_ids_.size(); ++i) {
    const int32_t id = end_ids_[i];
    if (id >= 0 && id < n_vocab) logits[id] = keep[i] == -INFINITY || std::isnan(keep[i]) ? 0.0f : keep[i];
  }
}

void TokenConstraint::accept(int32_t id) {
  --budget_tokens_;
  if (id < 0 || id >= vocab_->n_vocab()) return;
  if (std::find(end_ids_.begin(), end_ids_.end(), id) != end_ids_.end()) return;
  matcher_.feed(vocab_->piece(id));
}

}  // namespace parallm::constrain
