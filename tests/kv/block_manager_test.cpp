// BlockManager without a model: exact block ids, reference counts, free-list
// (eviction) order, hash-chain hits with token verification, admission.
#include "kv/block_manager.h"

#include <gtest/gtest.h>

#include <numeric>
#include <vector>

namespace parallm {
namespace {

using Ids = std::vector<int32_t>;

std::vector<int32_t> seq_tokens(int n, int start) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), start);
  return t;
}

// Allocates `seq` for tokens with its prefix hit; returns the hit block count.
int64_t admit(BlockManager& kv, uint64_t seq, const std::vector<int32_t>& tokens, int64_t n_slots) {
  PrefixHit hit;
  kv.lookup(tokens.data(), static_cast<int64_t>(tokens.size()), &hit);
  EXPECT_TRUE(kv.allocate(seq, hit, n_slots, static_cast<int64_t>(tokens.size())));
  return static_cast<int64_t>(hit.blocks.size());
}

TEST(BlockManager, FreshPoolPlacesASequenceMidPoolAndGrowsItInPlace) {
  BlockManager kv(8, 4, true);
  EXPECT_EQ(kv.free_list(), (Ids{0, 1, 2, 3, 4, 5, 6, 7}));
  auto t = seq_tokens(6, 10);
  EXPECT_EQ(admit(kv, 1, t, 6), 0);
  EXPECT_EQ(kv.table(1), (Ids{3, 4}));  // mid-way into the free run 0..7
  EXPECT_EQ(kv.ref_count(3), 1);
  EXPECT_EQ(kv.ref_count(4), 1);
  EXPECT_EQ(kv.n_free_blocks(), 6);
  EXPECT_DOUBLE_EQ(kv.usage(), 2.0 / 8.0);
  EXPECT_TRUE(kv.grow(1, 9));  // 9 slots: a third block, the one after the last
  EXPECT_EQ(kv.table(1), (Ids{3, 4, 5}));
  EXPECT_TRUE(kv.grow(1, 9));  // no-op
  EXPECT_EQ(kv.table(1), (Ids{3, 4, 5}));
  EXPECT_EQ(kv.free_list(), (Ids{0, 1, 2, 6, 7}));
}

// Sequences land mid-way into the longest free runs, so each has room to
// grow side by side; one that runs into another continues from the head of
// the free list, and side by side again from there.
TEST(BlockManager, SequencesSpreadOverThePoolAndGrowSideBySide) {
  BlockManager kv(64, 4, false);
  PrefixHit none;
  for (uint64_t seq = 1; seq <= 4; ++seq) ASSERT_TRUE(kv.allocate(seq, none, 8, 8));
  EXPECT_EQ(kv.table(1), (Ids{31, 32}));  // run 0..63
  EXPECT_EQ(kv.table(2), (Ids{14, 15}));  // runs 0..30 and 33..63: the first longest
  EXPECT_EQ(kv.table(3), (Ids{47, 48}));  // run 33..63
  EXPECT_EQ(kv.table(4), (Ids{22, 23}));  // run 16..30
  ASSERT_TRUE(kv.grow(2, 8 * 4));
  EXPECT_EQ(kv.table(2), (Ids{14, 15, 16, 17, 18, 19, 20, 21}));
  ASSERT_TRUE(kv.grow(2, 10 * 4));  // 22 is sequence 4's: the head of the free list, then on from it
  EXPECT_EQ(kv.table(2), (Ids{14, 15, 16, 17, 18, 19, 20, 21, 0, 1}));
}

TEST(BlockManager, FreeOrderKeepsCachedPrefixBlocksLongest) {
  BlockManager kv(8, 4, true);
  auto t = seq_tokens(10, 10);
  admit(kv, 1, t, 10);                    // blocks 2 3 4
  kv.cache_full_blocks(1, t.data(), 10);  // blocks 2 and 3 are full: cached; 4 is partial
  EXPECT_TRUE(kv.is_cached(2));
  EXPECT_TRUE(kv.is_cached(3));
  EXPECT_FALSE(kv.is_cached(4));
  kv.free(1);
  // Uncached block 4 goes to the head (reused first); cached ones to the tail,
  // last block first, so the chain's first block is evicted last.
  EXPECT_EQ(kv.free_list(), (Ids{4, 0, 1, 5, 6, 7, 3, 2}));
  EXPECT_EQ(kv.n_used_blocks(), 0);
  EXPECT_EQ(kv.ref_count(2), 0);
}

