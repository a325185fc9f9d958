// `parallm router` end to end on loopback: scripted OpenAI backends (net::HttpCore
// servers that stream a fixed script), the router in process, and clients on
// the router's own event-driven UpstreamClient so a thousand streams need no
// thread each.
#include "router/http_router.h"

#include <gtest/gtest.h>
#include <sys/resource.h>

#include <chrono>
#include <future>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "util/check.h"

namespace parallm {
namespace {

using namespace std::chrono_literals;

// A scripted backend: /health (200 or 503 on demand), /v1/models, and
// /v1/completions answering with `n_events` SSE events 5 ms apart (stream)
// or one JSON object naming the backend.
class ScriptedBackend {
 public:
  explicit ScriptedBackend(std::string name, int port = 0) : name_(std::move(name)) { start(port); }
  ~ScriptedBackend() { stop(); }

  void start(int port) {
    net::HttpCoreOptions o;
    o.port = port;
    o.worker_threads = 1;
    core_ = std::make_unique<net::HttpCore>(
        o, [this](const std::shared_ptr<net::HttpExchange>& ex) { handle(ex); },
        [](int status, const std::string& m) {
          net::HttpResponse r;
          r.status = status;
          r.body = m;
          return r;
        });
    port_ = core_->bind();
    core_->start();
    ticking_ = true;
    ticker_ = std::thread([this] { tick_loop(); });
  }
  void stop() {
    if (!core_) return;
    ticking_ = false;
    ticker_.join();
    core_->stop();
    core_.reset();
    std::lock_guard<std::mutex> lock(mu_);
    streams_.clear();
  }
  int port() const { return port_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::atomic<bool> healthy{true};
  std::atomic<int> completions{0};  // answered completely
  std::atomic<int> aborted{0};      // clients (the router) that left mid-stream
  std::atomic<int> received{0};
  int n_events = 5;

  static std::string event(const std::string& name, int i) {
    return "data: {\"backend\":\"" + name + "\",\"i\":" + std::to_string(i) + "}\n\n";
  }

 private:
  struct Stream {
    std::shared_ptr<net::HttpExchange> ex;
    int sent = 0;
    std::shared_ptr<std::atomic<bool>> gone;
  };

  void handle(const std::shared_ptr<net::HttpExchange>& ex) {
    const auto& req = ex->request();
    if (req.path == "/health") {
      net::HttpResponse r;
      r.status = healthy ? 200 : 503;
      r.body = "{}";
      return ex->respond(r);
    }
    if (req.path == "/v1/models") {
      net::HttpResponse r;
      r.set_content(R"({"object":"list","data":[{"id":"model-)" + name_ + R"("},{"id":"shared"}]})",
                    "application/json");
      return ex->respond(r);
    }
    received++;
    const auto body = nlohmann::json::parse(req.body);
    if (body.value("stream", false)) {
      auto gone = std::make_shared<std::atomic<bool>>(false);
      ex->on_gone([this, gone] {
        *gone = true;
        aborted++;
      });
      ex->start_stream(200, {{"Content-Type", "text/event-stream"}});
      std::lock_guard<std::mutex> lock(mu_);
      streams_.push_back({ex, 0, gone});
      return;
    }
    net::HttpResponse r;
    nlohmann::json answer = {{"backend", name_},
                             {"auth", req.header("authorization")},
                             {"path", req.path},
                             {"trace", req.header("x-trace")},
                             {"encoding", req.header("accept-encoding")}};
    r.set_content(answer.dump(), "application/json");
    completions++;
    ex->respond(r);
  }

  void tick_loop() {
    while (ticking_) {
      std::this_thread::sleep_for(5ms);
      std::lock_guard<std::mutex> lock(mu_);
      for (auto it = streams_.begin(); it != streams_.end();) {
        if (*it->gone) {
          it = streams_.erase(it);
          continue;
        }
        if (it->sent + 1 < n_events) {
          it->ex->write(event(name_, it->sent++));
          ++it;
          continue;
        }
        it->ex->end_stream(event(name_, it->sent) + "data: [DONE]\n\n");
        completions++;
        it = streams_.erase(it);
      }
    }
  }

  std::string name_;
  int port_ = 0;
  std::unique_ptr<net::HttpCore> core_;
  std::thread ticker_;
  std::atomic<bool> ticking_{false};
  std::mutex mu_;
  std::vector<Stream> streams_;
};

struct Reply {
  bool ok = false;
  int status = 0;
  std::string body;
  std::string error;
};

// A client request to the router through an UpstreamClient.
std::future<Reply> send(UpstreamClient& client, int port, const std::string& method, const std::string& path,
                        const std::string& body = "", const std::string& extra_headers = "") {
  auto promise = std::make_shared<std::promise<Reply>>();
  auto reply = std::make_shared<Reply>();
  UpstreamCall call;
  std::string error;
  PARALLM_CHECK(resolve_upstream("127.0.0.1", port, call.address, error));
  call.request = method + " " + path + " HTTP/1.1\r\nHost: x\r\n" + extra_headers +
                 "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
                 "\r\nConnection: close\r\n\r\n" + body;
  call.timeout_s = 30;
  call.on_headers = [reply](int status, const std::string&) { reply->status = status; };
  call.on_body = [reply](std::string_view d) { reply->body.append(d); };
  call.on_done = [promise, reply](const UpstreamResult& r) {
    reply->ok = r.ok;
    reply->error = r.error;
    promise->set_value(*reply);
  };
  client.submit(std::move(call));
  return promise->get_future();
}

std::string completion(bool stream, const std::string& prompt = "hello") {
  return nlohmann::json{{"model", "m"}, {"prompt", prompt}, {"max_tokens", 8}, {"stream", stream}}.dump();
}

std::string script(const std::string& name, int n) {
  std::string s;
  for (int i = 0; i < n; ++i) s += ScriptedBackend::event(name, i);
  return s + "data: [DONE]\n\n";
}

struct Rig {
  std::vector<std::unique_ptr<ScriptedBackend>> backends;
  std::unique_ptr<HttpRouter> router;
  int port = 0;
  UpstreamClient client;

