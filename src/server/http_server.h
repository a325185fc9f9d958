// HttpServer: the OpenAI-compatible HTTP front end, on parallm's own HTTP
// core (net/http_core.h: one event loop, a few workers, per-phase deadlines).
//   POST /v1/completions, POST /v1/chat/completions  (JSON or SSE streams)
//   POST /v1/embeddings
//   GET /v1/models, GET /v1/models/{id}, POST /tokenize, POST /detokenize
//   GET /health, GET /ping (and POST), GET /version, GET /metrics
// It listens before the model is loaded: /health answers 503 and the API 503
// until set_backend() makes it ready, and 503 again once the backend failed
// (a lost rank). Limits: bearer API keys (401, compared in constant time),
// body size (413), a rate limit per key or, without keys, per client address
// (429), queue (429 with Retry-After, from the backend), prompt and output
// lengths (400), connection caps (503 / 429), header / body / idle deadlines.
// Every error body is OpenAI-style. CORS headers only for --allowed-origins;
// a Host allow-list (--allowed-hosts) against DNS rebinding.
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "server/completion_backend.h"
#include "server/reasoning.h"
#include "server/server_metrics.h"
#include "util/json_parse.h"

namespace parallm {

// --stream-interval auto (ServerOptions::stream_interval).
constexpr int64_t kStreamIntervalAuto = 0;

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8000;                           // 0 = an ephemeral port (tests)
  std::string api_key;                       // empty = no authentication (see api_keys)
  std::vector<std::string> api_keys;         // more accepted keys (--api-key-file, environment)
  std::string metrics_api_key;               // --metrics-api-key: a bearer key for /metrics (empty = open)
  std::vector<std::string> allowed_origins;  // CORS: "*" or origins; empty = no CORS headers
  std::vector<std::string> allowed_hosts;    // Host header names accepted; empty = any
  std::string served_model_name = "parallm";
  std::vector<std::string> served_model_aliases;  // more accepted names (model_names.h)
  int64_t max_input_tokens = 0;                   // 0 = max_model_len
  int64_t max_output_tokens = 0;                  // 0 = max_model_len
  size_t max_body_bytes = 8u << 20;
  size_t max_tokenize_bytes = 2u << 20;  // /tokenize and /detokenize bodies (413 above)
  int max_json_depth = 128;              // nesting of request bodies (400 above)
  double rate_limit_per_minute = 0;      // per API key, or per client address without keys; 0 = off
  int http_threads = 4;                  // workers that run handlers and streams (not per connection)
  int max_connections = 8192;
  int max_connections_per_client = 2048;
  double header_timeout_s = 10, body_timeout_s = 60, keep_alive_timeout_s = 5, write_timeout_s = 30;
  double heartbeat_s = 2.0;  // SSE comment while a stream waits (detects gone clients)
  // A stream's tokens are sent in groups of this many (the first at once);
  // kStreamIntervalAuto: groups that grow with the load (completion_flow.cpp).
  int64_t stream_interval = kStreamIntervalAuto;
  // --chat-template: a Jinja template used instead of the model's (empty = the model's).
  std::string chat_template;
  // --reasoning-parser: split <think> ... </think> into reasoning_content (chat).
  ReasoningFormat reasoning_format = ReasoningFormat::kNone;
  bool log_prompts = false;         // --log-prompts: prompts in the access log
  std::string version = "unknown";  // GET /version
};

// The JSON limits of request bodies: --max-json-depth, kRequestJsonMembers.
JsonLimits request_json_limits(const ServerOptions& options);

class HttpServer {
 public:
  explicit HttpServer(const ServerOptions& options);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds; returns the port. Throws InputError when the address is unusable.
  int bind();
  // Serves on background threads (after bind()).
  void start();
  // Ends every request in flight with an error, then stops.
  void stop();
  // Graceful shutdown: from now on new API requests and /health answer 503
  // (and close their connection); requests in flight go on.
  void begin_drain();
  // Ends the requests still in flight with finish_reason `reason` (their
  // final chunks and [DONE]); waits up to a second for them to be queued.
  void finish_active(const std::string& reason);
  // The backend must outlive the server (or be reset to nullptr first).
  void set_backend(CompletionBackend* backend);
  const ServerOptions& options() const { return options_; }
  // Requests generating now (completions), and open connections.
  size_t active_requests() const;
  int connections() const;
  // The backend's failure ("" while healthy): requests in flight were ended with it.
  std::string failure() const;

  struct Impl;

 private:
  ServerOptions options_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace parallm
