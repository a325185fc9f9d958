// run_comm_check / comm_findings (see comm_check.h).
#include "doctor/comm_check.h"

#include <algorithm>
#include <chrono>
#include <mutex>

#include "comm/local_comm.h"
#include "util/log.h"

namespace parallm::doctor {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// Every rank contributes rank + 1, so each element must come back n (n + 1) / 2
// (exact in float for any group this size).
void all_reduce_checked(Communicator& c, std::vector<float>& buf, int world_rank) {
  std::fill(buf.begin(), buf.end(), static_cast<float>(world_rank + 1));
  c.all_reduce_sum(buf.data(), buf.size());
}

}  // namespace

CommCheckResult run_comm_check(const std::vector<std::unique_ptr<Communicator>>& comms, int world_ranks,
                               const CommCheckOptions& o) {
  CommCheckResult r;
  r.backend = comms.empty() ? "" : comms[0]->backend_name();
  r.ranks = world_ranks;
  const int tp = std::max(o.tp, 1);
  const bool split = tp > 1 && world_ranks > tp;
  r.group_ranks = split ? tp : world_ranks;
  std::mutex mu;
  std::vector<double> latency_s, large_s;  // rank 0 of the first group's timings
  std::string wrong;
  const auto t0 = std::chrono::steady_clock::now();
  const size_t large_floats = std::max<size_t>(o.large_bytes / sizeof(float), 1);
  const std::vector<std::exception_ptr> errors = run_ranks(comms, [&](Communicator& world) {
    std::vector<float> one(1), large(large_floats);
    all_reduce_checked(world, one,
                       world.rank());  // every rank answers, or the CommError names who did not
    std::unique_ptr<Communicator> group_owner;
    Communicator* group = &world;
    if (split) {
      group_owner = world.split(world.rank() / tp, world.rank());
      group = group_owner.get();
    }
    // Ranks contribute rank-in-world + 1; the group sums its own members'.
    int first = world.rank() - group->rank();
    const double want = static_cast<double>(group->size()) * (2 * first + group->size() + 1) / 2;
    auto check = [&](const std::vector<float>& buf) {
      for (float x : buf)
        if (x != want) {
          std::lock_guard<std::mutex> lock(mu);
          wrong = strfmt("all_reduce_sum on %s rank %d returned %g where the sum is %g", world.backend_name(),
                         world.rank(), static_cast<double>(x), want);
          return;
        }
    };
    for (int i = 0; i < std::max(o.iterations, 1); ++i) {
      auto t = std::chrono::steady_clock::now();
      all_reduce_checked(*group, one, world.rank());
      const double small = seconds_since(t);
      check(one);
      t = std::chrono::steady_clock::now();
      all_reduce_checked(*group, large, world.rank());
      const double big = seconds_since(t);
      check(large);
      if (world.rank() == 0) {
        std::lock_guard<std::mutex> lock(mu);
        latency_s.push_back(small);
        large_s.push_back(big);
      }
    }
    world.barrier();  // nobody leaves (and looks dead) while a peer still times
  });
  r.elapsed_s = seconds_since(t0);
  for (const auto& e : errors) {
    if (!e) continue;
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& x) {
      r.error = x.what();
    }
    break;
  }
  if (r.error.empty()) r.error = wrong;
  r.ok = r.error.empty();
  if (r.ok && !latency_s.empty()) {
    r.latency_us = median(latency_s) * 1e6;
    const double n = r.group_ranks;
    const double t = median(large_s);
    if (t > 0) r.bus_bandwidth_gbps = 2.0 * (n - 1) / n * static_cast<double>(large_floats * sizeof(float)) / t / 1e9;
  }
  return r;
}

std::vector<Finding> comm_findings(const CommCheckResult& r, const CommCheckOptions& o, double timeout_s) {
  Finding f;
  const std::string layout = strfmt("%d %s rank(s) (tp=%d, pp=%d)", r.ranks, r.backend.c_str(), o.tp, o.pp);
  if (!r.ok) {
    f.severity = Severity::kError;
    f.title = "the communicator did not answer: " + layout;
    f.evidence.push_back(r.error);
    f.evidence.push_back(strfmt("the check gave up after %.2f s (timeout %.1f s)", r.elapsed_s, timeout_s));
    f.fixes = {
        "find the rank named above: its process exited, hangs, or never started (check its log and "
        "that mpirun started tp × pp processes)",
        "check that the hosts reach each other on the ports MPI / NCCL use (firewalls, "
        "NCCL_SOCKET_IFNAME)",
        "a rank that is merely slow to start: raise --comm-timeout"};
    return {f};
  }
  f.evidence.push_back(strfmt("all-reduce of 1 float: median %.1f us over %d runs", r.latency_us, o.iterations));
  f.evidence.push_back(strfmt("all-reduce of %s in groups of %d: bus bandwidth %.2f GB/s (2(n-1)/n x bytes / time)",
                              format_bytes(static_cast<double>(o.large_bytes)).c_str(), r.group_ranks,
                              r.bus_bandwidth_gbps));
  if (o.expected_bus_gbps && r.bus_bandwidth_gbps < *o.expected_bus_gbps) {
    f.severity = Severity::kWarning;
    f.title = strfmt("the all-reduce is slow: %.2f GB/s, expected at least %.2f GB/s for %s", r.bus_bandwidth_gbps,
                     *o.expected_bus_gbps, o.expected_why.c_str());
    f.fixes = {"check that the ranks are not oversubscribed (more ranks than free cores or GPUs)",
               "place each TP group on the fastest links (see --topology), and PP across the slow ones"};
    return {f};
  }
  f.severity = Severity::kInfo;
  f.title = strfmt("the communicator answers: %s, all-reduce latency %.1f us, bus bandwidth %.2f GB/s", layout.c_str(),
                   r.latency_us, r.bus_bandwidth_gbps);
  if (o.expected_bus_gbps)
    f.evidence.push_back(strfmt("expected at least %.2f GB/s for %s", *o.expected_bus_gbps, o.expected_why.c_str()));
  return {f};
}

}  // namespace parallm::doctor