  explicit Rig(BackendPolicy policy, int n = 3, const std::string& api_key = "") {
    HttpRouterOptions o;
    o.port = 0;
    o.policy = policy;
    o.api_key = api_key;
    o.health_interval_s = 0.2;
    o.health_timeout_s = 0.5;
    for (int i = 0; i < n; ++i) {
      backends.push_back(std::make_unique<ScriptedBackend>("b" + std::to_string(i)));
      o.backends.push_back(backends.back()->url());
    }
    router = std::make_unique<HttpRouter>(o);
    port = router->bind();
    router->start();
  }
  ~Rig() { router->stop(); }
  Reply get(const std::string& path, const std::string& headers = "") {
    return send(client, port, "GET", path, "", headers).get();
  }
  Reply post(const std::string& body, const std::string& headers = "") {
    return send(client, port, "POST", "/v1/completions", body, headers).get();
  }
};

bool wait_for(const std::function<bool()>& cond, double seconds = 5) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < until) {
    if (cond()) return true;
    std::this_thread::sleep_for(10ms);
  }
  return cond();
}

int64_t metric(const std::string& text, const std::string& series) {
  const auto at = text.find(series + " ");
  if (at == std::string::npos) return -1;
  return std::stoll(text.substr(at + series.size() + 1));
}

TEST(HttpRouter, BadBackendUrlsAreInputErrors) {
  HttpRouterOptions o;
  EXPECT_THROW(HttpRouter{o}, InputError);
  o.backends = {"ftp://x"};
  EXPECT_THROW(HttpRouter{o}, InputError);
  o.backends = {"http://127.0.0.1:1", "http://127.0.0.1:1"};
  EXPECT_THROW(HttpRouter{o}, InputError);
  // Malformed: no port number, no host, a path-only string.
  for (const char* bad : {"http://127.0.0.1:notaport", "http://:8000", "127.0.0.1:8000/v1"}) {
    o.backends = {bad};
    EXPECT_THROW(HttpRouter{o}, InputError) << bad;
  }
  // A host that does not resolve (RFC 6761 reserves .invalid) is the user's typo, not a down backend.
  o.backends = {"http://no-such-host.invalid:8000"};
  try {
    HttpRouter r{o};
    ADD_FAILURE() << "no-such-host.invalid resolved";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("no-such-host.invalid"), std::string::npos) << e.what();
  }
}

