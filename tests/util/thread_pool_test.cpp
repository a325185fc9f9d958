#include "util/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
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

}  // namespace parallm
