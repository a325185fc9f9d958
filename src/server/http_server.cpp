// HttpServer (see http_server.h): routes, Host and origin checks,
// authentication, rate limiting, and the mapping of every failure to an
// OpenAI-style JSON error. The completion flow itself lives in
// completion_flow.cpp, the HTTP machinery in net/http_core.cpp.
#include "server/http_server.h"

#include <malloc.h>

#include <chrono>
#include <cmath>
#include <functional>
#include <mutex>
#include <thread>

#include "hwmetrics/hardware_metrics.h"
#include "net/http_core.h"
#include "server/access_log.h"
#include "server/active_requests.h"
#include "server/api_error.h"
#include "server/api_keys.h"
#include "server/chat_template.h"
#include "server/completion_flow.h"
#include "server/embeddings_api.h"
#include "server/model_names.h"
#include "server/origin_policy.h"
#include "server/rate_limiter.h"
#include "server/tokenize_api.h"
#include "tokenizer/tokenizer.h"
#include "util/check.h"
#include "util/log.h"

namespace parallm {

using net::HttpExchange;
using net::HttpRequest;
using net::HttpResponse;

namespace {

// NOTE: a rejected 8 MB body leaves its JSON tree's many small blocks free
// in the worker's malloc arena, and glibc keeps such memory (RSS grew to
// ~1.3 GB under a burst of large bad requests and stayed there). So the heap
// is trimmed once large requests stop: the tick trims half a second after
// the last request over kTrimAfterBytes (trimming during a burst gives back
// memory the next request takes again). Bodies themselves are mmap'ed (a
// fixed threshold: glibc's sliding one would move them into the arenas after
// the first free).
constexpr size_t kTrimAfterBytes = 256 * 1024;
constexpr int kMmapThresholdBytes = 1 << 20;

std::string dump(const nlohmann::json& j) { return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace); }

HttpResponse error_response(const ApiError& e) {
  HttpResponse r;
  r.status = e.status();
  r.set_content(dump(e.body()), "application/json");
  return r;
}

// The error the HTTP core answers by itself (framing, caps, deadlines).
HttpResponse core_error(int status, const std::string& message) {
  const char* type = status == 429 ? "rate_limit_error" : status >= 500 ? "server_error" : "invalid_request_error";
  return error_response(ApiError(status, message, type));
}

std::string bearer_token(const HttpRequest& req) {
  const std::string_view h = req.header("Authorization");
  constexpr std::string_view prefix = "Bearer ";
  if (h.size() > prefix.size() && h.substr(0, prefix.size()) == prefix) return std::string(h.substr(prefix.size()));
  return "";
}

std::vector<std::string> all_keys(const ServerOptions& o) {
  std::vector<std::string> keys = o.api_keys;
  if (!o.api_key.empty()) keys.push_back(o.api_key);
  return keys;
}

enum class RouteKind {
  kCompletions,
  kChat,
  kEmbeddings,
  kModels,
  kModel,
  kTokenize,
  kDetokenize,
  kHealth,
  kMetrics,
  kVersion,
  kPing
};

struct Route {
  RouteKind kind;
  const char* method;  // GET routes also answer HEAD
};

// The route of a path, or nullptr; *id gets /v1/models/{id}.
const Route* find_route(const std::string& path, std::string* id) {
  static const Route completions{RouteKind::kCompletions, "POST"}, chat{RouteKind::kChat, "POST"},
      embeddings{RouteKind::kEmbeddings, "POST"}, models{RouteKind::kModels, "GET"}, model{RouteKind::kModel, "GET"},
      tokenize{RouteKind::kTokenize, "POST"}, detokenize{RouteKind::kDetokenize, "POST"},
      health{RouteKind::kHealth, "GET"}, metrics{RouteKind::kMetrics, "GET"}, version{RouteKind::kVersion, "GET"},
      ping{RouteKind::kPing, "GET"};
  if (path == "/v1/completions") return &completions;
  if (path == "/v1/chat/completions") return &chat;
  if (path == "/v1/embeddings") return &embeddings;
  if (path == "/v1/models") return &models;
  if (path.rfind("/v1/models/", 0) == 0 && path.size() > 11) {
    *id = path.substr(11);
    return &model;
  }
  if (path == "/tokenize") return &tokenize;
  if (path == "/detokenize") return &detokenize;
  if (path == "/health") return &health;
  if (path == "/metrics") return &metrics;
  if (path == "/version") return &version;
  if (path == "/ping") return &ping;  // vLLM's (SageMaker's) health probe; POST too
  return nullptr;
}

}  // namespace