TEST(HttpRouter, BackendRefusingAtStartIsDownThenAdmitted) {
  ScriptedBackend up("b0"), late("b1");
  const int late_port = late.port();
  late.stop();  // nothing listens there when the router starts: connection refused
  HttpRouterOptions o;
  o.port = 0;
  o.policy = BackendPolicy::kRoundRobin;
  o.health_interval_s = 0.2;
  o.health_timeout_s = 0.5;
  o.backends = {up.url(), "http://127.0.0.1:" + std::to_string(late_port)};
  HttpRouter router(o);  // not an input error
  const int port = router.bind();
  router.start();
  UpstreamClient client;
  EXPECT_TRUE(router.backend_up(0));
  EXPECT_FALSE(router.backend_up(1));
  EXPECT_EQ(send(client, port, "GET", "/health").get().status, 200);
  for (int i = 0; i < 6; ++i) {
    const Reply r = send(client, port, "POST", "/v1/completions", completion(false)).get();
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(nlohmann::json::parse(r.body)["backend"], "b0");
  }
  late.start(late_port);  // it answers now: admitted on its next health probe
  ASSERT_TRUE(wait_for([&] { return router.backend_up(1); }));
  for (int i = 0; i < 6; ++i)
    EXPECT_EQ(send(client, port, "POST", "/v1/completions", completion(false)).get().status, 200);
  EXPECT_GT(late.completions.load(), 0);
  router.stop();
}

TEST(HttpRouter, RoundRobinSpreadsAndPassesAnswersThrough) {
  Rig rig(BackendPolicy::kRoundRobin);
  std::vector<std::future<Reply>> whole, streamed;
  for (int i = 0; i < 30; ++i)
    whole.push_back(send(rig.client, rig.port, "POST", "/v1/completions", completion(false)));
  for (int i = 0; i < 30; ++i)
    streamed.push_back(send(rig.client, rig.port, "POST", "/v1/completions", completion(true)));
  std::map<std::string, int> by_backend;
  for (auto& f : whole) {
    const Reply r = f.get();
    ASSERT_TRUE(r.ok) << r.error;
    ASSERT_EQ(r.status, 200);
    by_backend[nlohmann::json::parse(r.body)["backend"]]++;
  }
  for (auto& f : streamed) {
    const Reply r = f.get();
    ASSERT_TRUE(r.ok) << r.error;
    ASSERT_EQ(r.status, 200);
    const std::string name = r.body.substr(r.body.find("\"backend\":\"") + 11, 2);
    EXPECT_EQ(r.body, script(name, 5));  // byte for byte as the backend sent it
    by_backend[name]++;
  }
  EXPECT_EQ(by_backend, (std::map<std::string, int>{{"b0", 20}, {"b1", 20}, {"b2", 20}}));
  // The router's counters agree with the backends'.
  const std::string m = rig.get("/metrics").body;
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(metric(m, "parallm:router_requests_total{backend=\"" + rig.backends[i]->url() + "\"}"),
              rig.backends[i]->completions.load());
    EXPECT_EQ(metric(m, "parallm:router_backend_up{backend=\"" + rig.backends[i]->url() + "\"}"), 1);
    EXPECT_EQ(metric(m, "parallm:router_in_flight{backend=\"" + rig.backends[i]->url() + "\"}"), 0);
    EXPECT_EQ(metric(m, "parallm:router_request_duration_seconds_count{backend=\"" + rig.backends[i]->url() + "\"}"),
              20);
  }
}

