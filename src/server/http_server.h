// HttpServer: the OpenAI-compatible HTTP front end (cpp-httplib).
//   POST /v1/completions, POST /v1/chat/completions  (JSON or SSE streams)
//   GET /v1/models, GET /health, GET /metrics
// It listens before the model is loaded: /health answers 503 and the API 503
// until set_backend() makes it ready. Limits: bearer API key (401), body size
// (413), per-key rate limit (429), queue (429 with Retry-After, from the
// backend), prompt and output lengths (400). Every error body is OpenAI-style.
//
// Each connection holds one thread of a pool of `http_threads` (a stream
// blocks its thread while it waits for tokens), so that many concurrent
// streams can be open at once.
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "server/completion_backend.h"
#include "server/reasoning.h"
#include "server/server_metrics.h"

namespace parallm {

// --stream-interval auto (ServerOptions::stream_interval).
constexpr int64_t kStreamIntervalAuto = 0;

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8000;                       // 0 = an ephemeral port (tests)
  std::string api_key;                   // empty = no authentication
  std::string served_model_name = "parallm";
  int64_t max_input_tokens = 0;          // 0 = max_model_len
  int64_t max_output_tokens = 0;         // 0 = max_model_len
  size_t max_body_bytes = 8u << 20;
  double rate_limit_per_minute = 0;      // per key; 0 = off
  int http_threads = 1024;
  double heartbeat_s = 2.0;              // SSE comment while a stream waits (detects gone clients)
  // A stream's tokens are sent in groups of this many (the first at once);
  // kStreamIntervalAuto: groups that grow with the load (completion_flow.cpp).
  int64_t stream_interval = kStreamIntervalAuto;
  // --chat-template: a Jinja template used instead of the model's (empty = the model's).
  std::string chat_template;
  // --reasoning-parser: split <think> ... </think> into reasoning_content (chat).
  ReasoningFormat reasoning_format = ReasoningFormat::kNone;
};

class HttpServer {
 public:
  explicit HttpServer(const ServerOptions& options);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds; returns the port. Throws InputError when the address is unusable.
  int bind();
  // Serves on a background thread (after bind()).
  void start();
  // Serves on this thread until stop().
  void run();
  void stop();
  // The backend must outlive the server (or be reset to nullptr first).
  void set_backend(CompletionBackend* backend);
  const ServerOptions& options() const { return options_; }

  struct Impl;

 private:
  ServerOptions options_;
  std::unique_ptr<Impl> impl_;
  std::thread thread_;
};

}  // namespace parallm
