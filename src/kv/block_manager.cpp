// BlockManager: see block_manager.h for the eviction order and hash chain.
#include "kv/block_manager.h"

#include <algorithm>

#include "util/check.h"
#include "util/log.h"

namespace parallm {

namespace {

uint64_t mix64(uint64_t x) {  // splitmix64 finalizer
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

}  // namespace

uint64_t BlockManager::chain_key(uint64_t parent_key, const int32_t* tokens, int64_t block_size) {
  uint64_t h = mix64(parent_key ^ 0x6a09e667f3bcc909ull);
  for (int64_t i = 0; i < block_size; ++i) h = mix64(h ^ (static_cast<uint64_t>(static_cast<uint32_t>(tokens[i])) + 1));
  return h;
}

BlockManager::BlockManager(int64_t n_blocks, int64_t block_size, bool enable_prefix_caching, KeyFn key_fn)
    : block_size_(block_size), caching_(enable_prefix_caching), key_fn_(key_fn ? key_fn : &chain_key) {
  PARALLM_CHECK(n_blocks > 0 && block_size > 0 && n_blocks < (int64_t{1} << 31));
  blocks_.resize(static_cast<size_t>(n_blocks));
  reusable_.resize(static_cast<size_t>((n_blocks + 63) / 64));
  if (caching_) block_tokens_.resize(static_cast<size_t>(n_blocks * block_size));
  for (int32_t b = 0; b < static_cast<int32_t>(n_blocks); ++b) push_free(b, false);
}

double BlockManager::usage() const { return static_cast<double>(n_used_blocks()) / static_cast<double>(n_blocks()); }

double BlockManager::hit_rate() const {
  return counters_.queried_tokens == 0
             ? 0.0
             : static_cast<double>(counters_.hit_tokens) / static_cast<double>(counters_.queried_tokens);
}

AdmissionResult BlockManager::can_admit(int64_t n_slots) const {
  const int64_t need = blocks_for_slots(n_slots);
  if (need > n_blocks()) {
    return {Admission::kNever,
            strfmt("needs %lld KV blocks (%lld tokens) but the pool holds %lld blocks of %lld tokens: "
                   "shorten the request or give the KV cache more memory",
                   (long long)need, (long long)n_slots, (long long)n_blocks(), (long long)block_size_)};
  }
  if (need > n_free_) {
    return {Admission::kLater, strfmt("needs %lld KV blocks, %lld free now", (long long)need, (long long)n_free_)};
  }
  return {};
}

void BlockManager::push_free(int32_t b, bool at_head) {
  Block& blk = blocks_[static_cast<size_t>(b)];
  PARALLM_CHECK(!blk.in_free_list && blk.ref_count == 0);
  blk.in_free_list = true;
  set_reusable(b, !blk.cached);
  if (at_head) {
    blk.prev = -1;
    blk.next = head_;
    if (head_ >= 0)
      blocks_[static_cast<size_t>(head_)].prev = b;
    else
      tail_ = b;
    head_ = b;
  } else {
    blk.next = -1;
    blk.prev = tail_;
    if (tail_ >= 0)
      blocks_[static_cast<size_t>(tail_)].next = b;
    else
      head_ = b;
    tail_ = b;
  }
  ++n_free_;
}

void BlockManager::unlink_free(int32_t b) {
  Block& blk = blocks_[static_cast<size_t>(b)];
  PARALLM_CHECK(blk.in_free_list);
  if (blk.prev >= 0)
    blocks_[static_cast<size_t>(blk.prev)].next = blk.next;
  else
    head_ = blk.next;
  if (blk.next >= 0)
    blocks_[static_cast<size_t>(blk.next)].prev = blk.prev;
  else
    tail_ = blk.prev;
  blk.prev = blk.next = -1;
  blk.in_free_list = false;
  set_reusable(b, false);
  --n_free_;
}

int32_t BlockManager::pop_free() {
  PARALLM_CHECK(head_ >= 0);
  return take(head_);
}

bool BlockManager::reusable(int64_t b) const { return reusable_[static_cast<size_t>(b) / 64] >> (b % 64) & 1; }

void BlockManager::set_reusable(int64_t b, bool on) {
  uint64_t& w = reusable_[static_cast<size_t>(b) / 64];
  const uint64_t bit = uint64_t{1} << (b % 64);
  w = on ? w | bit : w & ~bit;
}

int64_t BlockManager::next_reusable(int64_t b, bool value) const {
  const int64_t n = n_blocks();
  if (b >= n) return n;
  const uint64_t flip = value ? 0 : ~uint64_t{0};
  size_t w = static_cast<size_t>(b) / 64;
  uint64_t word = (reusable_[w] ^ flip) & (~uint64_t{0} << (b % 64));
  while (word == 0) {
    if (++w >= reusable_.size()) return n;
    word = reusable_[w] ^ flip;
  }
  return std::min<int64_t>(n, static_cast<int64_t>(w * 64) + __builtin_ctzll(word));
}

// The longest run of reusable blocks (the first of equal ones), a word of the
// bitmap at a time: this runs for every new sequence, and a block-by-block
// scan of a large pool was a quarter of `parallm simulate`'s time.
int32_t BlockManager::roomy_start(int64_t n) const {
  int64_t best_start = -1, best_len = 0;
  for (int64_t b = next_reusable(0, true); b < n_blocks();) {
    const int64_t end = next_reusable(b, false);
    if (end - b > best_len) best_start = b, best_len = end - b;
    b = next_reusable(end, true);
  }
  if (best_len < n) return -1;
  return static_cast<int32_t>(best_start + (best_len - n) / 2);
}

int32_t BlockManager::take(int32_t b) {
  unlink_free(b);
  Block& blk = blocks_[static_cast<size_t>(b)];
  if (blk.cached) {
    prefix_map_.erase(blk.key);
    blk.cached = false;
    ++counters_.evictions;
  }
  blk.ref_count = 1;
  return b;
}

bool BlockManager::matches(int32_t b, uint64_t parent_key, const int32_t* tokens) const {
  const Block& blk = blocks_[static_cast<size_t>(b)];
  if (!blk.cached || blk.parent_key != parent_key) return false;
  const int32_t* stored = block_tokens_.data() + static_cast<size_t>(b) * static_cast<size_t>(block_size_);
  return std::equal(stored, stored + block_size_, tokens);
}

void BlockManager::lookup(const int32_t* tokens, int64_t n_tokens, PrefixHit* hit) const {
  hit->clear();
  if (!caching_ || n_tokens <= 1) return;
  const int64_t max_blocks = (n_tokens - 1) / block_size_;  // keep >= 1 token to compute
  uint64_t parent = kRootKey;
  for (int64_t i = 0; i < max_blocks; ++i) {
    const int32_t* t = tokens + i * block_size_;
    const uint64_t key = key_fn_(parent, t, block_size_);
    auto it = prefix_map_.find(key);
    if (it == prefix_map_.end() || !matches(it->second, parent, t)) break;
    hit->blocks.push_back(it->second);
    hit->keys.push_back(key);
    parent = key;
  }
}

bool BlockManager::allocate(uint64_t seq, const PrefixHit& hit, int64_t n_slots, int64_t n_query_tokens) {
  PARALLM_CHECK(!has(seq));
  const int64_t n_hit = static_cast<int64_t>(hit.blocks.size());
  PARALLM_CHECK(n_slots >= n_hit * block_size_);
  const int64_t fresh = blocks_for_slots(n_slots) - n_hit;
  int64_t hits_on_free = 0;  // touching these takes them off the free list
  for (int32_t b : hit.blocks) hits_on_free += blocks_[static_cast<size_t>(b)].ref_count == 0 ? 1 : 0;
  if (fresh > n_free_ - hits_on_free) return false;
  SeqBlocks& s = seqs_[seq];
  s.table.reserve(static_cast<size_t>(blocks_for_slots(n_slots)));
  for (int32_t b : hit.blocks) {
    Block& blk = blocks_[static_cast<size_t>(b)];
    if (blk.ref_count == 0) unlink_free(b);
    ++blk.ref_count;
    s.table.push_back(b);
  }
  const int32_t start = fresh > 0 ? roomy_start(fresh) : -1;
  for (int64_t i = 0; i < fresh; ++i)
    s.table.push_back(start >= 0 ? take(start + static_cast<int32_t>(i)) : pop_free());
  s.n_keyed = n_hit;
  s.last_key = n_hit > 0 ? hit.keys.back() : kRootKey;
  counters_.queried_tokens += static_cast<uint64_t>(n_query_tokens);
  counters_.hit_tokens += static_cast<uint64_t>(n_hit * block_size_);
  return true;
}

bool BlockManager::grow(uint64_t seq, int64_t n_slots) {
  auto it = seqs_.find(seq);
  PARALLM_CHECK(it != seqs_.end());
  std::vector<int32_t>& table = it->second.table;
  const int64_t need = blocks_for_slots(n_slots) - static_cast<int64_t>(table.size());
  if (need <= 0) return true;
  if (need > n_free_) return false;
  for (int64_t i = 0; i < need; ++i) {
    const int64_t after = table.empty() ? -1 : table.back() + 1;
    table.push_back(after >= 0 && after < n_blocks() && reusable(after) ? take(static_cast<int32_t>(after))
                                                                        : pop_free());
  }
  return true;
}

void BlockManager::cache_full_blocks(uint64_t seq, const int32_t* tokens, int64_t n_computed) {
  if (!caching_) return;
  auto it = seqs_.find(seq);
  PARALLM_CHECK(it != seqs_.end());
  SeqBlocks& s = it->second;
  const int64_t n_full = std::min<int64_t>(n_computed / block_size_, static_cast<int64_t>(s.table.size()));
  for (int64_t i = s.n_keyed; i < n_full; ++i) {
    const int32_t* t = tokens + i * block_size_;
    const uint64_t key = key_fn_(s.last_key, t, block_size_);
    const int32_t b = s.table[static_cast<size_t>(i)];
    Block& blk = blocks_[static_cast<size_t>(b)];
    // NOTE: when another block already holds this key (two sequences computed
    // the same prefix at once), ours stays uncached; the chain continues by key.
    if (!blk.cached && prefix_map_.emplace(key, b).second) {
      blk.cached = true;
      blk.key = key;
      blk.parent_key = s.last_key;
      std::copy(t, t + block_size_, block_tokens_.data() + static_cast<size_t>(b) * static_cast<size_t>(block_size_));
    }
    s.last_key = key;
    s.n_keyed = i + 1;
  }
}

void BlockManager::free(uint64_t seq) {
  auto it = seqs_.find(seq);
  if (it == seqs_.end()) return;
  const std::vector<int32_t>& table = it->second.table;
  for (auto r = table.rbegin(); r != table.rend(); ++r) {
    Block& blk = blocks_[static_cast<size_t>(*r)];
    PARALLM_CHECK(blk.ref_count > 0);
    if (--blk.ref_count == 0) push_free(*r, !blk.cached);
  }
  seqs_.erase(it);
}

const std::vector<int32_t>& BlockManager::table(uint64_t seq) const {
  auto it = seqs_.find(seq);
  PARALLM_CHECK(it != seqs_.end());
  return it->second.table;
}

std::vector<int32_t> BlockManager::free_list() const {
  std::vector<int32_t> out;
  for (int32_t b = head_; b >= 0; b = blocks_[static_cast<size_t>(b)].next) out.push_back(b);
  return out;
}

}  // namespace parallm
