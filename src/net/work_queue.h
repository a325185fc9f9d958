// WorkQueue: tasks for the HTTP worker threads. Shared (std::shared_ptr) by
// everything that may post after the server stopped — a backend's step
// thread waking a stream, say — so that posting then is a refused no-op
// rather than a use of a destroyed server.
#pragma once
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>

namespace parallm::net {

class WorkQueue {
 public:
  // False once closed: the task is dropped.
  bool post(std::function<void()> task) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (closed_) return false;
      tasks_.push_back(std::move(task));
    }
    cv_.notify_one();
    return true;
  }
  // Blocks for the next task; false once closed and empty.
  bool next(std::function<void()>* task) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return closed_ || !tasks_.empty(); });
    if (tasks_.empty()) return false;
    *task = std::move(tasks_.front());
    tasks_.pop_front();
    return true;
  }
  // Refuses new tasks; those queued still run.
  void close() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      closed_ = true;
    }
    cv_.notify_all();
  }
  size_t size() const {
    std::lock_guard<std::mutex> lock(mu_);
    return tasks_.size();
  }

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  bool closed_ = false;
};

}  // namespace parallm::net
