// BlockManager: the logic side of the paged KV cache (STYLE.md principle 4).
// It owns integer block ids, never memory: the engine's KvPool holds the
// tensors, and a "simulated pool" for tests or the planner is simply this
// class with no KvPool behind it.
//
//  - Reference counts: a block is shared by every sequence whose prefix it
//    holds; it returns to the free list when the last one lets go.
//  - Free list in eviction order (head = reused first): blocks that hold no
//    cached prefix go to the head (nothing is lost reusing them); cached ones
//    go to the tail, a sequence's last block first, so its prefix blocks are
//    evicted last (a hit needs the chain from the start). A cached free block
//    that gets a hit leaves the list; one popped for reuse is evicted from the
//    prefix map. Removal from the middle is O(1) (intrusive doubly linked list).
//  - Prefix map: a FULL block's key is hash(parent key, its block_size tokens),
//    a chain from the sequence start. A hit verifies the stored tokens and the
//    parent key, so a false hit needs a 64-bit collision of two chains.
//  - Placement: a new sequence's fresh blocks go mid-way into the longest run
//    of free uncached blocks, and a growing sequence takes the block after
//    its last one when that is free and uncached, so a sequence's blocks
//    mostly lie side by side (taking an uncached block out of list order
//    loses nothing). Otherwise blocks come from the head of the free list.
//    NOTE: CPU attention reads a sequence's blocks in order; scattered 13 KB
//    runs (12 heads of q8_0) read 30-45% slower than the same bytes side by
//    side (32 sequences at context 160: the kernel lab's "-scattered" rows;
//    on huge pages as well).
//  - Admission: ok / later (not enough free blocks now) / never (more than the
//    whole pool), with a reason.
#pragma once
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace parallm {

enum class Admission { kOk, kLater, kNever };

struct AdmissionResult {
  Admission status = Admission::kOk;
  std::string reason;  // empty when kOk
};

// Cached full blocks that start a token sequence (result of lookup()).
struct PrefixHit {
  std::vector<int32_t> blocks;  // [n_hit_blocks] block ids, in sequence order
  std::vector<uint64_t> keys;   // [n_hit_blocks] chain key of each block
  void clear() {
    blocks.clear();
    keys.clear();
  }
};

struct KvCounters {
  uint64_t queried_tokens = 0;  // tokens looked up at admission
  uint64_t hit_tokens = 0;      // of which found in the prefix cache
  uint64_t evictions = 0;       // cached blocks reused for something else
};

class BlockManager {
 public:
  // The chain key of a full block from its parent's key and its tokens.
  using KeyFn = uint64_t (*)(uint64_t parent_key, const int32_t* tokens, int64_t block_size);
  // key_fn: chain_key unless a test wants collisions.
  BlockManager(int64_t n_blocks, int64_t block_size, bool enable_prefix_caching, KeyFn key_fn = nullptr);

  int64_t n_blocks() const { return static_cast<int64_t>(blocks_.size()); }
  int64_t block_size() const { return block_size_; }
  int64_t n_free_blocks() const { return n_free_; }  // ref count 0, cached or not
  int64_t n_used_blocks() const { return n_blocks() - n_free_; }
  double usage() const;  // used / total in [0, 1]
  int64_t blocks_for_slots(int64_t n_slots) const { return (n_slots + block_size_ - 1) / block_size_; }
  const KvCounters& counters() const { return counters_; }
  double hit_rate() const;  // hit / queried tokens (0 before any query)

  // Can a sequence that needs n_slots KV slots at most ever run (never), run now (ok)?
  AdmissionResult can_admit(int64_t n_slots) const;

  // The longest chain of cached full blocks starting tokens[0..n_tokens) that
  // leaves at least one token to compute (the last token's logits are needed).
  void lookup(const int32_t* tokens, int64_t n_tokens, PrefixHit* hit) const;

  // New sequence `seq`: its table is the hit blocks (shared) followed by fresh
  // blocks up to n_slots slots. Returns false, changing nothing, when the pool
  // has too few free blocks. n_query_tokens feeds the hit-rate counters.
  bool allocate(uint64_t seq, const PrefixHit& hit, int64_t n_slots, int64_t n_query_tokens);
  // Grows seq's table to hold n_slots slots; false (no change) when the pool cannot.
  bool grow(uint64_t seq, int64_t n_slots);
  // Registers seq's full blocks among tokens[0..n_computed) in the prefix map.
  void cache_full_blocks(uint64_t seq, const int32_t* tokens, int64_t n_computed);
  // Releases seq's blocks (last block first, see the eviction order above).
  void free(uint64_t seq);

  bool has(uint64_t seq) const { return seqs_.count(seq) != 0; }
  const std::vector<int32_t>& table(uint64_t seq) const;  // [n blocks] of seq

  // Introspection (tests).
  int32_t ref_count(int32_t block) const { return blocks_[static_cast<size_t>(block)].ref_count; }
  bool is_cached(int32_t block) const { return blocks_[static_cast<size_t>(block)].cached; }
  std::vector<int32_t> free_list() const;  // head (next reused) first

  // The chain key of a full block: hash(parent key, tokens[0..block_size)).
  static uint64_t chain_key(uint64_t parent_key, const int32_t* tokens, int64_t block_size);
  static constexpr uint64_t kRootKey = 0x9e3779b97f4a7c15ull;

 private:
  struct Block {
    int32_t ref_count = 0;
    bool cached = false;  // in the prefix map under `key`
    uint64_t key = 0, parent_key = 0;
    int32_t prev = -1, next = -1;  // free-list links (-1: none)
    bool in_free_list = false;
  };
  struct SeqBlocks {
    std::vector<int32_t> table;
    int64_t n_keyed = 0;  // leading blocks whose chain key is known
    uint64_t last_key = kRootKey;
  };

  int32_t pop_free();              // head of the free list, evicting its cache entry
  int32_t take(int32_t b);         // free block b into use (evicting its cache entry)
  bool reusable(int64_t b) const;  // free and holding no cached prefix
  void set_reusable(int64_t b, bool on);
  int64_t next_reusable(int64_t b, bool value) const;  // first block >= b with reusable() == value, or n_blocks()
  // The first of n side-by-side reusable blocks mid-way into the longest run
  // of them (room to grow after, and for later sequences before); -1: none.
  int32_t roomy_start(int64_t n) const;
  void push_free(int32_t b, bool at_head);
  void unlink_free(int32_t b);
  bool matches(int32_t b, uint64_t parent_key, const int32_t* tokens) const;

  int64_t block_size_;
  bool caching_;
  KeyFn key_fn_;
  std::vector<Block> blocks_;          // [n_blocks]
  std::vector<uint64_t> reusable_;     // [n_blocks / 64] bit b: reusable(b), for roomy_start's scan
  std::vector<int32_t> block_tokens_;  // [n_blocks, block_size] tokens of cached blocks
  int32_t head_ = -1, tail_ = -1;
  int64_t n_free_ = 0;
  std::unordered_map<uint64_t, int32_t> prefix_map_;  // chain key -> block
  std::unordered_map<uint64_t, SeqBlocks> seqs_;
  KvCounters counters_;
};

}  // namespace parallm
