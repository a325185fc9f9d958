// A persistent pool of worker threads for compute kernels.
// run(fn) calls fn(thread_index, n_threads) once on every thread (the caller
// is thread 0) and returns when all have finished. Workers spin briefly before
// sleeping on an atomic wait, because a decode step launches hundreds of short
// parallel regions and a condition-variable wake-up per region would cost more
// than the work (NOTE: measured in bench/, same reasoning as llama.cpp's pool).
#pragma once
#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

namespace parallm {

class ThreadPool {
 public:
  using Task = std::function<void(int thread_index, int n_threads)>;

  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }
  void run(const Task& fn);

  // One round of a thread waiting for others to arrive: `spins` counts the
  // rounds so far; a pause at first, then the core is given away (see
  // thread_pool.cpp). For spin barriers inside a task (RegionBarrier).
  static void wait_round(int spins);

  // Splits [0, n) into contiguous chunks, one per thread, multiples of `grain`.
  static void split(int64_t n, int64_t grain, int thread_index, int n_threads, int64_t* begin, int64_t* end);

 private:
  void worker_loop(int thread_index);

  int n_threads_;
  std::vector<std::thread> workers_;
  const Task* task_ = nullptr;
  std::atomic<uint32_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> stop_{false};
  std::atomic<int> sleepers_{0};  // workers blocked in a futex wait (run() wakes them only then)
};

// A one-use meeting point inside one parallel region: every thread of the
// region calls arrive_and_wait(n_threads) once, and none returns before all
// have arrived (work written before it is visible after it).
class RegionBarrier {
 public:
  void arrive_and_wait(int n_threads) {
    arrived_.fetch_add(1, std::memory_order_acq_rel);
    for (int spins = 0; arrived_.load(std::memory_order_acquire) < n_threads; ++spins) ThreadPool::wait_round(spins);
  }

 private:
  std::atomic<int> arrived_{0};
};

// Work units of one parallel region, shared out so that a thread that
// finishes early takes over the rest of a slower one's (a preempted thread,
// or one whose core a co-tenant slows, otherwise holds up the region's end).
// Each thread starts on its own contiguous range and claims from its front;
// when that is empty it claims from the back of the range with the most
// left. A claim takes about a quarter of what is left (whole multiples of
// `grain`, at least one): large first, so a thread's own units run as one
// stream front to back, and small at the end, for balance. The owner and a
// thief each claim with one compare-and-swap on the range's own line.
class WorkRanges {
 public:
  static constexpr int kMaxThreads = 64;

  // Thread ti's own range; every range is set before the region starts.
  void set(int ti, int64_t begin, int64_t end) {
    ranges_[ti].front_back.store(Range::pack(static_cast<uint32_t>(begin), static_cast<uint32_t>(end)),
                                 std::memory_order_relaxed);
  }
  // The next units [*b, *e) for thread ti of n_threads; false when none is left anywhere.
  bool next(int ti, int n_threads, uint32_t grain, int64_t* b, int64_t* e) {
    if (ranges_[ti].claim(true, grain, b, e)) return true;
    for (;;) {
      int victim = -1;
      int64_t most = 0;
      for (int v = 0; v < n_threads; ++v) {
        const int64_t left = ranges_[v].left();
        if (v != ti && left > most) most = left, victim = v;
      }
      if (victim < 0) return false;
      if (ranges_[victim].claim(false, grain, b, e)) return true;
    }
  }
  // The unit thread ti would claim next from its own range, or -1: a hint
  // (for prefetching), since a thief may take it first.
  int64_t peek_own(int ti) const {
    const uint64_t v = ranges_[ti].front_back.load(std::memory_order_relaxed);
    const uint32_t f = static_cast<uint32_t>(v & 0xffffffffu), bk = static_cast<uint32_t>(v >> 32);
    return f < bk ? static_cast<int64_t>(f) : int64_t{-1};
  }

 private:
  // [front, back) packed in one word.
  struct alignas(64) Range {
    std::atomic<uint64_t> front_back{0};
    static uint64_t pack(uint32_t f, uint32_t b) { return (static_cast<uint64_t>(b) << 32) | f; }
    int64_t left() const {
      const uint64_t v = front_back.load(std::memory_order_relaxed);
      return std::max<int64_t>(0, static_cast<int64_t>(v >> 32) - static_cast<int64_t>(v & 0xffffffffu));
    }
    bool claim(bool from_front, uint32_t grain, int64_t* b, int64_t* e) {
      uint64_t v = front_back.load(std::memory_order_relaxed);
      for (;;) {
        const uint32_t f = static_cast<uint32_t>(v & 0xffffffffu), bk = static_cast<uint32_t>(v >> 32);
        if (f >= bk) return false;
        const uint32_t n = std::min(bk - f, std::max<uint32_t>(grain, (bk - f) / 4 / grain * grain));
        const uint64_t next = from_front ? pack(f + n, bk) : pack(f, bk - n);
        if (front_back.compare_exchange_weak(v, next, std::memory_order_relaxed)) {
          *b = from_front ? f : bk - n;
          *e = from_front ? f + n : bk;
          return true;
        }
      }
    }
  };
  std::array<Range, kMaxThreads> ranges_;
};

// Default thread count: the machine's hardware threads (at least 1).
int default_thread_count();

}  // namespace parallm