TEST(HttpRouter, RoutesAndErrors) {
  Rig rig(BackendPolicy::kLeastTokens, 3, "sekret");
  EXPECT_EQ(rig.get("/health").status, 200);
  const auto models = nlohmann::json::parse(rig.get("/v1/models", "Authorization: Bearer sekret\r\n").body);
  std::set<std::string> ids;
  for (const auto& m : models["data"]) ids.insert(m["id"]);
  EXPECT_EQ(ids, (std::set<std::string>{"model-b0", "model-b1", "model-b2", "shared"}));
  EXPECT_EQ(models["data"].size(), 4u);  // deduplicated
  EXPECT_EQ(rig.get("/nope").status, 404);
  const Reply wrong = send(rig.client, rig.port, "GET", "/v1/completions").get();
  EXPECT_EQ(wrong.status, 405);
  EXPECT_EQ(send(rig.client, rig.port, "POST", "/health").get().status, 405);
  EXPECT_EQ(rig.post(completion(false)).status, 401);
  EXPECT_EQ(rig.post(completion(false), "Authorization: Bearer wrong\r\n").status, 401);
  const Reply ok = rig.post(completion(false), "Authorization: Bearer sekret\r\nX-Trace: 7\r\n");
  EXPECT_EQ(ok.status, 200);
  EXPECT_EQ(nlohmann::json::parse(ok.body)["auth"], "");  // the router's key is not forwarded
  const Reply chat =
      send(rig.client, rig.port, "POST", "/v1/chat/completions", R"({"messages": [{"role": "user", "content": "hi"}]})",
           "Authorization: Bearer sekret\r\nAccept-Encoding: gzip\r\n")
          .get();
  EXPECT_EQ(chat.status, 200);
  EXPECT_EQ(nlohmann::json::parse(chat.body)["path"], "/v1/chat/completions");
  EXPECT_EQ(nlohmann::json::parse(chat.body)["encoding"], "");  // not forwarded
  EXPECT_EQ(nlohmann::json::parse(ok.body)["trace"], "7");      // other headers are forwarded
}

TEST(HttpRouter, NoHealthyBackendIs503) {
  Rig rig(BackendPolicy::kLeastTokens, 2);
  for (auto& b : rig.backends) b->healthy = false;
  ASSERT_TRUE(wait_for([&] { return !rig.router->backend_up(0) && !rig.router->backend_up(1); }));
  EXPECT_EQ(rig.get("/health").status, 503);
  const Reply r = rig.post(completion(false));
  EXPECT_EQ(r.status, 503);
  EXPECT_EQ(nlohmann::json::parse(r.body)["error"]["code"], 503);
  rig.backends[1]->healthy = true;  // re-admitted on its next 200
  ASSERT_TRUE(wait_for([&] { return rig.router->backend_up(1); }));
  EXPECT_EQ(rig.get("/health").status, 200);
  EXPECT_EQ(rig.post(completion(false)).status, 200);
}

TEST(HttpRouter, DeadBackendIsRetriedEjectedAndReadmitted) {
  Rig rig(BackendPolicy::kRoundRobin);
  const int dead_port = rig.backends[1]->port();
  rig.backends[1]->stop();  // connection refused, before the health check notices
  std::vector<std::future<Reply>> replies;
  for (int i = 0; i < 30; ++i)
    replies.push_back(send(rig.client, rig.port, "POST", "/v1/completions", completion(i % 2 == 0)));
  for (auto& f : replies) {
    const Reply r = f.get();
    EXPECT_TRUE(r.ok) << r.error;
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(r.body.find("b1"), std::string::npos);
  }
  EXPECT_FALSE(rig.router->backend_up(1));
  rig.backends[1]->start(dead_port);  // back on the same port
  ASSERT_TRUE(wait_for([&] { return rig.router->backend_up(1); }));
  for (int i = 0; i < 6; ++i) EXPECT_EQ(rig.post(completion(false)).status, 200);
  EXPECT_GT(rig.backends[1]->completions.load(), 0);
}

