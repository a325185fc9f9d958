// Capacity search and planning; see capacity.h.
#include "loadtest/capacity.h"

#include <algorithm>
#include <cmath>

#include "util/check.h"

namespace parallm::loadtest {

bool level_passes(const LevelResult& r, double goodput_target) { return r.requests > 0 && r.goodput >= goodput_target; }

CapacityResult find_capacity(const CapacitySearchSpec& spec, const std::function<LevelResult(double load)>& evaluate) {
  PARALLM_CHECK(spec.start > 0 && spec.max >= spec.start);
  CapacityResult out;
  out.open_loop = spec.open_loop;
  auto round_load = [&](double x) { return spec.open_loop ? x : std::round(x); };
  auto try_load = [&](double load) {
    out.levels.push_back(evaluate(load));
    const bool pass = level_passes(out.levels.back(), spec.goodput_target);
    out.passed.push_back(pass);
    if (pass && load > out.capacity) {
      out.capacity = load;
      out.best_level = static_cast<int>(out.levels.size()) - 1;
    }
    return pass;
  };
  double lo = 0;  // largest passing load
  double hi = 0;  // smallest failing load
  for (double load = round_load(spec.start);; load = std::min(spec.max, round_load(load * 2))) {
    if (!try_load(load)) {
      hi = load;
      break;
    }
    lo = load;
    if (load >= spec.max) {
      out.reached_max = true;
      return out;
    }
  }
  auto refined = [&] {
    if (!spec.open_loop) return hi - lo <= 1;
    if (lo == 0) return hi <= spec.start / 1024;  // nothing passes even at a trickle
    return hi / lo <= 1 + spec.rate_resolution;
  };
  while (!refined()) {
    const double mid = spec.open_loop ? (lo == 0 ? hi / 2 : std::sqrt(lo * hi)) : std::floor((lo + hi) / 2);
    if (try_load(mid)) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  return out;
}

void plan_capacity(CapacityResult& r, double peak_concurrency, double peak_qps, double headroom) {
  r.peak_concurrency = peak_concurrency;
  r.peak_qps = peak_qps;
  r.headroom = headroom;
  if (r.best_level < 0) return;
  const LevelResult& best = r.levels[static_cast<size_t>(r.best_level)];
  if (r.open_loop) {
    r.per_server_qps = r.capacity;
    r.per_server_concurrency = r.capacity * best.e2e_ms.mean / 1e3;  // Little's law
  } else {
    r.per_server_concurrency = r.capacity;
    r.per_server_qps = best.requests_per_s;
  }
  auto servers = [&](double peak, double per_server) -> int64_t {
    if (peak <= 0 || per_server <= 0) return -1;
    return std::max<int64_t>(1, static_cast<int64_t>(std::ceil(peak * headroom / per_server - 1e-9)));
  };
  r.servers_for_peak_concurrency = servers(peak_concurrency, r.per_server_concurrency);
  r.servers_for_peak_qps = servers(peak_qps, r.per_server_qps);
}

}  // namespace parallm::loadtest
