// StreamProbe: the host work of streaming tokens while the engine computes,
// as `parallm serve` does it with `parallm bench` on the same cores. Each
// token is one task on a queue served by a pool of writer threads (serve's
// HTTP threads, woken per stream by the step's events), which formats the
// token's chat.completion.chunk and writes it as an SSE event to that
// stream's loopback TCP connection; one reader thread polls every stream's socket, reads and
// parses the chunks (bench's event loop). On a host whose cores all run
// engine threads this work preempts one of them, and the lock-step forward
// waits for it; the model profile streams the tokens of its serving bursts
// through it (plan_profile.cpp).
#pragma once
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

namespace parallm {

class StreamProbe {
 public:
  // `streams` loopback TCP connections, `writers` writer threads; throws
  // std::runtime_error when the connections cannot be made.
  StreamProbe(int streams, int writers);
  ~StreamProbe();  // stops and joins the threads
  StreamProbe(const StreamProbe&) = delete;
  StreamProbe& operator=(const StreamProbe&) = delete;

  // Queues one token for stream `stream` (taken modulo the streams) and
  // returns at once, as serve's step thread wakes a stream's flow.
  void post(int64_t stream);
  // Returns once the reader has parsed every chunk posted so far.
  void drain();

 private:
  void write_loop();
  void read_loop();

  std::vector<int> write_fds_, read_fds_;  // one connection a stream: serve's end, bench's
  std::mutex mu_;
  std::condition_variable wake_;     // writers: a task, or stop_
  std::condition_variable drained_;  // drain(): parsed_ grew
  std::deque<int> tasks_;            // stream indexes with a token to write
  int64_t posted_ = 0, parsed_ = 0;
  bool stop_ = false;
  std::vector<std::thread> writers_;
  std::thread reader_;
};

}  // namespace parallm