TEST(HttpRouter, BackendDyingMidStreamEndsWithAnErrorEvent) {
  Rig rig(BackendPolicy::kRoundRobin, 2);
  for (auto& b : rig.backends) b->n_events = 200;  // ~1 s streams
  std::vector<std::future<Reply>> replies;
  for (int i = 0; i < 10; ++i)
    replies.push_back(send(rig.client, rig.port, "POST", "/v1/completions", completion(true)));
  ASSERT_TRUE(wait_for([&] { return rig.backends[0]->received.load() + rig.backends[1]->received.load() == 10; }));
  std::this_thread::sleep_for(100ms);
  rig.backends[0]->stop();
  int cut = 0, whole = 0;
  for (auto& f : replies) {
    const Reply r = f.get();
    ASSERT_TRUE(r.ok) << r.error;  // every client gets a complete answer
    ASSERT_EQ(r.status, 200);
    EXPECT_EQ(r.body.substr(r.body.size() - 14), "data: [DONE]\n\n");
    if (r.body.find("\"error\"") != std::string::npos)
      cut++;
    else
      whole++;
  }
  EXPECT_EQ(cut, 5);
  EXPECT_EQ(whole, 5);
  // Later requests go to the survivor.
  for (int i = 0; i < 4; ++i) EXPECT_EQ(rig.post(completion(false)).status, 200);
}

TEST(HttpRouter, ClientLeavingClosesTheUpstream) {
  Rig rig(BackendPolicy::kLeastTokens, 1);
  rig.backends[0]->n_events = 100000;
  UpstreamCall call;
  std::string error;
  ASSERT_TRUE(resolve_upstream("127.0.0.1", rig.port, call.address, error));
  const std::string body = completion(true);
  call.request =
      "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
  std::atomic<int> bytes{0};
  call.on_body = [&bytes](std::string_view d) { bytes += static_cast<int>(d.size()); };
  const uint64_t id = rig.client.submit(std::move(call));
  ASSERT_TRUE(wait_for([&] { return bytes.load() > 200; }));
  rig.client.cancel(id);
  ASSERT_TRUE(wait_for([&] { return rig.backends[0]->aborted.load() == 1; }));
  ASSERT_TRUE(wait_for([&] { return rig.router->open_upstream_calls() == 0; }));
}

TEST(HttpRouter, PrefixAffinityKeepsAPrefixOnOneBackend) {
  Rig rig(BackendPolicy::kPrefixAffinity);
  std::map<std::string, std::set<std::string>> owners;
  for (int p = 0; p < 12; ++p)
    for (int k = 0; k < 3; ++k) {
      const std::string prompt = "shared prefix " + std::to_string(p);
      const Reply r = rig.post(completion(false, prompt));
      ASSERT_EQ(r.status, 200);
      owners[prompt].insert(nlohmann::json::parse(r.body)["backend"].get<std::string>());
    }
  std::set<std::string> used;
  for (auto& [prompt, set] : owners) {
    EXPECT_EQ(set.size(), 1u) << prompt;
    used.insert(*set.begin());
  }
  EXPECT_GE(used.size(), 2u);
}

TEST(HttpRouter, AThousandOpenStreams) {
  Rig rig(BackendPolicy::kLeastTokens, 2);
  for (auto& b : rig.backends) b->n_events = 40;  // ~200 ms each: all open at once
  constexpr int kStreams = 1000;
  std::vector<std::future<Reply>> replies;
  for (int i = 0; i < kStreams; ++i)
    replies.push_back(send(rig.client, rig.port, "POST", "/v1/completions", completion(true)));
  int done = 0;
  for (auto& f : replies) {
    const Reply r = f.get();
    if (r.ok && r.status == 200 && r.body.size() > 14 && r.body.substr(r.body.size() - 14) == "data: [DONE]\n\n" &&
        r.body.find("error") == std::string::npos)
      done++;
  }
  EXPECT_EQ(done, kStreams);
  EXPECT_EQ(rig.backends[0]->completions.load() + rig.backends[1]->completions.load(), kStreams);
  EXPECT_GT(rig.backends[0]->completions.load(), kStreams / 4);
  EXPECT_GT(rig.backends[1]->completions.load(), kStreams / 4);
}

}  // namespace
}  // namespace parallm