TEST(BlockManager, HashChainHitSharesBlocksAndCountsHits) {
  BlockManager kv(8, 4, true);
  auto t = seq_tokens(10, 10);
  admit(kv, 1, t, 10);
  kv.cache_full_blocks(1, t.data(), 10);
  // A second sequence with the same prompt while the first (2 3 4) is alive
  // shares 2 and 3; its fresh block goes mid-way into the free run 5..7.
  EXPECT_EQ(admit(kv, 2, t, 10), 2);
  EXPECT_EQ(kv.table(2), (Ids{2, 3, 6}));
  EXPECT_EQ(kv.ref_count(2), 2);
  EXPECT_EQ(kv.ref_count(3), 2);
  EXPECT_EQ(kv.ref_count(6), 1);
  EXPECT_EQ(kv.counters().queried_tokens, 20u);
  EXPECT_EQ(kv.counters().hit_tokens, 8u);
  EXPECT_DOUBLE_EQ(kv.hit_rate(), 8.0 / 20.0);
  kv.free(1);  // 2 and 3 still held by seq 2; 4 returns to the head
  EXPECT_EQ(kv.ref_count(2), 1);
  EXPECT_EQ(kv.free_list(), (Ids{4, 0, 1, 5, 7}));
  kv.free(2);
  EXPECT_EQ(kv.free_list(), (Ids{6, 4, 0, 1, 5, 7, 3, 2}));
  // After both are gone, a hit takes cached free blocks back off the list.
  EXPECT_EQ(admit(kv, 3, t, 10), 2);
  EXPECT_EQ(kv.table(3), (Ids{2, 3, 5}));  // fresh: mid-way into the free run 4..7
  EXPECT_EQ(kv.free_list(), (Ids{6, 4, 0, 1, 7}));
}

TEST(BlockManager, HitLeavesAtLeastOneTokenToCompute) {
  BlockManager kv(8, 4, true);
  auto t = seq_tokens(8, 10);
  admit(kv, 1, t, 8);
  kv.cache_full_blocks(1, t.data(), 8);
  PrefixHit hit;
  kv.lookup(t.data(), 8, &hit);  // both blocks (3 4) cached, but the last token must be recomputed
  EXPECT_EQ(hit.blocks, (Ids{3}));
  auto longer = seq_tokens(9, 10);
  kv.lookup(longer.data(), 9, &hit);
  EXPECT_EQ(hit.blocks, (Ids{3, 4}));
}

TEST(BlockManager, ChainNeedsTheSameParent) {
  BlockManager kv(8, 4, true);
  std::vector<int32_t> a = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  std::vector<int32_t> b = {9, 9, 9, 9, 5, 6, 7, 8, 9};  // same second block, other first block
  admit(kv, 1, a, 9);
  kv.cache_full_blocks(1, a.data(), 9);
  const int32_t a_first = kv.table(1)[0];
  PrefixHit hit;
  kv.lookup(b.data(), 9, &hit);
  EXPECT_TRUE(hit.blocks.empty());
  std::vector<int32_t> c = {1, 2, 3, 4, 5, 6, 7, 0, 9};  // first block matches, second differs
  kv.lookup(c.data(), 9, &hit);
  EXPECT_EQ(hit.blocks, (Ids{a_first}));
}

// A key that collides for any permutation of a block's tokens.
uint64_t sum_key(uint64_t parent, const int32_t* t, int64_t n) {
  uint64_t s = parent;
  for (int64_t i = 0; i < n; ++i) s += static_cast<uint64_t>(t[i]);
  return s;
}

TEST(BlockManager, HitVerifiesTokensOnKeyCollision) {
  BlockManager kv(8, 4, true, &sum_key);
  std::vector<int32_t> a = {1, 2, 3, 4, 0};
  std::vector<int32_t> b = {4, 3, 2, 1, 0};  // same key, other tokens
  admit(kv, 1, a, 5);
  kv.cache_full_blocks(1, a.data(), 5);
  PrefixHit hit;
  kv.lookup(b.data(), 5, &hit);
  EXPECT_TRUE(hit.blocks.empty());
  const int32_t a_first = kv.table(1)[0];
  kv.lookup(a.data(), 5, &hit);
  EXPECT_EQ(hit.blocks, (Ids{a_first}));
  // b computes its own block; the key is taken, so b's block stays uncached.
  EXPECT_EQ(admit(kv, 2, b, 5), 0);
  kv.cache_full_blocks(2, b.data(), 5);
  EXPECT_FALSE(kv.is_cached(kv.table(2)[0]));
  EXPECT_TRUE(kv.is_cached(a_first));
}

