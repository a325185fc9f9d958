// From a grammar position to the set of tokens allowed next.
//
// VocabIndex sorts the vocabulary's byte strings once, with each entry's
// common prefix length with the one before it: walking the sorted list
// with one matcher set per prefix depth visits every distinct prefix once
// (the vocabulary trie, without building one), and a prefix the grammar
// rejects skips every token that extends it.
//
// CompiledConstraint is what a request carries: the grammar and a cache of
// masks keyed by the matcher position (Matcher::key), shared by every
// sequence under the same constraint (n > 1, and requests with the same
// schema: the compile cache hands out the same object). Inside free text the
// position repeats, so most steps are a cache hit.
//
// TokenConstraint is one sequence's state: its matcher, the mask for now,
// and the tokens that end generation (allowed only where the grammar
// accepts). Near the end of max_tokens it narrows the mask to tokens after
// which the shortest completion (grammar.h's distances, in bytes, one byte a
// token at worst) still fits in the tokens left, so a structure finishes
// within the budget whenever the budget holds its shortest completion; the
// cached mask records the longest such completion its tokens leave, so far
// from the end no walk is needed.
#pragma once
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "constrain/grammar.h"
#include "constrain/matcher.h"

namespace parallm::constrain {

class VocabIndex {
 public:
  // pieces[id]: the token's bytes; empty = never allowed (control tokens).
  explicit VocabIndex(const std::vector<std::string>& pieces);
  int32_t n_vocab() const { return n_vocab_; }
  struct Entry {
    int32_t id;
    int32_t lcp;     // bytes shared with the entry before
    uint32_t begin;  // the piece: sorted_bytes()[begin, begin + len)
    int32_t len;
  };
  const std::vector<Entry>& sorted() const { return sorted_; }
  // Every piece in sorted order, back to back. NOTE: a miss walks the whole
  // list; reading each piece through its id (one std::string each, in id
  // order) was a cache miss per entry, most of a walk's 3 ms.
  const char* sorted_bytes() const { return bytes_.data(); }
  const std::string& piece(int32_t id) const { return pieces_[static_cast<size_t>(id)]; }
  size_t max_len() const { return max_len_; }

 private:
  int32_t n_vocab_;
  std::vector<std::string> pieces_;
  std::vector<Entry> sorted_;
  std::string bytes_;
  size_t max_len_ = 0;
};

using TokenMask = std::vector<uint64_t>;  // bit id set: allowed; n_vocab bits

struct PositionMask {
  TokenMask bits;
  int32_t max_dist_after = 0;  // the longest shortest-completion (bytes) any allowed token leaves
  // Allowed tokens that leave a longer shortest completion than the position
  // has (id, its distance after): the only ones a tight budget removes, so
  // narrowing a cached mask needs no walk.
  std::vector<std::pair<int32_t, int32_t>> lengthening;
};

struct MaskStats {
  uint64_t hits = 0, misses = 0;
};

class CompiledConstraint {
 public:
  CompiledConstraint(Grammar grammar, std::string description)
      : grammar_(std::move(grammar)), description_(std::move(description)) {}
  const Grammar& grammar() const { return grammar_; }
  const std::string& description() const { return description_; }

  // The mask for `set` of `m` (cached; computed on a miss under no lock).
  std::shared_ptr<const PositionMask> mask(Matcher* m, const Matcher::Set& set, const VocabIndex& vocab) const;
  // Uncached: only tokens after which the shortest completion has at most
  // max_dist_after bytes (the end of a max_tokens budget).
  static PositionMask walk(Matcher* m, const Matcher::Set& set, const VocabIndex& vocab, int32_t max_dist_after);
  MaskStats stats() const;

 private:
  Grammar grammar_;
  std::string description_;
  struct KeyHash {
    size_t operator()(const std::vector<uint32_t>& k) const;
  };
  mutable std::mutex mu_;
  mutable std::unordered_map<std::vector<uint32_t>, std::shared_ptr<const PositionMask>, KeyHash> cache_;
  mutable const VocabIndex* cache_vocab_ = nullptr;
  mutable MaskStats stats_;
};

class TokenConstraint {
 public:
  TokenConstraint(std::shared_ptr<const CompiledConstraint> c, const VocabIndex* vocab, std::vector<int32_t> end_ids,
                  int64_t max_tokens);
  // Sets every logit the constraint forbids to -inf. Returns false (and
  // leaves the logits alone) when nothing at all would be left.
  bool apply(float* logits, int32_t n_vocab);
  // Dead end: only the end tokens stay (nothing changes without any).
  void force_end(float* logits, int32_t n_vocab) const;
  // The sampled token: advances the matcher (end tokens and unknown ids are ignored).
  void accept(int32_t id);
  bool matched() const { return matcher_.accepting(); }
  bool complete() const { return matcher_.accepting() && !matcher_.can_continue(matcher_.current()); }

 private:
  std::shared_ptr<const CompiledConstraint> c_;
  const VocabIndex* vocab_;
  std::vector<int32_t> end_ids_;
  int64_t budget_tokens_;  // tokens left under max_tokens
  Matcher matcher_;
};

}  // namespace parallm::constrain
