// HttpCore: an HTTP/1.1 server that holds thousands of connections without
// a thread each. One event-loop thread (epoll) accepts, reads, parses
// (HttpRequestParser) and writes every socket; a few worker threads run the
// handlers. A handler answers with a whole response or a stream of chunks,
// from any thread and at any later time (HttpExchange), so a request that
// waits for tokens holds no thread either.
//
// Every phase has a deadline (the header deadline defeats slowloris, the
// body deadline slow uploads, the idle deadline parked keep-alive sockets,
// the write deadline clients that stop reading); connections are capped in
// all and per client address, with a 503 / 429 answer past the cap.
// Requests on one connection are answered in order (pipelining); the next
// is parsed only once the previous response is queued.
#pragma once
#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "net/http_message.h"
#include "net/http_request_parser.h"
#include "net/work_queue.h"

namespace parallm::net {

struct HttpCoreOptions {
  std::string host = "127.0.0.1";
  int port = 8000;  // 0 = any free port
  HttpLimits limits;
  double header_timeout_s = 10;           // first byte of a request -> end of its headers
  double body_timeout_s = 60;             // end of the headers -> end of the body
  double keep_alive_timeout_s = 5;        // idle between requests
  double write_timeout_s = 30;            // queued output without progress
  int max_connections = 8192;             // open at once (503 past it)
  int max_connections_per_client = 2048;  // per client address (429 past it)
  int worker_threads = 4;
  size_t max_queued_output = 32u << 20;  // bytes queued for a client that does not read
};

class HttpExchange;
struct ConnShared;

// Builds the body of an error the core answers by itself (parse errors,
// connection caps, timeouts are not answered): status, message -> response.
using ErrorResponder = std::function<HttpResponse(int status, const std::string& message)>;

class HttpCore {
 public:
  using Handler = std::function<void(const std::shared_ptr<HttpExchange>&)>;

  // Requests for which `runs_inline` is true are handled on the loop thread
  // itself (quick answers such as a health probe, which must not wait behind
  // workers busy with large bodies).
  using InlinePredicate = std::function<bool(const HttpRequest&)>;

  HttpCore(const HttpCoreOptions& options, Handler handler, ErrorResponder error_responder,
           InlinePredicate runs_inline = nullptr);
  ~HttpCore();
  HttpCore(const HttpCore&) = delete;
  HttpCore& operator=(const HttpCore&) = delete;

  // Binds and listens; returns the port. Throws InputError naming the address
  // and the reason (in use, not local, out of range).
  int bind();
  // Starts the loop and the workers (after bind()).
  void start();
  // Stops accepting, closes every connection, joins the threads.
  void stop();
  bool running() const { return running_; }

  // Runs on a worker thread (false once stopped).
  bool post(std::function<void()> task) { return work_->post(std::move(task)); }
  const std::shared_ptr<WorkQueue>& work_queue() const { return work_; }
  // fn runs on the loop thread about every 100 ms (keep it short: post work).
  void set_tick(std::function<void()> fn);

  // Open connections (for tests and /metrics).
  int connections() const { return n_connections_.load(); }
  const HttpCoreOptions& options() const { return options_; }

  struct Loop;

 private:
  HttpCoreOptions options_;
  std::shared_ptr<WorkQueue> work_;
  std::unique_ptr<Loop> loop_;
  std::vector<std::thread> workers_;
  std::thread loop_thread_;
  std::atomic<bool> running_{false};
  std::atomic<int> n_connections_{0};
};

// One request and its response. Thread-safe; every method may be called from
// any thread. Exactly one of respond() or start_stream() ... end_stream().
class HttpExchange {
 public:
  HttpExchange(HttpRequest request, std::shared_ptr<ConnShared> conn);
  ~HttpExchange();

  const HttpRequest& request() const { return request_; }

  // A whole response (Content-Length framing).
  void respond(HttpResponse response);
  // A streamed response: chunked on HTTP/1.1, until close on HTTP/1.0.
  void start_stream(int status, const HttpHeaders& headers);
  // False once the client is gone (nothing more will be delivered).
  bool write(std::string_view data);
  // Ends the stream, with its last data in the same write: a client that
  // hangs up on reading it (an SSE `[DONE]`) must not find the end missing.
  void end_stream(std::string_view last = {});

  bool gone() const;
  bool answered() const;
  // Runs once (on a worker or the loop thread) if the client goes away
  // before the response was queued whole: abort the work behind it. Runs at
  // once when the client is already gone.
  void on_gone(std::function<void()> fn);
  // Runs once with true when the response's last byte was handed to the
  // kernel, or false when the connection died first. On the loop thread:
  // keep it to a counter.
  void on_finished(std::function<void(bool delivered)> fn);

 private:
  HttpRequest request_;
  std::shared_ptr<ConnShared> conn_;
};

}  // namespace parallm::net
