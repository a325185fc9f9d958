// A scripted fake OpenAI-compatible streaming server for the bench tests.
// Plain blocking sockets, one thread per connection (it must be simple and
// obviously right; the client under test is the clever one). HTTP/1.1 with
// keep-alive, SSE over chunked transfer coding, like vLLM and llama.cpp.
// Each request is scripted by a callback given its arrival index and body:
// delay before the first token, gap between tokens (which may grow with the
// number of streams in flight: the latency law --find-capacity must find),
// HTTP errors, dropped connections, in-stream errors and stalls.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace parallm::loadtest::testing {

struct FakeScript {
  double ttft_ms = 20;              // headers and the role chunk go out at once; text after this
  double gap_ms = 5;                // between text chunks ...
  double gap_per_stream_ms = 0;     // ... plus this per other stream in flight, read at each token
  int64_t tokens = -1;              // text chunks; -1: the request's max_tokens
  int64_t tokens_per_chunk = 1;     // usage.completion_tokens = tokens * this
  int http_status = 200;            // other: a JSON error body, no stream
  int64_t drop_after_tokens = -1;   // >= 0: close the connection after this many chunks
  int64_t error_after_tokens = -1;  // >= 0: send an in-stream error event after this many chunks
  double stall_ms = 0;              // > 0: send headers, then nothing for this long
  bool send_usage = true;           // honour stream_options.include_usage
  bool send_done = true;            // send "data: [DONE]"
};

class FakeOpenAiServer {
 public:
  using Scripter = std::function<FakeScript(int64_t arrival_index, const nlohmann::json& body)>;

  explicit FakeOpenAiServer(Scripter scripter);
  ~FakeOpenAiServer();

  int port() const { return port_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  // Simulates a crash: stops accepting and cuts every open connection.
  void kill();
  // The next n GET /v1/models answer 503 "not ready" (a model still loading).
  void set_loading_polls(int n) { loading_polls_ = n; }
  int64_t models_requests() const { return models_requests_.load(); }

  int64_t requests_seen() const { return requests_seen_.load(); }
  int64_t max_streams_seen() const { return max_streams_.load(); }
  int64_t connections_accepted() const { return connections_.load(); }
  std::vector<nlohmann::json> bodies() const;  // every completion request body received
  // What the server really did for each completed stream, by its own clock:
  // request parsed -> first token written, and the mean gap after it. The
  // client's numbers must agree with these, whatever the machine's load.
  struct Observed {
    double ttft_ms;
    double tpot_ms;  // -1 for one token
  };
  std::vector<Observed> observed() const;

  // Prompt words as the server's "tokenizer" counts them (usage.prompt_tokens).
  static int64_t count_prompt_words(const nlohmann::json& body);

 private:
  void accept_loop();
  using Clock = std::chrono::steady_clock;
  void serve_connection(int fd, Clock::time_point accepted);
  bool stream_completion(int fd, const nlohmann::json& body, bool chat, Clock::time_point arrival);
  bool sleep_until(std::chrono::steady_clock::time_point t);  // false: stopping

  Scripter scripter_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::atomic<int> loading_polls_{0};
  std::atomic<int64_t> models_requests_{0};
  std::thread acceptor_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::set<int> open_fds_;
  std::vector<std::thread> workers_;
  std::vector<nlohmann::json> bodies_;
  std::vector<Observed> observed_;
  std::atomic<int64_t> requests_seen_{0};
  std::atomic<int64_t> active_streams_{0};
  std::atomic<int64_t> max_streams_{0};
  std::atomic<int64_t> connections_{0};
};

}  // namespace parallm::loadtest::testing
