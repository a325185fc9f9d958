// Load generation; see sim_load.h.
#include "sim/sim_load.h"

#include <cmath>

#include "loadtest/workload.h"
#include "util/check.h"
#include "util/log.h"

namespace parallm::sim {

namespace {

double unit_open(uint64_t& state) {  // uniform in (0, 1)
  return (static_cast<double>(loadtest::splitmix64(state) >> 11) + 0.5) * 0x1.0p-53;
}

}  // namespace

void validate_load(SimLoad& load) {
  if (load.num_requests < 0) throw InputError("--num-requests must be at least 1");
  if (!(load.duration_s >= 0) || !std::isfinite(load.duration_s))
    throw InputError("--duration must be a positive number of seconds");
  if (load.kind == LoadKind::kPoisson && !(load.rate > 0 && std::isfinite(load.rate)))
    throw InputError("--qps must be a positive number of requests per second");
  if (load.kind == LoadKind::kClosedLoop && load.concurrency < 1) throw InputError("--concurrency must be at least 1");
  for (const loadtest::IntRange* r : {&load.input_len, &load.output_len})
    if (r->min < 1 || r->max < r->min) throw InputError("--input-len/--output-len need 1 <= MIN <= MAX");
  if (load.kind != LoadKind::kTrace && load.num_requests == 0 && load.duration_s == 0) load.num_requests = 100;
}

SimRequest draw_lengths(const SimLoad& load, int64_t index) {
  const loadtest::RequestLengths l = loadtest::request_lengths(load.seed, 0, index, load.input_len, load.output_len);
  SimRequest r;
  r.input_tokens = l.input;
  r.output_tokens = l.output;
  return r;
}

std::vector<SimRequest> open_loop_requests(const SimLoad& load) {
  std::vector<SimRequest> out;
  auto more = [&](double t) {
    return (load.num_requests == 0 || static_cast<int64_t>(out.size()) < load.num_requests) &&
           (load.duration_s == 0 || t < load.duration_s);
  };
  if (load.kind == LoadKind::kTrace) {
    for (const SimRequest& r : load.trace) {
      if (!more(r.arrival_s)) break;
      out.push_back(r);
    }
    return out;
  }
  PARALLM_CHECK(load.kind == LoadKind::kPoisson);
  // bench's arrival process for its first level, draw for draw (the state
  // stream_client.cpp seeds with seed x 31 + level + 1): the first request at
  // time 0, then exponential gaps. Same seed, same arrival times as bench.
  uint64_t state = load.seed * 31 + 1;
  double t = 0;
  if (load.num_requests > 0) out.reserve(static_cast<size_t>(load.num_requests));
  while (more(t)) {
    SimRequest r = draw_lengths(load, static_cast<int64_t>(out.size()));
    r.arrival_s = t;
    out.push_back(r);
    t += -std::log(unit_open(state)) / load.rate;
  }
  return out;
}

}  // namespace parallm::sim
