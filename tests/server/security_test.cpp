// The server's security defaults: API keys (constant-time compare, file and
// environment), CORS off unless origins are allowed, the Host allow-list,
// and the /metrics key — as functions, and through the HTTP server against
// a scripted backend.
#include <gtest/gtest.h>
#include <httplib.h>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "http_test_util.h"
#include "scripted_backend.h"
#include "server/api_keys.h"
#include "server/http_server.h"
#include "server/origin_policy.h"
#include "util/check.h"
#include "util/log.h"

namespace parallm {
namespace {

TEST(ApiKeys, ConstantTimeEqualIsEquality) {
  EXPECT_TRUE(constant_time_equal("sekret", "sekret"));
  for (const char* other : {"", "s", "sekre", "sekret!", "Sekret", "sekres", "sekretsekret", "xekret"}) {
    EXPECT_FALSE(constant_time_equal(other, "sekret")) << other;
  }
  EXPECT_FALSE(constant_time_equal("", ""));  // an empty key accepts nothing
  EXPECT_FALSE(constant_time_equal(std::string("a\0b", 3), "a"));
}

TEST(ApiKeys, FileEnvironmentAndSeveralKeys) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "parallm_keys_test";
  std::filesystem::create_directories(dir);
  const std::string file = (dir / "keys").string();
  {
    std::ofstream f(file);
    f << "# team keys\n  alpha  \n\nbeta\r\n#gamma\n";
  }
  EXPECT_EQ(ApiKeys::read_file(file), (std::vector<std::string>{"alpha", "beta"}));
  {
    std::ofstream f(file);
    f << "# nothing\n\n";
  }
  EXPECT_THROW(ApiKeys::read_file(file), InputError);
  EXPECT_THROW(ApiKeys::read_file((dir / "missing").string()), InputError);
  std::filesystem::remove_all(dir);

  ::unsetenv("PARALLM_API_KEY");
  ::setenv("VLLM_API_KEY", "from-vllm", 1);
  EXPECT_EQ(ApiKeys::from_environment(), "from-vllm");
  ::setenv("PARALLM_API_KEY", "from-parallm", 1);
  EXPECT_EQ(ApiKeys::from_environment(), "from-parallm");  // parallm's own first
  ::unsetenv("PARALLM_API_KEY");
  ::unsetenv("VLLM_API_KEY");
  EXPECT_EQ(ApiKeys::from_environment(), "");