TEST(BlockManager, EvictsLeastRecentlyFreedCachedBlocks) {
  BlockManager kv(4, 4, true);
  auto a = seq_tokens(9, 100);
  admit(kv, 1, a, 9);                    // 0 1 2
  kv.cache_full_blocks(1, a.data(), 9);  // 0 1 cached
  kv.free(1);
  EXPECT_EQ(kv.free_list(), (Ids{2, 3, 1, 0}));
  auto b = seq_tokens(12, 500);
  admit(kv, 2, b, 12);  // takes 2 3 1: block 1 evicted
  EXPECT_EQ(kv.table(2), (Ids{2, 3, 1}));
  EXPECT_EQ(kv.counters().evictions, 1u);
  EXPECT_FALSE(kv.is_cached(1));
  EXPECT_TRUE(kv.is_cached(0));
  PrefixHit hit;
  kv.lookup(a.data(), 9, &hit);
  EXPECT_EQ(hit.blocks, (Ids{0}));  // the chain still hits its first block
  kv.free(2);
}

TEST(BlockManager, AllocateAndGrowFailWithoutSideEffects) {
  BlockManager kv(4, 4, true);
  auto a = seq_tokens(12, 0);
  admit(kv, 1, a, 12);  // 3 blocks
  PrefixHit none;
  EXPECT_FALSE(kv.allocate(2, none, 8, 8));  // needs 2, 1 free
  EXPECT_FALSE(kv.has(2));
  EXPECT_TRUE(kv.grow(1, 16));
  EXPECT_FALSE(kv.grow(1, 17));
  EXPECT_EQ(kv.table(1).size(), 4u);
  EXPECT_EQ(kv.n_free_blocks(), 0);
}

TEST(BlockManager, HitOnFreeBlocksCountsTowardsTheNeed) {
  BlockManager kv(3, 4, true);
  auto a = seq_tokens(9, 0);
  admit(kv, 1, a, 9);  // 0 1 2
  kv.cache_full_blocks(1, a.data(), 9);
  kv.free(1);  // free: 2 1 0, all of them
  PrefixHit hit;
  kv.lookup(a.data(), 9, &hit);
  ASSERT_EQ(hit.blocks.size(), 2u);
  // Hits take 0 and 1 off the free list, leaving 1 block: 2 fresh ones do not fit.
  EXPECT_FALSE(kv.allocate(2, hit, 16, 9));
  EXPECT_EQ(kv.n_free_blocks(), 3);
  EXPECT_TRUE(kv.allocate(2, hit, 12, 9));
  EXPECT_EQ(kv.table(2), (Ids{0, 1, 2}));
}

TEST(BlockManager, AdmissionAnswers) {
  BlockManager kv(4, 4, true);
  EXPECT_EQ(kv.can_admit(16).status, Admission::kOk);
  const AdmissionResult never = kv.can_admit(17);
  EXPECT_EQ(never.status, Admission::kNever);
  EXPECT_NE(never.reason.find("5 KV blocks"), std::string::npos) << never.reason;
  auto a = seq_tokens(8, 0);
  admit(kv, 1, a, 8);
  EXPECT_EQ(kv.can_admit(9).status, Admission::kLater);
  EXPECT_EQ(kv.can_admit(8).status, Admission::kOk);
}

TEST(BlockManager, NoCachingMeansNoHits) {
  BlockManager kv(4, 4, false);
  auto a = seq_tokens(9, 0);
  admit(kv, 1, a, 9);
  kv.cache_full_blocks(1, a.data(), 9);
  EXPECT_FALSE(kv.is_cached(0));
  kv.free(1);
  EXPECT_EQ(kv.free_list(), (Ids{0, 1, 2, 3}));
  PrefixHit hit;
  kv.lookup(a.data(), 9, &hit);
  EXPECT_TRUE(hit.blocks.empty());
}

}  // namespace
}  // namespace parallm