struct HttpServer::Impl {
  explicit Impl(const ServerOptions& o)
      : options(o),
        keys(all_keys(o)),
        origins(o.allowed_origins, o.allowed_hosts),
        limiter(o.rate_limit_per_minute),
        metrics(o.served_model_name) {}

  struct Ready {
    CompletionBackend* backend;
    std::unique_ptr<ChatFormatter> chat;
  };

  const ServerOptions& options;
  ApiKeys keys;
  OriginPolicy origins;
  RateLimiter limiter;
  ServerMetrics metrics;
  ActiveRequests active;
  std::unique_ptr<net::HttpCore> core;
  // Streams and whole answers are rendered here, apart from the core's
  // workers, so that a burst of large bodies being parsed there does not
  // hold back the tokens of requests already running.
  std::shared_ptr<net::WorkQueue> flows = std::make_shared<net::WorkQueue>();
  std::vector<std::thread> flow_threads;
  mutable std::mutex mu;
  std::shared_ptr<Ready> ready;  // null until set_backend()
  std::string failure;           // the backend's, once seen (under mu)
  std::atomic<bool> draining{false};
  std::atomic<int64_t> last_large_ns{0};  // the last large request's end (0: none since the last trim)

  std::shared_ptr<Ready> get_ready() const {
    std::lock_guard<std::mutex> lock(mu);
    return ready;
  }
  std::string get_failure() const {
    std::lock_guard<std::mutex> lock(mu);
    return failure;
  }

  void large_request_done() { last_large_ns = std::chrono::steady_clock::now().time_since_epoch().count(); }

  // On the tick: half a second after the last large request, trim once.
  void trim_after_large_requests() {
    const int64_t last = last_large_ns.load();
    const int64_t now = std::chrono::steady_clock::now().time_since_epoch().count();
    if (last == 0 || now - last < 500'000'000) return;
    int64_t expected = last;
    if (last_large_ns.compare_exchange_strong(expected, 0)) core->post([] { ::malloc_trim(0); });
  }

  // Every ~100 ms on the loop thread: a backend that failed ends every
  // request in flight with its error; the others take late tokens.
  void on_tick() {
    trim_after_large_requests();
    std::shared_ptr<Ready> r = get_ready();
    if (!r) return;
    const std::string why = r->backend->failure();
    if (!why.empty()) {
      bool first;
      {
        std::lock_guard<std::mutex> lock(mu);
        first = failure.empty();
        if (first) failure = why;
      }
      if (first) log_warn("serving failed: " + why + "; ending every request in flight");
      const std::string message = "the server cannot generate: " + why;
      end_active([message](ActiveRequest& a) { a.fail(503, message); });
      return;
    }
    const auto now = std::chrono::steady_clock::now();
    for (const auto& a : active.snapshot()) a->tick(now);
  }

