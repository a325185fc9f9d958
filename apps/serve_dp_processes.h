// `parallm serve --dp N --dp-processes`: N child `parallm serve` processes on
// private loopback ports behind the HTTP router (src/router/http_router.h)
// on the user's --host/--port, so that one replica's crash does not take the
// others down (the in-process --dp of src/server/replica_set_backend.h shares
// one address space). The parent loads no model: it starts the children
// (src/router/replica_processes.h), restarts one that dies, and on SIGTERM /
// SIGINT forwards the signal, lets each child drain, and exits when all have.
#pragma once
#include <atomic>
#include <string>

namespace parallm {

struct DpProcessOptions {
  int dp = 2;
  std::string host = "127.0.0.1";
  int port = 8000;
  std::string routing;             // serve's --routing (least-outstanding-tokens, or a router --policy name)
  std::string devices;             // --devices: split into dp groups of `world` ("" = none)
  int world = 1;                   // devices per replica (tp × pp)
  double shutdown_timeout_s = 30;  // the children's drain; the parent waits that plus a margin
};

// `signals` counts SIGTERM/SIGINT received (cmd_serve's handler). Returns the exit code.
int run_serve_dp_processes(const DpProcessOptions& o, const std::atomic<int>& signals);

}  // namespace parallm