  ApiKeys keys({"alpha", "", "beta"});
  EXPECT_TRUE(keys.enabled());
  EXPECT_TRUE(keys.accepts("alpha"));
  EXPECT_TRUE(keys.accepts("beta"));
  EXPECT_FALSE(keys.accepts(""));
  EXPECT_FALSE(keys.accepts("alph"));
  EXPECT_FALSE(ApiKeys({""}).enabled());
}

TEST(OriginPolicy, ListsOriginsAndHosts) {
  EXPECT_EQ(OriginPolicy::parse_list("--x", R"(["http://a.com", "https://b.org"])"),
            (std::vector<std::string>{"http://a.com", "https://b.org"}));
  EXPECT_EQ(OriginPolicy::parse_list("--x", " a.com, b.org ,,"), (std::vector<std::string>{"a.com", "b.org"}));
  EXPECT_TRUE(OriginPolicy::parse_list("--x", "").empty());
  EXPECT_THROW(OriginPolicy::parse_list("--x", "[1, 2]"), InputError);
  EXPECT_THROW(OriginPolicy::parse_list("--x", "[\"a\""), InputError);

  OriginPolicy none({}, {});
  EXPECT_FALSE(none.cors_enabled());
  EXPECT_EQ(none.allow_origin("http://evil.example"), "");
  EXPECT_TRUE(none.host_allowed("anything:80"));

  OriginPolicy some({"http://a.com/", "HTTPS://B.org"}, {"localhost", "127.0.0.1", "[::1]"});
  EXPECT_EQ(some.allow_origin("http://a.com"), "http://a.com");
  EXPECT_EQ(some.allow_origin("https://b.org"), "https://b.org");
  EXPECT_EQ(some.allow_origin("http://a.com.evil.example"), "");
  EXPECT_EQ(some.allow_origin(""), "");
  EXPECT_TRUE(some.host_allowed("localhost:8000"));
  EXPECT_TRUE(some.host_allowed("LOCALHOST"));
  EXPECT_TRUE(some.host_allowed("127.0.0.1:8000"));
  EXPECT_TRUE(some.host_allowed("[::1]:8000"));
  EXPECT_FALSE(some.host_allowed("rebound.example:8000"));
  EXPECT_FALSE(some.host_allowed(""));

  OriginPolicy any({"*"}, {"*"});
  EXPECT_EQ(any.allow_origin("http://x"), "*");
  EXPECT_TRUE(any.host_allowed("x"));
}

class SecurityHttpTest : public ::testing::Test {
 protected:
  void start(ServerOptions o) {
    std::signal(SIGPIPE, SIG_IGN);
    set_log_level(LogLevel::kWarn);
    o.port = 0;
    o.served_model_name = "tiny";
    backend_ = std::make_unique<ScriptedBackend>();
    server_ = std::make_unique<HttpServer>(o);
    port_ = server_->bind();
    server_->start();
    server_->set_backend(backend_.get());
  }
  void TearDown() override {
    if (server_) server_->stop();
    server_.reset();
    backend_.reset();
  }
  std::string raw(const std::string& method, const std::string& path, const std::string& headers) {
    return test::raw_http(port_, method, path, method == "POST" ? R"({"prompt":"Once","max_tokens":2})" : "", headers);
  }
  std::unique_ptr<ScriptedBackend> backend_;
  std::unique_ptr<HttpServer> server_;
  int port_ = 0;
};

TEST_F(SecurityHttpTest, NoCorsHeadersUnlessOriginsAreAllowed) {
  start({});
  const std::string r = raw("POST", "/v1/completions", "Origin: http://evil.example\r\n");
  EXPECT_EQ(test::status_of(r), 200);
  EXPECT_EQ(r.find("Access-Control-Allow-Origin"), std::string::npos) << r;
  const std::string pre =
      raw("OPTIONS", "/v1/completions", "Origin: http://evil.example\r\nAccess-Control-Request-Method: POST\r\n");
  EXPECT_EQ(test::status_of(pre), 204);
  EXPECT_EQ(pre.find("Access-Control-Allow-"), std::string::npos) << pre;
}

TEST_F(SecurityHttpTest, AllowedOriginIsEchoedWithVary) {
  ServerOptions o;
  o.allowed_origins = {"http://ui.example"};
  start(o);
  const std::string ok = raw("POST", "/v1/completions", "Origin: http://ui.example\r\n");
  EXPECT_NE(ok.find("Access-Control-Allow-Origin: http://ui.example"), std::string::npos) << ok;
  EXPECT_NE(ok.find("Vary: Origin"), std::string::npos) << ok;
  const std::string other = raw("POST", "/v1/completions", "Origin: http://evil.example\r\n");
  EXPECT_EQ(other.find("Access-Control-Allow-Origin"), std::string::npos) << other;
}

TEST_F(SecurityHttpTest, HostAllowListRefusesOtherNames) {
  ServerOptions o;
  o.allowed_hosts = {"localhost"};
  start(o);
  // raw_http sends "Host: 127.0.0.1", which is not listed.
  const std::string refused = raw("POST", "/v1/completions", "");
  EXPECT_EQ(test::status_of(refused), 403) << refused;
  EXPECT_NE(refused.find("host_not_allowed"), std::string::npos);
  httplib::Client c("localhost", port_);
  auto r = c.Post("/v1/completions", R"({"prompt":"Once","max_tokens":2})", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
}

TEST_F(SecurityHttpTest, MetricsKeyAndSeveralApiKeys) {
  ServerOptions o;
  o.api_key = "k1";
  o.api_keys = {"k2"};
  o.metrics_api_key = "scrape";
  start(o);
  httplib::Client c("127.0.0.1", port_);
  EXPECT_EQ(c.Get("/metrics")->status, 401);
  EXPECT_EQ(c.Get("/metrics", {{"Authorization", "Bearer k1"}})->status, 401);  // API keys do not open /metrics
  EXPECT_EQ(c.Get("/metrics", {{"Authorization", "Bearer scrape"}})->status, 200);
  EXPECT_EQ(c.Get("/health")->status, 200);  // probes stay open
  const std::string body = R"({"prompt":"Once","max_tokens":2})";
  for (const char* key : {"k1", "k2"}) {
    EXPECT_EQ(
        c.Post("/v1/completions", {{"Authorization", std::string("Bearer ") + key}}, body, "application/json")->status,
        200);
  }
  EXPECT_EQ(c.Post("/v1/completions", {{"Authorization", "Bearer scrape"}}, body, "application/json")->status, 401);
  EXPECT_EQ(c.Post("/v1/completions", body, "application/json")->status, 401);
}

}  // namespace
}  // namespace parallm
