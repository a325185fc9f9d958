// `parallm exporter --port P [--host H]`: the hardware and host metrics of
// `serve`'s /metrics (GPUs through NVML, CPU, NUMA memory, this process),
// alone, for machines that run another engine. GET /metrics and GET /health;
// SIGINT / SIGTERM stop it.
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <thread>

#include "command_registry.h"
#include "hwmetrics/hardware_metrics.h"
#include "net/http_core.h"
#include "util/check.h"

namespace parallm {
namespace {

std::atomic<bool> g_stop{false};
void on_stop_signal(int) { g_stop = true; }

net::HttpResponse text_response(int status, std::string body, const char* content_type) {
  net::HttpResponse r;
  r.status = status;
  r.set_content(std::move(body), content_type);
  return r;
}

int run_exporter(const std::string& host, int port) {
  if (port < 0 || port > 65535)
    throw InputError("--port must be in 0..65535 (0 = any free port), got " + std::to_string(port));
  hwmetrics::HardwareMetrics hw;
  net::HttpCoreOptions co;
  co.host = host;
  co.port = port;
  co.worker_threads = 1;
  co.max_connections = 256;
  co.max_connections_per_client = 64;
  auto handler = [&hw](const std::shared_ptr<net::HttpExchange>& ex) {
    const net::HttpRequest& req = ex->request();
    const bool get = req.method == "GET" || req.method == "HEAD";
    if (req.path == "/metrics" && get) {
      ex->respond(text_response(200, hw.render(), "text/plain; version=0.0.4"));
    } else if (req.path == "/health" && get) {
      ex->respond(text_response(200, "{\"status\":\"ok\"}", "application/json"));
    } else if (req.path == "/metrics" || req.path == "/health") {
      net::HttpResponse r = text_response(405, "only GET\n", "text/plain");
      r.set_header("Allow", "GET, HEAD");
      ex->respond(std::move(r));
    } else {
      ex->respond(text_response(404, "not found: this exporter serves /metrics and /health\n", "text/plain"));
    }
  };
  auto error = [](int status, const std::string& message) {
    return text_response(status, message + "\n", "text/plain");
  };
  net::HttpCore core(co, handler, error);
  const int bound = core.bind();
  std::signal(SIGPIPE, SIG_IGN);
  std::signal(SIGINT, on_stop_signal);
  std::signal(SIGTERM, on_stop_signal);
  core.start();
  std::fprintf(stderr, "parallm exporter: listening on http://%s:%d (GPU metrics: %s)\n", host.c_str(), bound,
               hw.gpu_metrics_available() ? "NVML" : hw.gpu_status().c_str());
  while (!g_stop.load()) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  std::fprintf(stderr, "parallm exporter: stopping\n");
  core.stop();
  return 0;
}

const bool registered = register_command(
    {"exporter", "Serve GPU and host metrics (Prometheus) for any engine", [](CLI::App& sub) -> CommandAction {
       auto host = std::make_shared<std::string>("127.0.0.1");
       auto port = std::make_shared<int>(9400);
       sub.add_option("--host", *host, "Address to listen on")->capture_default_str();
       sub.add_option("--port", *port, "Port (0 = any free port)")->required();
       return [host, port]() -> int { return run_exporter(*host, *port); };
     }});

}  // namespace
}  // namespace parallm
