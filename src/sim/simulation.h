// One `parallm simulate` run from planner inputs to bench's report: the
// replica model of the layout (replica_model.h), the step cost with the serve
// loop's overheads (step_cost.h), the fleet loop (fleet.h), and the records
// aggregated by loadtest::aggregate(), the code that makes bench's numbers.
#pragma once
#include <optional>
#include <string>

#include "loadtest/bench_runner.h"
#include "planner/plan.h"
#include "sim/fleet.h"

namespace parallm::sim {

struct SimulationSpec {
  planner::PlanRequest request;  // model, weights, device, fabric, constants, memory options
  planner::Layout layout{1, 1, 1, 1};
  SimLoad load;
  loadtest::Slo slo;
  int64_t max_num_seqs = 256;  // per replica, as `parallm serve`
  int64_t max_num_batched_tokens = 2048;
  int64_t max_model_len = 0;  // 0: the longest request of the load (or the trace)
  int64_t block_size = 16;
  int http_threads = 4;          // front-end threads per replica, as serve's --http-threads
  double client_send_s = 50e-6;  // closed loop: FleetOptions::client_send_s
  RoutePolicy policy = RoutePolicy::kLeastOutstandingTokens;
  // --request-overhead-ms: the front end's time per request; -1: a profile's
  // measurement, else the planner's constant.
  double request_overhead_ms = -1;
  // simulate --local on a profiled model file: its measured step times and
  // jitter replace the perf model's (planner/model_profile.h).
  std::optional<planner::ModelProfile> profile;
  bool save_detailed = false;  // keep every request in the report (bench's --save-detailed)
};

struct SimulationResult {
  loadtest::BenchReport report;  // one level, bench's statistics
  FleetResult fleet;             // records moved into report; counters stay
  ServeOverheads overheads;
  int64_t n_kv_blocks = 0;  // per replica
  int64_t max_model_len = 0;
  double wall_s = 0;  // the simulator's own run time
};

// Throws InputError for inputs no replica can run (layout, load, memory).
SimulationResult run_simulation(const SimulationSpec& spec);

// The serve loop's overheads for a device: per request the planner's
// request_overhead_ms; on the CPU engine, sampling priced by cpu_sample_row_s.
// run_simulation replaces the per-step and per-row terms with a model
// profile's serving terms, which were measured with the sampling in them,
// and the per-request term with its front-end time (or the spec's own).
ServeOverheads serve_overheads(const planner::PerfInputs& in);

// Bench's JSON schema with "tool": "parallm simulate" and one more object,
// "simulation" (layout, router, preemptions, steps, KV blocks, wall time).
std::string simulation_json(const SimulationSpec& spec, const SimulationResult& r);
// Bench's table, under a header naming the simulated deployment.
void write_simulation_text(const SimulationSpec& spec, const SimulationResult& r, std::ostream& out);

}  // namespace parallm::sim