  // Runs `end` on every request in flight, on the flow threads (it may write).
  void end_active(std::function<void(ActiveRequest&)> end) {
    for (const auto& a : active.snapshot()) {
      std::weak_ptr<ActiveRequest> w = a;
      flows->post([w, end] {
        if (auto x = w.lock()) end(*x);
      });
    }
  }
  // Waits up to a second for the requests in flight to leave the registry.
  void wait_until_idle() const {
    for (int i = 0; i < 100 && active.size() > 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }

  void handle(const std::shared_ptr<HttpExchange>& ex);
  void serve_route(const Route& route, const std::string& model_id, const std::shared_ptr<HttpExchange>& ex,
                   const net::HttpHeaders& cors, HttpResponse* res, bool* async);
};

void HttpServer::Impl::handle(const std::shared_ptr<HttpExchange>& ex) {
  const auto t0 = std::chrono::steady_clock::now();
  const HttpRequest& req = ex->request();
  HttpResponse res;
  bool async = false;
  const std::string acao = origins.allow_origin(req.header("Origin"));
  net::HttpHeaders cors;
  if (!acao.empty()) {
    cors.emplace_back("Access-Control-Allow-Origin", acao);
    if (acao != "*") cors.emplace_back("Vary", "Origin");
  }
  try {
    if (!origins.host_allowed(req.header("Host"))) {
      throw ApiError(
          403, "Host '" + std::string(req.header("Host")) + "' is not one this server answers to (--allowed-hosts)",
          "invalid_request_error", "", "host_not_allowed");
    }
    std::string model_id;
    const Route* route = find_route(req.path, &model_id);
    if (req.method == "OPTIONS") {
      // A preflight carries no credentials: answered without the key. Only
      // allowed origins get the CORS headers that let the browser go on.
      res.status = 204;
      res.set_header("Allow", route ? std::string(route->method) + ", OPTIONS" : "GET, POST, OPTIONS");
      if (!acao.empty()) {
        res.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
        const std::string asked(req.header("Access-Control-Request-Headers"));
        res.set_header("Access-Control-Allow-Headers", asked.empty() ? "Authorization, Content-Type" : asked);
        res.set_header("Access-Control-Max-Age", "86400");
      }
    } else if (route == nullptr) {
      throw ApiError(404, "no such route: " + req.path, "invalid_request_error", "", "not_found");
    } else if (req.method != route->method && !(req.method == "HEAD" && std::string(route->method) == "GET") &&
               !(route->kind == RouteKind::kPing && req.method == "POST")) {
      res.set_header("Allow", std::string(route->method) + ", OPTIONS");
      throw ApiError(405, "method " + req.method + " is not allowed on " + req.path + " (use " + route->method + ")",
                     "invalid_request_error", "", "method_not_allowed");
    } else {
      serve_route(*route, model_id, ex, cors, &res, &async);
    }
  } catch (const ApiError& e) {
    HttpResponse err = error_response(e);
    for (auto& h : res.headers) err.set_header(h.first, h.second);  // Allow, Retry-After
    if (e.status() == 429 && !net::has_header(err.headers, "Retry-After")) err.set_header("Retry-After", "1");
    err.close = res.close;
    res = std::move(err);
  } catch (const InputError& e) {
    res = error_response(bad_request(e.what()));
  } catch (const std::exception& e) {
    log_warn(std::string("request failed: ") + e.what());
    res = error_response(ApiError(500, std::string("internal error: ") + e.what(), "server_error"));
  }
  // Probes answered 503 while loading or draining are not rejected requests.
  const bool probe = req.path == "/health" || req.path == "/ping" || req.path == "/metrics";
  if (res.status >= 400 && !probe) metrics.requests_rejected++;
  if (!async) {
    for (auto& h : cors) res.set_header(h.first, h.second);
    AccessRecord rec;
    rec.status = res.status;
    rec.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    ex->respond(std::move(res));
    log_access(req, rec);  // completions log their own line when they end
  }
  if (req.body.size() > kTrimAfterBytes) large_request_done();
}

void HttpServer::Impl::serve_route(const Route& route, const std::string& model_id,
                                   const std::shared_ptr<HttpExchange>& ex, const net::HttpHeaders& cors,
                                   HttpResponse* res, bool* async) {
  const HttpRequest& req = ex->request();
  switch (route.kind) {
    case RouteKind::kVersion:
      res->set_content(dump({{"version", options.version}}), "application/json");
      return;
    case RouteKind::kPing:
    case RouteKind::kHealth: {
      if (draining) {
        res->close = true;
        throw ApiError(503, "the server is shutting down", "server_error", "", "shutting_down");
      }
      std::shared_ptr<Ready> r = get_ready();
      const std::string why = r ? r->backend->failure() : "";
      if (!r) throw ApiError(503, "the model is still loading", "server_error", "", "not_ready");
      if (!why.empty()) throw ApiError(503, "the server cannot generate: " + why, "server_error", "", "engine_failed");
      res->set_content("{\"status\":\"ok\"}", "application/json");
      return;
    }
    case RouteKind::kMetrics: {
      if (!options.metrics_api_key.empty() && !constant_time_equal(bearer_token(req), options.metrics_api_key)) {
        throw ApiError(401, "/metrics needs 'Authorization: Bearer <key>' (--metrics-api-key)", "invalid_request_error",
                       "", "invalid_api_key");
      }
      std::shared_ptr<Ready> r = get_ready();
      ServingMetrics m;
      std::vector<DeviceStat> devices;
      if (r) {
        m = r->backend->metrics();
        devices = r->backend->device_stats();
      }
      std::string text = metrics.render(m, devices);
      hwmetrics::append_hardware_metrics(&text);  // GPUs, host, process (src/hwmetrics/)
      res->set_content(std::move(text), "text/plain; version=0.0.4");
      return;
    }
    default:
      break;
  }
  // The API routes: readiness, authentication, rate limit.
  if (draining) {
    res->close = true;
    throw ApiError(503, "the server is shutting down", "server_error", "", "shutting_down");
  }
  std::shared_ptr<Ready> ready = get_ready();
  if (!ready) throw ApiError(503, "the model is still loading", "server_error", "", "not_ready");
  const std::string why = ready->backend->failure();
  if (!why.empty()) throw ApiError(503, "the server cannot generate: " + why, "server_error", "", "engine_failed");
  const std::string key = bearer_token(req);
  if (keys.enabled() && !keys.accepts(key)) {
    throw ApiError(401, "invalid or missing API key (send 'Authorization: Bearer <key>')", "invalid_request_error", "",
                   "invalid_api_key");
  }
  const bool limited = route.kind != RouteKind::kModels && route.kind != RouteKind::kModel;
  double retry_s = 1;
  // Keyed by the (verified) key when keys are configured, else by the
  // client's address: an unverified token must not buy a fresh bucket.
  if (limited && !limiter.allow(keys.enabled() ? "key:" + key : "addr:" + req.remote_addr, &retry_s)) {
    res->set_header("Retry-After", std::to_string(static_cast<int64_t>(std::ceil(retry_s))));
    throw ApiError(429, "rate limit exceeded (--rate-limit requests per minute per key or client)", "rate_limit_error",
                   "", "rate_limit_exceeded");
  }
  CompletionContext ctx{options, *ready->backend, *ready->chat, metrics, flows, &active, cors};
  auto model_card = [&](const std::string& id) {
    return nlohmann::json{{"id", id},
                          {"object", "model"},
                          {"created", static_cast<int64_t>(std::time(nullptr))},
                          {"owned_by", "parallm"},
                          {"max_model_len", ready->backend->max_model_len()}};
  };
  switch (route.kind) {
    case RouteKind::kCompletions:
    case RouteKind::kChat: {
      handle_completion(ctx, ex, route.kind == RouteKind::kChat);
      *async = true;
      return;
    }
    case RouteKind::kEmbeddings:
      handle_embeddings(ctx, ex);
      *async = true;
      return;
    case RouteKind::kModels: {
      nlohmann::json cards = nlohmann::json::array();
      for (const std::string& id : served_model_names(options)) cards.push_back(model_card(id));
      res->set_content(dump({{"object", "list"}, {"data", cards}}), "application/json");
      return;
    }
    case RouteKind::kModel:
      if (!serves_model(options, model_id)) {
        throw ApiError(
            404, "model '" + model_id + "' does not exist; this server serves '" + options.served_model_name + "'",
            "invalid_request_error", "model", "model_not_found");
      }
      res->set_content(dump(model_card(model_id)), "application/json");
      return;
    case RouteKind::kTokenize:
    case RouteKind::kDetokenize:
      if (req.body.size() > options.max_tokenize_bytes) {
        throw ApiError(413, "the body has " + std::to_string(req.body.size()) + " bytes; " + req.path +
                                " accepts at most " + std::to_string(options.max_tokenize_bytes) +
                                " (--max-tokenize-body)");
      }
      res->set_content(
          route.kind == RouteKind::kTokenize ? handle_tokenize(ctx, req.body) : handle_detokenize(ctx, req.body),
          "application/json");
      return;
    default:
      return;
  }
}

JsonLimits request_json_limits(const ServerOptions& options) {
  JsonLimits l;
  l.max_depth = options.max_json_depth;
  l.max_members = kRequestJsonMembers;
  return l;
}

HttpServer::HttpServer(const ServerOptions& options) : options_(options), impl_(std::make_unique<Impl>(options_)) {
  if (options_.http_threads < 1) throw InputError("--http-threads must be >= 1");
  ::mallopt(M_MMAP_THRESHOLD, kMmapThresholdBytes);
  net::HttpCoreOptions co;
  co.host = options_.host;
  co.port = options_.port;
  co.limits.max_body_bytes = options_.max_body_bytes;
  co.header_timeout_s = options_.header_timeout_s;
  co.body_timeout_s = options_.body_timeout_s;
  co.keep_alive_timeout_s = options_.keep_alive_timeout_s;
  co.write_timeout_s = options_.write_timeout_s;
  co.max_connections = options_.max_connections;
  co.max_connections_per_client = options_.max_connections_per_client;
  co.worker_threads = options_.http_threads;
  Impl* impl = impl_.get();
  // Probes and scrapes are answered on the loop thread: a liveness probe must
  // not wait behind workers parsing large bodies.
  auto quick = [](const HttpRequest& r) {
    return r.method == "OPTIONS" ||
           ((r.method == "GET" || r.method == "HEAD") &&
            (r.path == "/health" || r.path == "/metrics" || r.path == "/ping" || r.path == "/version"));
  };
  impl_->core = std::make_unique<net::HttpCore>(
      co, [impl](const std::shared_ptr<HttpExchange>& ex) { impl->handle(ex); },
      [impl](int status, const std::string& message) {
        impl->metrics.requests_rejected++;  // framing errors, caps and deadlines count too
        return core_error(status, message);
      },
      quick);
  impl_->core->set_tick([impl] { impl->on_tick(); });
}

HttpServer::~HttpServer() { stop(); }

int HttpServer::bind() {
  const int port = impl_->core->bind();
  options_.port = port;
  return port;
}

void HttpServer::start() {
  constexpr int kFlowThreads = 2;
  for (int i = 0; i < kFlowThreads; ++i) {
    impl_->flow_threads.emplace_back([q = impl_->flows] {
      std::function<void()> task;
      while (q->next(&task)) {
        task();
        task = nullptr;
      }
    });
  }
  impl_->core->start();
}

void HttpServer::stop() {
  if (!impl_->core->running()) return;
  // End what is in flight with an error the clients can read, give the loop
  // a moment to send it, then close everything.
  impl_->end_active([](ActiveRequest& a) { a.fail(503, "the server is shutting down"); });
  impl_->wait_until_idle();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  impl_->core->stop();
  impl_->flows->close();
  for (auto& t : impl_->flow_threads) t.join();
  impl_->flow_threads.clear();
}

void HttpServer::begin_drain() { impl_->draining = true; }

void HttpServer::finish_active(const std::string& reason) {
  impl_->end_active([reason](ActiveRequest& a) { a.finish_now(reason); });
  impl_->wait_until_idle();
}

void HttpServer::set_backend(CompletionBackend* backend) {
  std::shared_ptr<Impl::Ready> ready;
  if (backend) {
    ready = std::make_shared<Impl::Ready>();
    ready->backend = backend;
    ready->chat =
        std::make_unique<ChatFormatter>(ChatFormatter::for_tokenizer(backend->tokenizer(), options_.chat_template));
    impl_->metrics.set_max_model_len(backend->max_model_len());  // before any request can reach it
  }
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->ready = std::move(ready);
}

size_t HttpServer::active_requests() const { return impl_->active.size(); }
int HttpServer::connections() const { return impl_->core->connections(); }
std::string HttpServer::failure() const { return impl_->get_failure(); }

}  // namespace parallm
