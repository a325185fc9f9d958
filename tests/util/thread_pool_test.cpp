#include "util/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace parallm {

TEST(ThreadPool, EveryThreadRunsOncePerRegion) {
  ThreadPool pool(3);
  std::vector<std::atomic<int>> hits(3);
  for (int round = 0; round < 1000; ++round) {
    pool.run([&](int i, int n) {
      ASSERT_EQ(n, 3);
      hits[i].fetch_add(1);
    });
  }
  for (auto& h : hits) EXPECT_EQ(h.load(), 1000);
}

TEST(ThreadPool, SplitCoversRangeInGrains) {
  for (int n_threads : {1, 2, 3, 7}) {
    int64_t covered = 0, prev_end = 0;
    for (int t = 0; t < n_threads; ++t) {
      int64_t b, e;
      ThreadPool::split(1000, 32, t, n_threads, &b, &e);
      EXPECT_EQ(b, prev_end);
      EXPECT_TRUE(b % 32 == 0 || b == 1000);
      covered += e - b;
      prev_end = e;
    }
    EXPECT_EQ(covered, 1000);
  }
}

// Every unit of a region is claimed exactly once, in whole grains, and a
// thread held up at the start has its range taken over by the others.
TEST(WorkRanges, EveryUnitOnceAndIdleThreadsTakeOver) {
  ThreadPool pool(3);
  for (uint32_t grain : {1u, 2u}) {
    constexpr int64_t kUnits = 600;
    std::vector<std::atomic<int>> claimed(kUnits);
    std::vector<std::atomic<int64_t>> done_by(3);
    WorkRanges ranges;
    for (int ti = 0; ti < 3; ++ti) {
      int64_t b, e;
      ThreadPool::split(kUnits, grain, ti, 3, &b, &e);
      ranges.set(ti, b, e);
    }
    pool.run([&](int ti, int nt) {
      if (ti == 2) std::this_thread::sleep_for(std::chrono::milliseconds(150));
      int64_t b, e;
      while (ranges.next(ti, nt, grain, &b, &e)) {
        EXPECT_LT(b, e);
        EXPECT_TRUE(b % grain == 0 && (e % grain == 0 || e == kUnits));
        for (int64_t u = b; u < e; ++u) claimed[static_cast<size_t>(u)].fetch_add(1);
        done_by[static_cast<size_t>(ti)].fetch_add(e - b);
        std::this_thread::sleep_for(std::chrono::microseconds(20 * (e - b)));
      }
    });
    for (int64_t u = 0; u < kUnits; ++u) ASSERT_EQ(claimed[static_cast<size_t>(u)].load(), 1) << "unit " << u;
    // The sleeping thread's 200 units take the others ~2 ms each way: they
    // finish their own and most of its range before it wakes.
    EXPECT_LT(done_by[2].load(), kUnits / 3 / 2);
    EXPECT_EQ(ranges.peek_own(0), -1);  // nothing left: no unit to hint at
  }
}

TEST(WorkRanges, PeekOwnIsTheOwnersNextUnit) {
  WorkRanges ranges;
  ranges.set(0, 10, 30);
  ranges.set(1, 30, 30);
  EXPECT_EQ(ranges.peek_own(0), 10);
  EXPECT_EQ(ranges.peek_own(1), -1);
  int64_t b, e;
  ASSERT_TRUE(ranges.next(0, 2, 1, &b, &e));
  EXPECT_EQ(b, 10);
  EXPECT_EQ(ranges.peek_own(0), e);
  ASSERT_TRUE(ranges.next(1, 2, 1, &b, &e));  // thread 1 has none: it takes the back of thread 0's
  EXPECT_EQ(e, 30);
}

}  // namespace parallm
