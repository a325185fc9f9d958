// HttpServer (see http_server.h): routes, authentication, rate limiting and
// the mapping of every failure to an OpenAI-style JSON error. The completion
// flow itself lives in completion_flow.cpp.
#include "server/http_server.h"

#include <httplib.h>

#include <sys/socket.h>

#include <mutex>

#include "server/api_error.h"
#include "server/chat_template.h"
#include "server/completion_flow.h"
#include "server/rate_limiter.h"
#include "server/tokenize_api.h"
#include "tokenizer/tokenizer.h"
#include "util/check.h"
#include "util/log.h"

namespace parallm {

struct HttpServer::Impl {
  explicit Impl(const ServerOptions& o) : limiter(o.rate_limit_per_minute) {}

  struct Ready {
    CompletionBackend* backend;
    std::unique_ptr<ChatFormatter> chat;
  };

  httplib::Server http;
  int listen_fd = -1;  // the listening socket, seen through set_socket_options
  RateLimiter limiter;
  ServerMetrics metrics;
  std::mutex mu;
  std::shared_ptr<Ready> ready;  // null until set_backend()

  std::shared_ptr<Ready> get_ready() {
    std::lock_guard<std::mutex> lock(mu);
    return ready;
  }
};

namespace {

void send_error(httplib::Response& res, const ApiError& e) {
  res.status = e.status();
  res.set_content(e.body().dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), "application/json");
}

std::string bearer_token(const httplib::Request& req) {
  const std::string h = req.get_header_value("Authorization");
  const std::string prefix = "Bearer ";
  if (h.size() > prefix.size() && h.compare(0, prefix.size(), prefix) == 0) return h.substr(prefix.size());
  return "";
}

}  // namespace

