// FrontEndProbe: see front_end_probe.h.
#include "front_end_probe.h"

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>

#include "engine/engine.h"
#include "engine/serving_engine.h"
#include "loadtest/bench_options.h"
#include "loadtest/http_url.h"
#include "loadtest/server_probe.h"
#include "loadtest/stream_client.h"
#include "loadtest/workload.h"
#include "server/completion_backend.h"
#include "server/http_server.h"
#include "util/log.h"

namespace parallm {

namespace {

constexpr const char* kModelName = "profile";

// The profiler's ServingEngine as serve's backend; it owns nothing (the
// profiler also times bare forwards on the same engine while it is idle).
class ProbeBackend : public CompletionBackend {
 public:
  ProbeBackend(Engine& engine, ServingEngine& serving) : engine_(engine), serving_(serving) {}
  SubmitStatus submit(ServingRequest request, std::function<void(const TokenEvent&)> on_event, uint64_t* id) override {
    return serving_.submit(std::move(request), std::move(on_event), id);
  }
  void abort(uint64_t id) override { serving_.abort(id); }
  ServingMetrics metrics() const override { return serving_.metrics(); }
  std::vector<DeviceStat> device_stats() const override { return {}; }
  const Tokenizer& tokenizer() const override { return engine_.tokenizer(); }
  int64_t max_model_len() const override {
    const int64_t m = serving_.options().max_model_len;
    return m > 0 ? m : engine_.ctx_size();
  }
  std::string failure() const override { return serving_.failure(); }

 private:
  Engine& engine_;
  ServingEngine& serving_;
};

}  // namespace

struct FrontEndProbe::Impl {
  Impl(Engine& engine, ServingEngine& serving) : backend(engine, serving), server(server_options()) {
    const int port = server.bind();
    server.set_backend(&backend);
    server.start();
    options.url = loadtest::parse_http_url(strfmt("http://127.0.0.1:%d", port));
    options.model = kModelName;
    options.endpoint = loadtest::Endpoint::kChat;
    options.ignore_eos = true;
    options.timeout_s = 30;
    address = loadtest::resolve_address(options.url);
  }
  ~Impl() {
    server.stop();
    server.set_backend(nullptr);
  }

  static ServerOptions server_options() {
    ServerOptions so;  // serve's defaults (its HTTP threads, stream interval), on loopback
    so.host = "127.0.0.1";
    so.port = 0;
    so.served_model_name = kModelName;
    return so;
  }

  ProbeBackend backend;
  HttpServer server;
  loadtest::BenchOptions options;
  loadtest::ServerAddress address;
};

FrontEndProbe::FrontEndProbe(Engine& engine, ServingEngine& serving) : impl_(std::make_unique<Impl>(engine, serving)) {}

FrontEndProbe::~FrontEndProbe() = default;

FrontEndProbe::Result FrontEndProbe::request(int64_t words) {
  constexpr int64_t output_tokens = 2;
  impl_->options.input_len = {words, words};
  impl_->options.output_len = {output_tokens, output_tokens};
  const loadtest::Workload workload(impl_->options, kModelName);
  loadtest::LevelSpec spec;
  spec.concurrency = 1;
  spec.num_requests = 1;
  spec.timeout_s = impl_->options.timeout_s;
  // Without serve's access-log line per request: calibrate's output is no
  // server log (serve logs it at info level; `--log-level warn` drops it too).
  struct QuietLog {
    LogLevel was = log_level();
    QuietLog() { set_log_level(std::min(was, LogLevel::kWarn)); }
    ~QuietLog() { set_log_level(was); }
  } quiet;
  loadtest::LevelRun run = loadtest::run_level(impl_->address, workload, spec);
  // The client has its [DONE]; the server logs the request and lets it go
  // just after. Wait for that, so its line falls inside the quiet level and
  // its work outside whatever the profiler times next.
  for (int i = 0; i < 10000 && impl_->server.active_requests() > 0; ++i)
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  bool ok = run.records.size() == 1;
  for (const loadtest::RequestRecord& r : run.records)
    ok = ok && r.ok() && r.first_token_s >= 0 && r.usage_prompt_tokens >= 1 && r.output_tokens() == output_tokens;
  if (!ok) {
    std::string why = run.records.empty() ? "no record" : "no first token or no usage";
    for (const loadtest::RequestRecord& r : run.records) {
      if (!r.ok())
        why = r.error_message;
      else if (r.output_tokens() != output_tokens)
        why = strfmt("%lld of %lld tokens", (long long)r.output_tokens(), (long long)output_tokens);
    }
    throw std::runtime_error("front-end probe: a request through serve's HTTP server failed: " + why);
  }
  const loadtest::RequestRecord& r = run.records[0];
  return {r.first_token_s - r.start_s, r.usage_prompt_tokens};
}

}  // namespace parallm
