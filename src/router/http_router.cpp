// HttpRouter (see http_router.h).
#include "router/http_router.h"

#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <set>

#include "util/check.h"
#include "util/json_parse.h"

namespace parallm {

namespace {

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// Hop-by-hop headers (RFC 9110 §7.6.1) and those the router writes itself.
bool dropped_header(std::string_view name) {
  static const char* const kDropped[] = {"connection", "keep-alive", "transfer-encoding", "te", "upgrade", "trailer",
                                         "host", "content-length", "expect",
                                         // Only Content-Type of the answer comes back, so a
                                         // compressed body would reach the client unlabelled.
                                         "accept-encoding"};
  for (const char* d : kDropped)
    if (net::header_name_equal(name, d)) return true;
  return name.size() >= 6 && net::header_name_equal(name.substr(0, 6), "proxy-");
}

const char* error_type(int status) {
  if (status == 401) return "authentication_error";
  if (status == 404) return "not_found_error";
  if (status >= 500) return "server_error";
  return "invalid_request_error";
}

net::HttpResponse error_response(int status, const std::string& message) {
  net::HttpResponse r;
  r.status = status;
  r.set_content(router_error_json(status, message), "application/json");
  return r;
}

std::string sse_error(const std::string& message) {
  nlohmann::json j = {{"error", {{"message", message}, {"type", "server_error"}, {"code", 502}}}};
  return "data: " + j.dump() + "\n\ndata: [DONE]\n\n";
}

int64_t estimate_tokens(const std::string& body, int64_t default_max_tokens) {
  int64_t out = default_max_tokens;
  // A client's body: bounded like the server's (util/json_parse.h).
  const auto parsed = try_parse_json<nlohmann::json>(body, JsonLimits{kRequestJsonDepth, kRequestJsonMembers});
  if (parsed && parsed->is_object()) {
    const nlohmann::json& j = *parsed;
    for (const char* key : {"max_tokens", "max_completion_tokens"}) {
      auto it = j.find(key);
      if (it == j.end() || !it->is_number_integer()) continue;
      const int64_t v = it->is_number_unsigned() && it->get<uint64_t>() > (1u << 24) ? -1 : it->get<int64_t>();
      if (v >= 0 && v <= (1 << 24)) out = v;  // the backend refuses anything past that anyway
    }
  }
  return static_cast<int64_t>(body.size() / 4) + out;  // NOTE: no tokenizer here: ~4 bytes a token
}

}  // namespace

std::string router_error_json(int status, const std::string& message) {
  nlohmann::json j = {{"error", {{"message", message}, {"type", error_type(status)}, {"code", status}}}};
  return j.dump();
}

struct HttpRouter::Backend {
  std::string label;  // the URL as given (the metrics' backend label)
  loadtest::HttpUrl url;
  UpstreamAddress address;
  std::atomic<bool> up{false};
  std::atomic<bool> health_pending{false};
  // Counters, under stats_mu.
  mutable std::mutex stats_mu;
  int64_t requests_total = 0;  // complete answers from this backend
  int64_t errors_total = 0;    // attempts that failed in transport
  int64_t in_flight = 0;
  std::vector<int64_t> bucket_counts = std::vector<int64_t>(std::size(kRouterLatencyBuckets), 0);
  double duration_sum_s = 0;
  int64_t duration_count = 0;
};

// One client request on its way through the router.
struct HttpRouter::Forward {
  std::shared_ptr<net::HttpExchange> ex;
  std::string method, target;
  int64_t tokens = 0;
  uint64_t prefix_hash = 0;
  std::mutex mu;  // below
  std::vector<bool> tried;
  int backend = -1;
  uint64_t call_id = 0;
  bool gone = false;
  bool streaming = false;  // start_stream() went out: no retry past this
  int status = 0;
  std::string content_type;
  std::string body;  // a whole answer being collected
  std::string last_error;
  double t0_s = 0;
};

HttpRouter::HttpRouter(const HttpRouterOptions& options) : options_(options) {
  if (options_.backends.empty()) throw InputError("parallm router: give at least one --backend URL");
  std::set<std::string> seen;
  for (const std::string& text : options_.backends) {
    auto b = std::make_unique<Backend>();
    b->label = text;
    try {
      b->url = loadtest::parse_http_url(text);
    } catch (const std::exception& e) {
      std::string why = e.what();
      // loadtest's wording names its own flag: "--url 'U' must ..." or "--url 'U': ...".
      for (const std::string& echo : {"--url '" + text + "': ", "--url '" + text + "' "})
        if (why.rfind(echo, 0) == 0) {
          why = why.substr(echo.size());
          break;
        }
      throw InputError("--backend '" + text + "': " + why);
    }
    if (!seen.insert(b->url.to_string()).second) throw InputError("--backend '" + text + "' is given twice");
    std::string error;
    if (!resolve_upstream(b->url.host, b->url.port, b->address, error))
      throw InputError("--backend '" + text + "': " + error);
    backends_.push_back(std::move(b));
  }
  loads_.resize(backends_.size());
  for (auto& l : loads_) l.healthy = false;
  net::HttpCoreOptions core;
  core.host = options_.host;
  core.port = options_.port;
  core.worker_threads = 2;
  core.write_timeout_s = 120;
  core_ = std::make_unique<net::HttpCore>(
      core, [this](const std::shared_ptr<net::HttpExchange>& ex) { handle(ex); },
      [](int status, const std::string& message) { return error_response(status, message); });
}

HttpRouter::~HttpRouter() { stop(); }

int HttpRouter::bind() { return core_->bind(); }

void HttpRouter::start() {
  health_round();
  const double until = now_s() + options_.health_timeout_s + 0.2;
  while (now_s() < until) {
    bool pending = false;
    for (auto& b : backends_) pending = pending || b->health_pending.load();
    if (!pending) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  health_thread_ = std::thread([this] { health_loop(); });
  core_->start();
}

void HttpRouter::stop() {
  {
    std::lock_guard<std::mutex> lock(health_mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  health_cv_.notify_all();
  if (health_thread_.joinable()) health_thread_.join();
  if (core_ && core_->running()) core_->stop();
}

bool HttpRouter::backend_up(int i) const { return backends_.at(static_cast<size_t>(i))->up.load(); }

int64_t HttpRouter::backend_requests(int i) const {
  const Backend& b = *backends_.at(static_cast<size_t>(i));
  std::lock_guard<std::mutex> lock(b.stats_mu);
  return b.requests_total;
}

void HttpRouter::set_up(size_t i, bool up) {
  backends_[i]->up = up;
  std::lock_guard<std::mutex> lock(mu_);
  loads_[i].healthy = up;
}

void HttpRouter::health_round() {
  for (size_t i = 0; i < backends_.size(); ++i) {
    Backend& b = *backends_[i];
    if (b.health_pending.exchange(true)) continue;  // the last probe is still out
    UpstreamCall call;
    call.address = b.address;
    call.request = build_request(b, "GET", "/health", {}, "");
    call.connect_timeout_s = options_.health_timeout_s;
    call.timeout_s = options_.health_timeout_s;
    auto status = std::make_shared<int>(0);
    call.on_headers = [status](int s, const std::string&) { *status = s; };
    call.on_done = [this, i, status](const UpstreamResult& r) {
      set_up(i, r.ok && *status == 200);
      backends_[i]->health_pending = false;
    };
    upstream_.submit(std::move(call));
  }
}

void HttpRouter::health_loop() {
  std::unique_lock<std::mutex> lock(health_mu_);
  while (!stopping_) {
    health_cv_.wait_for(lock, std::chrono::duration<double>(options_.health_interval_s));
    if (stopping_) break;
    lock.unlock();
    health_round();
    lock.lock();
  }
}

std::string HttpRouter::build_request(const Backend& b, const std::string& method, const std::string& target,
                                      const net::HttpHeaders& headers, const std::string& body) const {
  std::string r = method + " " + b.url.base_path + target + " HTTP/1.1\r\nHost: " + b.url.authority() + "\r\n";
  for (const auto& [name, value] : headers) {
    if (dropped_header(name)) continue;
    // The router's own key is for the router; a backend has its own.
    if (!options_.api_key.empty() && net::header_name_equal(name, "authorization")) continue;
    r += name + ": " + value + "\r\n";
  }
  if (method == "POST") r += "Content-Length: " + std::to_string(body.size()) + "\r\n";
  r += "Connection: close\r\n\r\n";
  r += body;
  return r;
}

void HttpRouter::handle(const std::shared_ptr<net::HttpExchange>& ex) {
  const net::HttpRequest& req = ex->request();
  const std::string& path = req.path;
  const bool completion = path == "/v1/completions" || path == "/v1/chat/completions";
  const bool get_route = path == "/v1/models" || path == "/health" || path == "/metrics";
  if (!completion && !get_route) return ex->respond(error_response(404, "no route for " + path));
  const char* allow = completion ? "POST" : "GET, HEAD";
  const bool method_ok = completion ? req.method == "POST" : (req.method == "GET" || req.method == "HEAD");
  if (!method_ok) {
    auto r = error_response(405, req.method + " is not allowed on " + path);
    r.set_header("Allow", allow);
    return ex->respond(std::move(r));
  }
  if (!options_.api_key.empty() && path.rfind("/v1/", 0) == 0 &&
      req.header("authorization") != "Bearer " + options_.api_key)
    return ex->respond(error_response(401, "missing or wrong API key (send Authorization: Bearer <key>)"));
  if (path == "/health") {
    bool any = false;
    for (auto& b : backends_) any = any || b->up.load();
    net::HttpResponse r;
    r.status = any ? 200 : 503;
    r.set_content(any ? "{\"status\":\"ok\"}" : router_error_json(503, "no healthy backend"), "application/json");
    return ex->respond(std::move(r));
  }
  if (path == "/metrics") {
    net::HttpResponse r;
    r.set_content(metrics_text(), "text/plain; version=0.0.4");
    return ex->respond(std::move(r));
  }
  if (path == "/v1/models") return list_models(ex);
  forward(ex);
}

void HttpRouter::forward(const std::shared_ptr<net::HttpExchange>& ex) {
  auto f = std::make_shared<Forward>();
  f->ex = ex;
  f->method = ex->request().method;
  f->target = ex->request().target;
  f->tokens = estimate_tokens(ex->request().body, options_.default_max_tokens);
  if (options_.policy == BackendPolicy::kPrefixAffinity) f->prefix_hash = fnv1a64(affinity_text(ex->request().body));
  f->tried.assign(backends_.size(), false);
  std::weak_ptr<Forward> weak = f;
  ex->on_gone([this, weak] {
    auto f = weak.lock();
    if (!f) return;
    std::lock_guard<std::mutex> lock(f->mu);
    f->gone = true;
    if (f->call_id != 0) upstream_.cancel(f->call_id);  // closing the socket aborts the generation
  });
  dispatch(f);
}

void HttpRouter::dispatch(const std::shared_ptr<Forward>& f) {
  int chosen = -1;
  {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<ReplicaLoad> loads = loads_;
    for (size_t i = 0; i < loads.size(); ++i)
      if (f->tried[i]) loads[i].healthy = false;
    switch (options_.policy) {
      case BackendPolicy::kRoundRobin:
        chosen = choose_round_robin(loads, cursor_);
        break;
      case BackendPolicy::kLeastTokens:
        chosen = choose_least_tokens(loads, cursor_);
        break;
      case BackendPolicy::kPrefixAffinity:
        chosen = choose_prefix_affinity(loads, f->prefix_hash, cursor_);
        break;
    }
    if (chosen >= 0) {
      loads_[static_cast<size_t>(chosen)].outstanding_tokens += f->tokens;
      loads_[static_cast<size_t>(chosen)].requests += 1;
    }
  }
  std::lock_guard<std::mutex> lock(f->mu);
  if (chosen < 0) {
    if (f->last_error.empty())
      f->ex->respond(error_response(503, "no healthy backend"));
    else
      f->ex->respond(error_response(502, "every backend failed; last: " + f->last_error));
    return;
  }
  if (f->gone) {
    std::lock_guard<std::mutex> l(mu_);
    loads_[static_cast<size_t>(chosen)].outstanding_tokens -= f->tokens;
    loads_[static_cast<size_t>(chosen)].requests -= 1;
    return;
  }
  f->tried[static_cast<size_t>(chosen)] = true;
  f->backend = chosen;
  f->status = 0;
  f->body.clear();
  f->t0_s = now_s();
  Backend& b = *backends_[static_cast<size_t>(chosen)];
  {
    std::lock_guard<std::mutex> l(b.stats_mu);
    b.in_flight += 1;
  }
  UpstreamCall call;
  call.address = b.address;
  call.request = build_request(b, f->method, f->target, f->ex->request().headers, f->ex->request().body);
  call.on_headers = [f](int status, const std::string& content_type) {
    std::lock_guard<std::mutex> lock(f->mu);
    f->status = status;
    f->content_type = content_type;
    if (content_type.rfind("text/event-stream", 0) == 0) {
      f->streaming = true;
      f->ex->start_stream(status, {{"Content-Type", content_type}, {"Cache-Control", "no-cache"}});
    }
  };
  call.on_body = [f](std::string_view data) {
    std::lock_guard<std::mutex> lock(f->mu);
    if (f->streaming)
      f->ex->write(data);  // as read: no buffering
    else
      f->body.append(data);
  };
  call.on_done = [this, f, chosen](const UpstreamResult& r) {
    Backend& b = *backends_[static_cast<size_t>(chosen)];
    const double dt = now_s() - f->t0_s;
    {
      std::lock_guard<std::mutex> l(mu_);
      loads_[static_cast<size_t>(chosen)].outstanding_tokens -= f->tokens;
      loads_[static_cast<size_t>(chosen)].requests -= 1;
    }
    {
      std::lock_guard<std::mutex> l(b.stats_mu);
      b.in_flight -= 1;
      if (r.ok) {
        b.requests_total += 1;
        for (size_t k = 0; k < std::size(kRouterLatencyBuckets); ++k)
          if (dt <= kRouterLatencyBuckets[k]) b.bucket_counts[k] += 1;
        b.duration_sum_s += dt;
        b.duration_count += 1;
      } else if (!r.cancelled) {
        b.errors_total += 1;
      }
    }
    std::unique_lock<std::mutex> lock(f->mu);
    f->call_id = 0;
    if (r.cancelled || f->gone) return;
    if (r.ok) {
      if (f->streaming) {
        f->ex->end_stream();
      } else {
        net::HttpResponse resp;
        resp.status = f->status;
        resp.set_content(std::move(f->body), f->content_type.empty() ? "application/json" : f->content_type);
        f->ex->respond(std::move(resp));
      }
      return;
    }
    // A transport failure: this backend is out until its /health says 200.
    set_up(static_cast<size_t>(chosen), false);
    f->last_error = b.label + ": " + r.error;
    if (f->streaming) {
      f->ex->end_stream(sse_error("backend failed mid-stream: " + f->last_error));
      return;
    }
    lock.unlock();
    dispatch(f);  // nothing reached the client yet: another backend
  };
  f->call_id = upstream_.submit(std::move(call));
}

void HttpRouter::list_models(const std::shared_ptr<net::HttpExchange>& ex) {
  struct Gather {
    std::mutex mu;
    int waiting = 0;
    std::vector<nlohmann::json> lists;
  };
  auto g = std::make_shared<Gather>();
  std::vector<size_t> up;
  for (size_t i = 0; i < backends_.size(); ++i)
    if (backends_[i]->up.load()) up.push_back(i);
  if (up.empty()) return ex->respond(error_response(503, "no healthy backend"));
  g->waiting = static_cast<int>(up.size());
  auto finish = [ex](Gather& g) {
    nlohmann::json data = nlohmann::json::array();
    std::set<std::string> ids;
    for (const auto& list : g.lists)
      for (const auto& m : list)
        if (m.is_object() && m.contains("id") && m["id"].is_string() && ids.insert(m["id"].get<std::string>()).second)
          data.push_back(m);
    net::HttpResponse r;
    r.set_content(nlohmann::json{{"object", "list"}, {"data", data}}.dump(), "application/json");
    ex->respond(std::move(r));
  };
  for (size_t i : up) {
    Backend& b = *backends_[i];
    UpstreamCall call;
    call.address = b.address;
    call.request = build_request(b, "GET", "/v1/models", ex->request().headers, "");
    call.timeout_s = 5;
    auto body = std::make_shared<std::string>();
    call.on_body = [body](std::string_view d) { body->append(d); };
    call.on_done = [g, body, finish](const UpstreamResult& r) {
      std::lock_guard<std::mutex> lock(g->mu);
      if (r.ok) {
        auto j = try_parse_json<nlohmann::json>(*body, JsonLimits{kRequestJsonDepth});  // a backend's answer
        if (j && j->is_object() && j->contains("data") && (*j)["data"].is_array()) g->lists.push_back((*j)["data"]);
      }
      if (--g->waiting == 0) finish(*g);
    };
    upstream_.submit(std::move(call));
  }
}

std::string HttpRouter::metrics_text() const {
  std::string out;
  auto line = [&out](const std::string& s) { out += s + "\n"; };
  auto lbl = [](const Backend& b) { return "{backend=\"" + b.label + "\"}"; };
  line("# HELP parallm:router_requests_total Requests a backend answered completely.");
  line("# TYPE parallm:router_requests_total counter");
  for (auto& b : backends_) {
    std::lock_guard<std::mutex> l(b->stats_mu);
    line("parallm:router_requests_total" + lbl(*b) + " " + std::to_string(b->requests_total));
  }
  line(
      "# HELP parallm:router_request_errors_total Attempts that failed in transport (connect, "
      "reset, early close).");
  line("# TYPE parallm:router_request_errors_total counter");
  for (auto& b : backends_) {
    std::lock_guard<std::mutex> l(b->stats_mu);
    line("parallm:router_request_errors_total" + lbl(*b) + " " + std::to_string(b->errors_total));
  }
  line(
      "# HELP parallm:router_backend_up 1 while the backend is routed to (its /health answers "
      "200).");
  line("# TYPE parallm:router_backend_up gauge");
  for (auto& b : backends_) line("parallm:router_backend_up" + lbl(*b) + " " + (b->up.load() ? "1" : "0"));
  line("# HELP parallm:router_in_flight Requests forwarded to the backend and not yet answered.");
  line("# TYPE parallm:router_in_flight gauge");
  for (auto& b : backends_) {
    std::lock_guard<std::mutex> l(b->stats_mu);
    line("parallm:router_in_flight" + lbl(*b) + " " + std::to_string(b->in_flight));
  }
  line("# HELP parallm:router_request_duration_seconds Forward to last byte, per backend.");
  line("# TYPE parallm:router_request_duration_seconds histogram");
  for (auto& b : backends_) {
    std::lock_guard<std::mutex> l(b->stats_mu);
    for (size_t k = 0; k < std::size(kRouterLatencyBuckets); ++k) {
      char le[32];
      std::snprintf(le, sizeof le, "%g", kRouterLatencyBuckets[k]);
      line("parallm:router_request_duration_seconds_bucket{backend=\"" + b->label + "\",le=\"" + le + "\"} " +
           std::to_string(b->bucket_counts[k]));
    }
    line("parallm:router_request_duration_seconds_bucket{backend=\"" + b->label + "\",le=\"+Inf\"} " +
         std::to_string(b->duration_count));
    char sum[64];
    std::snprintf(sum, sizeof sum, "%.6f", b->duration_sum_s);
    line("parallm:router_request_duration_seconds_sum" + lbl(*b) + " " + sum);
    line("parallm:router_request_duration_seconds_count" + lbl(*b) + " " + std::to_string(b->duration_count));
  }
  return out;
}

}  // namespace parallm
