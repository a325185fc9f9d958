// --find-capacity: the largest load one server carries while meeting the SLOs,
// and the capacity plan derived from it.
// Search: start at the given load and double until a level fails (goodput
// below the target) or the maximum is reached, then bisect between the last
// passing and the first failing load. Concurrency is refined to one stream;
// a rate until hi/lo <= 1 + resolution. If the first level already fails, the
// bisection runs between 0 and it. The search is pure: it calls `evaluate`
// for each load, so it is tested without a network.
// Planning: servers = ceil(peak * headroom / per-server capacity), where a
// peak in the other unit than the search is converted with what was measured
// at the capacity level (requests/s for a concurrency search; Little's law,
// rate * mean e2e, for a rate search).
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "loadtest/stats.h"

namespace parallm::loadtest {

struct CapacitySearchSpec {
  bool open_loop = false;  // search over rate (req/s) instead of concurrency
  double start = 1;        // first load tried
  double max = 1024;       // never try more
  double rate_resolution = 0.1;
  double goodput_target = 0.95;
};

struct CapacityResult {
  bool open_loop = false;
  double capacity = 0;              // largest passing load; 0: none passed
  bool reached_max = false;         // the maximum passed: the capacity is at least `capacity`
  std::vector<LevelResult> levels;  // every level tried, in order
  std::vector<bool> passed;
  int best_level = -1;  // index into levels of the capacity level
  // Planning (0 / -1 when not asked or not possible).
  double peak_concurrency = 0, peak_qps = 0, headroom = 1.3;
  double per_server_concurrency = 0;  // capacity expressed as streams in flight
  double per_server_qps = 0;          // capacity expressed as requests/s
  int64_t servers_for_peak_concurrency = -1;
  int64_t servers_for_peak_qps = -1;
};

bool level_passes(const LevelResult& r, double goodput_target);

CapacityResult find_capacity(const CapacitySearchSpec& spec, const std::function<LevelResult(double load)>& evaluate);

// Fills the planning fields of `result`.
void plan_capacity(CapacityResult& result, double peak_concurrency, double peak_qps, double headroom);

}  // namespace parallm::loadtest
