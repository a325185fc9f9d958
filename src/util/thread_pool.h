// A persistent pool of worker threads for compute kernels.
// run(fn) calls fn(thread_index, n_threads) once on every thread (the caller
// is thread 0) and returns when all have finished. Workers spin briefly before
// sleeping on an atomic wait, because a decode step launches hundreds of short
// parallel regions and a condition-variable wake-up per region would cost more
// than the work (NOTE: measured in bench/, same reasoning as llama.cpp's pool).
#pragma once
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
  static void split(int64_t n, int64_t grain, int thread_index, int n_threads, int64_t* begin,
                    int64_t* end);

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

// Default thread count: the machine's hardware threads (at least 1).
int default_thread_count();

}  // namespace parallm
