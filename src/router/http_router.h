// HttpRouter: `parallm router`, an OpenAI-compatible front over backend
// servers (parallm serve, vLLM, llama-server). The front is net::HttpCore;
// the upstream side is one UpstreamClient (an epoll loop), so an open stream
// holds no thread on either side.
//
// A completion request is routed by the policy (backend_policies.h) among
// the healthy backends and forwarded with its body unchanged; an SSE answer
// is passed on chunk by chunk as it is read, a whole answer forwarded with
// its status once complete. A transport failure before any byte went to the
// client (connect refused or reset, the backend closing early) ejects that
// backend and retries the request on another healthy one, each backend at
// most once; after bytes went out, a stream ends with an error event and
// `data: [DONE]`. Every backend's /health is polled (~1 s, 1 s timeout): a
// failing one is ejected and re-admitted on its next 200.
#pragma once
#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "loadtest/http_url.h"
#include "net/http_core.h"
#include "router/backend_policies.h"
#include "router/upstream_client.h"

namespace parallm {

struct HttpRouterOptions {
  std::vector<std::string> backends;  // http://host:port[/base]
  BackendPolicy policy = BackendPolicy::kLeastTokens;
  std::string host = "127.0.0.1";
  int port = 8000;  // 0 = any free port
  std::string api_key;
  double health_interval_s = 1.0;
  double health_timeout_s = 1.0;
  int64_t default_max_tokens = 256;  // output estimate when a request names none
};

// Upper bounds (seconds) of the per-backend latency histogram.
inline constexpr double kRouterLatencyBuckets[] = {0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120};

class HttpRouter {
 public:
  // Parses and resolves the backends; throws InputError on a malformed URL.
  explicit HttpRouter(const HttpRouterOptions& options);
  ~HttpRouter();

  int bind();    // the port
  void start();  // first health round (≤ health_timeout_s), then serving
  void stop();

  int n_backends() const { return static_cast<int>(backends_.size()); }
  bool backend_up(int i) const;
  int64_t backend_requests(int i) const;
  std::string metrics_text() const;
  int open_upstream_calls() const { return upstream_.open_calls(); }

  struct Backend;
  struct Forward;

 private:
  void handle(const std::shared_ptr<net::HttpExchange>& ex);
  void forward(const std::shared_ptr<net::HttpExchange>& ex);
  void dispatch(const std::shared_ptr<Forward>& f);
  void list_models(const std::shared_ptr<net::HttpExchange>& ex);
  void health_round();
  void health_loop();
  void set_up(size_t i, bool up);
  std::string build_request(const Backend& b, const std::string& method, const std::string& target,
                            const net::HttpHeaders& headers, const std::string& body) const;

  HttpRouterOptions options_;
  std::vector<std::unique_ptr<Backend>> backends_;
  std::unique_ptr<net::HttpCore> core_;

  mutable std::mutex mu_;  // loads_, cursor_
  std::vector<ReplicaLoad> loads_;
  uint64_t cursor_ = 0;

  std::thread health_thread_;
  std::mutex health_mu_;
  std::condition_variable health_cv_;
  bool stopping_ = false;

  // NOTE: the last member, so destroyed first: its destructor joins the loop
  // thread whose callbacks (on_done) take mu_ and write loads_ and backends_.
  // Declared before them, it outlived them by a moment (ThreadSanitizer: a
  // freed loads_ written by a call finishing during ~HttpRouter).
  UpstreamClient upstream_;
};

// OpenAI-style error JSON: {"error": {"message", "type", "code"}}.
std::string router_error_json(int status, const std::string& message);

}  // namespace parallm
