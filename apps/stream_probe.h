// StreamProbe: the host work of streaming tokens while the engine computes,
// as `parallm serve` does it with `parallm bench` on the same cores: a writer
// thread, woken once a step, formats each token's chat.completion.chunk and
// writes it as an SSE event to a socket; a reader thread blocked on the other
// end reads and parses it. On a host whose cores all run engine threads this
// work preempts one of them, and the lock-step forward waits for it; the
// model profile times a decode with and without it (plan_profile.cpp).
#pragma once
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>

namespace parallm {

class StreamProbe {
 public:
  StreamProbe();   // starts both threads; throws std::runtime_error without a socket pair
  ~StreamProbe();  // stops and joins them
  StreamProbe(const StreamProbe&) = delete;
  StreamProbe& operator=(const StreamProbe&) = delete;

  // Hands `tokens` chunks to the writer and returns at once.
  void post(int64_t tokens);
  // Returns once the reader has parsed every chunk posted so far.
  void drain();

 private:
  void write_loop();
  void read_loop();

  int fds_[2] = {-1, -1};  // [0] the writer's end, [1] the reader's
  std::mutex mu_;
  std::condition_variable wake_;     // the writer: posted_ grew, or stop_
  std::condition_variable drained_;  // drain(): parsed_ grew
  int64_t posted_ = 0, written_ = 0, parsed_ = 0;
  bool stop_ = false;
  std::thread writer_, reader_;
};

}  // namespace parallm
