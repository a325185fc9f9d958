#include "util/thread_pool.h"

#include <immintrin.h>

#include "util/check.h"

namespace parallm {

namespace {
// Spin iterations before a worker falls back to a futex wait.
constexpr int kSpinIterations = 1 << 16;
// Pure-pause spins before a waiting thread starts yielding its core.
// NOTE: with more runnable threads than cores (a build beside a benchmark,
// several ranks on one machine), a thread that only pauses can hold its core
// while the thread it waits for is descheduled; measured on 2 cores under a
// parallel build, 2-thread decode fell to 0.2 GB/s with pure spinning.
// sched_yield costs ~1 us when nobody else wants the core.
constexpr int kPauseSpins = 1 << 11;
}  // namespace

int default_thread_count() {
  unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
}

ThreadPool::ThreadPool(int n_threads) : n_threads_(n_threads < 1 ? 1 : n_threads) {
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true);
  generation_.fetch_add(1);
  generation_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::run(const Task& fn) {
  if (n_threads_ == 1) {
    fn(0, 1);
    return;
  }
  task_ = &fn;
  pending_.store(n_threads_ - 1, std::memory_order_relaxed);
  generation_.fetch_add(1, std::memory_order_seq_cst);
  // NOTE: a futex wake is a system call (a hypercall on this VM kind); skip it
  // when every worker is still spinning. seq_cst on both sides: either this
  // load sees the sleeper, or the sleeper's wait() sees the new generation.
  if (sleepers_.load(std::memory_order_seq_cst) > 0) generation_.notify_all();
  fn(0, n_threads_);
  for (int spins = 0; pending_.load(std::memory_order_acquire) != 0; ++spins) wait_round(spins);
  task_ = nullptr;
}

void ThreadPool::wait_round(int spins) {
  if (spins < kPauseSpins) {
    _mm_pause();
  } else {
    std::this_thread::yield();
  }
}

void ThreadPool::worker_loop(int thread_index) {
  uint32_t seen = 0;
  for (;;) {
    int spins = 0;
    uint32_t gen;
    while ((gen = generation_.load(std::memory_order_acquire)) == seen) {
      if (++spins < kPauseSpins) {
        _mm_pause();
      } else if (spins < kSpinIterations) {
        std::this_thread::yield();
      } else {
        sleepers_.fetch_add(1, std::memory_order_seq_cst);
        generation_.wait(seen, std::memory_order_seq_cst);
        sleepers_.fetch_sub(1, std::memory_order_seq_cst);
      }
    }
    seen = gen;
    if (stop_.load()) return;
    (*task_)(thread_index, n_threads_);
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

void ThreadPool::split(int64_t n, int64_t grain, int thread_index, int n_threads, int64_t* begin, int64_t* end) {
  PARALLM_CHECK(grain > 0 && n_threads > 0);
  int64_t units = (n + grain - 1) / grain;
  int64_t per = units / n_threads, rem = units % n_threads;
  int64_t ub = thread_index * per + (thread_index < rem ? thread_index : rem);
  int64_t ue = ub + per + (thread_index < rem ? 1 : 0);
  *begin = ub * grain < n ? ub * grain : n;
  *end = ue * grain < n ? ue * grain : n;
}

}  // namespace parallm
