// `parallm router`: an OpenAI-compatible front over one or more backend
// servers (parallm serve, vLLM, llama-server), routing each completion by
// --policy, passing SSE through as it arrives, ejecting backends whose
// /health fails (docs/router.md). Serves until SIGINT/SIGTERM.
#include <sys/resource.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <thread>

#include "command_registry.h"
#include "router/http_router.h"
#include "util/check.h"

namespace parallm {
namespace {

std::atomic<bool> g_stop{false};
void on_router_signal(int) { g_stop = true; }

struct RouterCliOptions {
  std::vector<std::string> backends;
  std::string policy = "least-tokens";
  std::string host = "127.0.0.1";
  int port = 8000;
  std::string api_key;
};

// Each open stream holds two sockets (client and backend): raise the soft
// descriptor limit to the hard one so thousands of streams fit.
void raise_fd_limit() {
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
}

int run_router(const RouterCliOptions& cli) {
  HttpRouterOptions opt;
  opt.backends = cli.backends;
  opt.policy = parse_backend_policy(cli.policy);
  opt.host = cli.host;
  opt.port = cli.port;
  opt.api_key = cli.api_key;
  raise_fd_limit();
  HttpRouter router(opt);
  const int port = router.bind();
  std::signal(SIGINT, on_router_signal);
  std::signal(SIGTERM, on_router_signal);
  std::signal(SIGPIPE, SIG_IGN);
  router.start();
  int up = 0;
  for (int i = 0; i < router.n_backends(); ++i) up += router.backend_up(i) ? 1 : 0;
  std::fprintf(stderr, "parallm router: %d backend(s), %d up, policy %s\n", router.n_backends(), up,
               cli.policy.c_str());
  std::fprintf(stderr, "listening on http://%s:%d\n", cli.host.c_str(), port);
  while (!g_stop.load()) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  router.stop();
  return 0;
}

const bool registered = register_command(
    {"router", "Route OpenAI requests over several backend servers", [](CLI::App& sub) -> CommandAction {
       auto opt = std::make_shared<RouterCliOptions>();
       sub.add_option("--backend", opt->backends, "Backend base URL, http://host:port (repeat for each)")->required();
       sub.add_option("--policy", opt->policy, "least-tokens | prefix-affinity | round-robin")->capture_default_str();
       sub.add_option("--host", opt->host, "Address to listen on")->capture_default_str();
       sub.add_option("--port", opt->port, "Port to listen on (0 = any free port)")->capture_default_str();
       sub.add_option("--api-key", opt->api_key, "Clients must send Authorization: Bearer KEY on /v1/*");
       return [opt] { return run_router(*opt); };
     }});

}  // namespace
}  // namespace parallm
