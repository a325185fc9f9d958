// The fleet simulation: dp replicas (each its own Scheduler and BlockManager,
// replica.h) behind a router, driven by one discrete-event loop:
//   events   request arrivals (sorted: a trace, the Poisson process, or the
//            closed loop's next request issued when one finishes) and step
//            ends (a min-heap holding at most one entry per replica);
//   arrival  the router picks a replica (least outstanding tokens, the HTTP
//            router's policy, or round-robin); an idle replica starts a step;
//   step end the replica's scheduler takes the step's tokens; each new token
//            is a timestamp of its request; a replica with work starts its
//            next step at once (the serve loop never waits).
// Ties: a request entering at the instant a step ends joins the next step. Replicas
// share nothing but the clock, so their cost is independent of each other.
// What comes out is what bench's client would have recorded for each request
// (loadtest::RequestRecord), so loadtest::aggregate() makes the same report.
// A request enters its replica's scheduler after ServeOverheads::
// per_request_s in one of the replica's front-end threads (parsing and
// tokenizing in the server; a FIFO queue, see on_arrival), counted in TTFT.
#pragma once
#include <cstdint>
#include <string>

#include "loadtest/stream_client.h"
#include "sim/replica.h"
#include "sim/sim_load.h"

namespace parallm::sim {

enum class RoutePolicy { kLeastOutstandingTokens, kRoundRobin };
// "least-outstanding-tokens" | "round-robin"; InputError otherwise.
RoutePolicy parse_route_policy(const std::string& name);
const char* route_policy_name(RoutePolicy p);

struct FleetOptions {
  int dp = 1;
  ReplicaOptions replica;
  RoutePolicy policy = RoutePolicy::kLeastOutstandingTokens;
  // ITL gaps kept for the percentiles: past this many, only every 2nd, 4th,
  // ... request keeps its gaps (a systematic sample; bounded memory at 10^6
  // requests x hundreds of tokens).
  int64_t max_itl_samples = 4000000;
  // Front-end threads per replica that parse and tokenize requests, each
  // ServeOverheads::per_request_s per request (serve's --http-threads: 4).
  int front_threads = 4;
  // Closed loop: bench's client is one event loop, so requests that fall due
  // together (streams ending in the same step) leave it one after another,
  // this far apart. NOTE: the value hardly matters, the order does: the
  // first request to reach an idle replica starts its step alone, as the
  // real step loop takes what its inbox holds when it wakes; with ties the
  // streams would stay in lock-step forever (all prefill in one step, all
  // decode together), which no real server shows.
  double client_send_s = 50e-6;
  uint64_t noise_seed = 0;  // replica k draws its jitter from noise_seed + k
};

struct FleetResult {
  loadtest::LevelRun run;    // records (by request index) and the span
  uint64_t preemptions = 0;  // all replicas
  uint64_t steps = 0;        // all replicas
  int64_t rejected = 0;      // requests that can never run (kNever), recorded as HTTP 4xx
  int64_t itl_stride = 1;    // every itl_stride-th request kept its ITL gaps
  double busy_s = 0;         // sum over replicas of time spent in steps
};

FleetResult simulate_fleet(const FleetOptions& options, const StepCost& cost, const SimLoad& load);

}  // namespace parallm::sim
