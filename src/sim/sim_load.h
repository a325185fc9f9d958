// The load a simulation offers, in `parallm bench`'s terms: Poisson arrivals
// at `rate` (open loop), a closed loop of `concurrency` streams, or a trace.
// Lengths are fixed or uniform in [min, max] per request, drawn from the seed
// and the request's index alone (splitmix64, as bench draws them), so a run
// is reproducible and two loads with one seed offer the same requests.
// Bounds, as bench: stop issuing after num_requests and/or duration_s (100
// requests when neither is given); every issued request runs to completion.
#pragma once
#include <cstdint>
#include <vector>

#include "loadtest/bench_options.h"
#include "sim/sim_request.h"

namespace parallm::sim {

enum class LoadKind { kPoisson, kClosedLoop, kTrace };

struct SimLoad {
  LoadKind kind = LoadKind::kClosedLoop;
  double rate = 0;                // kPoisson: requests/s, all replicas together
  int64_t concurrency = 1;        // kClosedLoop: streams in flight, all replicas together
  std::vector<SimRequest> trace;  // kTrace: sorted by arrival
  loadtest::IntRange input_len{128, 128};
  loadtest::IntRange output_len{128, 128};
  int64_t num_requests = 0;  // 0: bounded by duration_s only
  double duration_s = 0;     // 0: bounded by num_requests only
  uint64_t seed = 0;
};

// Fills the default bound and throws InputError naming the flag on a bad value.
void validate_load(SimLoad& load);

// Request `index`'s lengths (arrival_s left 0): those bench's first level
// sends for the same --seed (loadtest::request_lengths), in tokens.
SimRequest draw_lengths(const SimLoad& load, int64_t index);
// Open-loop arrivals: the Poisson process (bench's own arrival times for the
// same --seed) or the trace, cut at the bounds.
std::vector<SimRequest> open_loop_requests(const SimLoad& load);

}  // namespace parallm::sim