HttpServer::HttpServer(const ServerOptions& options) : options_(options), impl_(std::make_unique<Impl>(options)) {
  if (options_.http_threads < 1) throw InputError("--http-threads must be >= 1");
  auto& http = impl_->http;
  const size_t n_threads = static_cast<size_t>(options_.http_threads);
  http.new_task_queue = [n_threads] { return new httplib::ThreadPool(n_threads); };
  http.set_payload_max_length(options_.max_body_bytes);
  http.set_keep_alive_timeout(5);
  http.set_read_timeout(30);
  http.set_write_timeout(30);
  // NOTE: without TCP_NODELAY, Nagle holds each small SSE chunk written after the
  // headers until the client's delayed ACK (~40 ms on Linux): TTFT +40 ms, tokens bunched.
  http.set_tcp_nodelay(true);
  http.set_socket_options([impl = impl_.get()](int sock) {
    httplib::default_socket_options(sock);
    impl->listen_fd = sock;
  });
  http.set_error_handler([](const httplib::Request&, httplib::Response& res) {
    if (!res.body.empty()) return;
    std::string msg = res.status == 404   ? "no such route"
                      : res.status == 413 ? "request body too large"
                      : res.status == 405 ? "method not allowed"
                                          : "bad request";
    send_error(res, ApiError(res.status, msg, res.status >= 500 ? "server_error" : "invalid_request_error"));
  });

  Impl* impl = impl_.get();
  const ServerOptions* opts = &options_;

  // Wraps an API route: readiness, authentication, rate limit, error mapping.
  auto api = [impl, opts](bool limited, std::function<void(Impl::Ready&, const httplib::Request&, httplib::Response&)> fn) {
    return [impl, opts, limited, fn](const httplib::Request& req, httplib::Response& res) {
      try {
        std::shared_ptr<Impl::Ready> ready = impl->get_ready();
        if (!ready) throw ApiError(503, "the model is still loading", "server_error", "", "not_ready");
        const std::string key = bearer_token(req);
        if (!opts->api_key.empty() && key != opts->api_key) {
          throw ApiError(401, "invalid or missing API key (send 'Authorization: Bearer <key>')", "invalid_request_error",
                         "", "invalid_api_key");
        }
        double retry_s = 1;
        if (limited && !impl->limiter.allow(key.empty() ? "addr:" + req.remote_addr : "key:" + key, &retry_s)) {
          res.set_header("Retry-After", std::to_string(static_cast<int64_t>(std::ceil(retry_s))));
          throw ApiError(429, "rate limit exceeded (--rate-limit requests per minute per key)", "rate_limit_error", "",
                         "rate_limit_exceeded");
        }
        fn(*ready, req, res);
        if (limited) impl->metrics.requests_ok++;
      } catch (const ApiError& e) {
        impl->metrics.requests_rejected++;
        send_error(res, e);
      } catch (const InputError& e) {
        impl->metrics.requests_rejected++;
        send_error(res, bad_request(e.what()));
      } catch (const std::exception& e) {
        impl->metrics.requests_rejected++;
        log_warn(std::string("request failed: ") + e.what());
        send_error(res, ApiError(500, std::string("internal error: ") + e.what(), "server_error"));
      }
    };
  };

  auto completion = [impl, opts](bool chat) {
    return [impl, opts, chat](Impl::Ready& ready, const httplib::Request& req, httplib::Response& res) {
      CompletionContext ctx{*opts, *ready.backend, *ready.chat, impl->metrics};
      handle_completion(ctx, req, res, chat);
    };
  };
  http.Post("/v1/completions", api(true, completion(false)));
  http.Post("/v1/chat/completions", api(true, completion(true)));
  auto model_card = [opts](const Impl::Ready& ready) {
    return nlohmann::json{{"id", opts->served_model_name},
                          {"object", "model"},
                          {"created", static_cast<int64_t>(std::time(nullptr))},
                          {"owned_by", "parallm"},
                          {"max_model_len", ready.backend->max_model_len()}};
  };
  http.Get("/v1/models", api(false, [model_card](Impl::Ready& ready, const httplib::Request&, httplib::Response& res) {
             res.set_content(nlohmann::json({{"object", "list"}, {"data", {model_card(ready)}}}).dump(), "application/json");
           }));
  http.Get(R"(/v1/models/(.+))", api(false, [model_card, opts](Impl::Ready& ready, const httplib::Request& req,
                                                               httplib::Response& res) {
             const std::string id = req.matches[1];
             if (id != opts->served_model_name) {
               throw ApiError(404, "model '" + id + "' does not exist; this server serves '" + opts->served_model_name + "'",
                              "invalid_request_error", "model", "model_not_found");
             }
             res.set_content(model_card(ready).dump(), "application/json");
           }));
  auto tokenizer_route = [impl, opts](bool encode) {
    return [impl, opts, encode](Impl::Ready& ready, const httplib::Request& req, httplib::Response& res) {
      CompletionContext ctx{*opts, *ready.backend, *ready.chat, impl->metrics};
      if (encode) {
        handle_tokenize(ctx, req, res);
      } else {
        handle_detokenize(ctx, req, res);
      }
    };
  };
  http.Post("/tokenize", api(false, tokenizer_route(true)));
  http.Post("/detokenize", api(false, tokenizer_route(false)));
  http.Get("/health", [impl](const httplib::Request&, httplib::Response& res) {
    if (impl->get_ready()) {
      res.set_content("{\"status\":\"ok\"}", "application/json");
    } else {
      send_error(res, ApiError(503, "the model is still loading", "server_error", "", "not_ready"));
    }
  });
  // Browsers' cross-origin requests (web UIs calling the API): every answer
  // allows any origin, and a preflight OPTIONS on any path gets 204 with the
  // methods and the headers it asked for (Authorization included, which a
  // wildcard would not cover), without authentication, as browsers send
  // preflights without credentials. These are vLLM's defaults (allowed
  // origins, methods and headers "*", no credentials).
  http.set_default_headers({{"Access-Control-Allow-Origin", "*"}});
  http.Options(".*", [](const httplib::Request& req, httplib::Response& res) {
    res.status = 204;
    res.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
    const std::string asked = req.get_header_value("Access-Control-Request-Headers");
    res.set_header("Access-Control-Allow-Headers", asked.empty() ? "Authorization, Content-Type" : asked);
    res.set_header("Access-Control-Max-Age", "86400");
  });
  http.Get("/metrics", [impl](const httplib::Request&, httplib::Response& res) {
    std::shared_ptr<Impl::Ready> ready = impl->get_ready();
    ServingMetrics m;
    std::vector<DeviceStat> devices;
    if (ready) {
      m = ready->backend->metrics();
      devices = ready->backend->device_stats();
    }
    res.set_content(impl->metrics.render(m, devices), "text/plain; version=0.0.4");
  });
}

HttpServer::~HttpServer() { stop(); }

int HttpServer::bind() {
  int port = options_.port;
  if (port == 0) {
    port = impl_->http.bind_to_any_port(options_.host);
  } else if (!impl_->http.bind_to_port(options_.host, port)) {
    port = -1;
  }
  if (port <= 0) {
    throw InputError("cannot listen on " + options_.host + ":" + std::to_string(options_.port) +
                     " (address in use or not local? pass --host / --port)");
  }
  // NOTE: libcpp-httplib 0.11 listens with a backlog of 5: a burst of new connections
  // (bench at concurrency 32, many clients at once) overflows it and each dropped SYN
  // waits 1 s, 3 s, ... for the kernel's retransmit. listen() again raises the backlog.
  if (impl_->listen_fd >= 0) ::listen(impl_->listen_fd, SOMAXCONN);
  options_.port = port;
  return port;
}

void HttpServer::run() { impl_->http.listen_after_bind(); }

void HttpServer::start() {
  thread_ = std::thread([this] { run(); });
  while (!impl_->http.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

void HttpServer::stop() {
  impl_->http.stop();
  if (thread_.joinable()) thread_.join();
}

void HttpServer::set_backend(CompletionBackend* backend) {
  std::shared_ptr<Impl::Ready> ready;
  if (backend) {
    ready = std::make_shared<Impl::Ready>();
    ready->backend = backend;
    ready->chat = std::make_unique<ChatFormatter>(ChatFormatter::for_tokenizer(backend->tokenizer(), options_.chat_template));
  }
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->ready = std::move(ready);
}

}  // namespace parallm
