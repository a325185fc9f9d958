// run_serve_dp_processes (see serve_dp_processes.h).
#include "serve_dp_processes.h"

#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <thread>

#include "command_registry.h"
#include "core/device.h"
#include "router/http_router.h"
#include "router/replica_processes.h"
#include "util/check.h"
#include "util/log.h"

namespace parallm {

namespace {

// serve's --routing names the in-process policy; the router's equivalent.
BackendPolicy router_policy(const std::string& routing) {
  if (routing.empty() || routing == "least-outstanding-tokens") return BackendPolicy::kLeastTokens;
  if (routing == "least-tokens" || routing == "prefix-affinity" || routing == "round-robin")
    return parse_backend_policy(routing);
  throw InputError("unknown --routing '" + routing +
                   "' with --dp-processes (known: least-outstanding-tokens, prefix-affinity, round-robin)");
}

std::string join_devices(const std::vector<DeviceId>& ids) {
  std::string out;
  for (const auto& d : ids) out += (out.empty() ? "" : ",") + d.to_string();
  return out;
}

}  // namespace

int run_serve_dp_processes(const DpProcessOptions& o, const std::atomic<int>& signals) {
  const BackendPolicy policy = router_policy(o.routing);
  std::vector<DeviceId> devices;
  if (!o.devices.empty()) {
    devices = parse_device_list(o.devices);
    if (static_cast<int>(devices.size()) != o.dp * o.world)
      throw InputError(strfmt("--devices lists %zu device(s); --dp %d replicas of tp x pp = %d need %d", devices.size(),
                              o.dp, o.world, o.dp * o.world));
  }
  const std::vector<std::string>& all = process_args();
  std::vector<std::string> serve_args;
  bool after = false;
  for (const auto& a : all) {
    if (after)
      serve_args.push_back(a);
    else if (a == "serve")
      after = true;
  }
  std::error_code ec;
  const std::string exe = std::filesystem::read_symlink("/proc/self/exe", ec).string();
  if (ec) throw InputError("--dp-processes: cannot find this executable (/proc/self/exe)");

  std::vector<ReplicaProcessSpec> specs;
  HttpRouterOptions ro;
  ro.policy = policy;
  ro.host = o.host;
  ro.port = o.port;
  ro.health_interval_s = 0.5;  // a crashed replica is ejected within ~0.5 s; the retry covers the gap
  for (int r = 0; r < o.dp; ++r) {
    const int port = pick_free_loopback_port();
    ReplicaProcessSpec spec;
    std::string group;
    if (!devices.empty()) {
      std::vector<DeviceId> mine(devices.begin() + r * o.world, devices.begin() + (r + 1) * o.world);
      bool cuda = false;
      std::string visible;
      for (const auto& d : mine) {
        if (d.kind != DeviceId::Kind::kCuda) continue;
        cuda = true;
        visible += (visible.empty() ? "" : ",") + std::to_string(d.index);
      }
      if (cuda) {
        // The child sees only its group, renumbered from 0, as with a CUDA_VISIBLE_DEVICES launch
        // line.
        spec.env.emplace_back("CUDA_VISIBLE_DEVICES", visible);
        for (size_t i = 0, k = 0; i < mine.size(); ++i)
          if (mine[i].kind == DeviceId::Kind::kCuda) mine[i].index = static_cast<int>(k++);
      }
      group = join_devices(mine);
    }
    spec.argv = {exe, "serve"};
    for (auto& a : replica_serve_args(serve_args, port, group)) spec.argv.push_back(a);
    specs.push_back(std::move(spec));
    ro.backends.push_back(strfmt("http://127.0.0.1:%d", port));
  }

  HttpRouter router(ro);
  const int port = router.bind();
  router.start();
  std::fprintf(stderr, "parallm serve: listening on http://%s:%d (router over %d replica processes: %s)\n",
               o.host.c_str(), port, o.dp,
               [&] {
                 std::string s;
                 for (const auto& b : ro.backends) s += (s.empty() ? "" : ", ") + b;
                 return s;
               }()
                   .c_str());
  std::fflush(stderr);
  ReplicaProcesses procs(std::move(specs));
  procs.start_all();
  while (signals.load() == 0) {
    procs.poll();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  // Drain: each child answers 503 to new requests and /health (the router
  // stops sending it any), finishes what it has, and exits; the router keeps
  // passing their answers through until then.
  log_info(strfmt("shutting down: draining %d replica process(es) (up to %.0f s)", o.dp, o.shutdown_timeout_s));
  procs.signal_all(SIGTERM);
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(o.shutdown_timeout_s + 15);
  while (!procs.all_exited() && std::chrono::steady_clock::now() < until) {
    procs.poll();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (!procs.all_exited()) {
    log_warn("a replica did not exit after its drain: killing it");
    procs.signal_all(SIGKILL);
    for (int i = 0; i < 100 && !procs.all_exited(); ++i) {
      procs.poll();
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  router.stop();
  std::fprintf(stderr, "parallm serve: shutting down\n");
  return 0;
}

}  // namespace parallm
