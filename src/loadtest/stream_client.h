// The event-driven load generator: one thread, one epoll set, one non-blocking
// socket per request in flight, HTTP/1.1 keep-alive connections reused across
// requests. Each level is either closed loop (keep `concurrency` streams in
// flight) or open loop (Poisson arrivals at `rate` per second, optionally
// capped). Timestamps are taken when bytes are read, so what is measured is
// what the socket delivered, not when the parser got to it; the loop's own CPU
// time is measured to show when the client, not the server, is the limit.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "loadtest/request_record.h"
#include "loadtest/server_probe.h"
#include "loadtest/workload.h"

namespace parallm::loadtest {

struct LevelSpec {
  int level = 0;             // seeds the level's requests
  int64_t concurrency = 0;   // closed loop: streams kept in flight; open loop: cap (0 = none)
  double rate = 0;           // requests/s (Poisson); 0 = closed loop
  int64_t num_requests = 0;  // stop issuing after this many (0 = no count bound)
  double duration_s = 0;     // stop issuing after this long (0 = no time bound)
  double timeout_s = 60;     // per request
  uint64_t seed = 0;         // for the arrival process
};

struct LevelRun {
  std::vector<RequestRecord> records;  // in order of completion
  double start_s = 0;                  // first request issued
  double end_s = 0;                    // last request finished
  double client_cpu_s = 0;             // CPU time of the event-loop thread during the level
  int64_t max_in_flight = 0;
  int64_t connections_opened = 0;
};

// Runs one level to its bound and returns every request's record. Never
// throws for server misbehaviour: that becomes records with errors.
LevelRun run_level(const ServerAddress& server, const Workload& workload, const LevelSpec& spec);

double monotonic_s();

}  // namespace parallm::loadtest
