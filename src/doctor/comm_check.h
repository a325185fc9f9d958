// "A communicator that does not answer": a timed all-reduce across the ranks
// of a --tp × --pp layout, run through the same Communicator the engine uses
// (src/comm/). Every wait of a communicator has a deadline, so a rank that
// died or never joins ends the check with a CommError naming it within the
// timeout instead of a hang. What answers is measured: the median latency of
// a one-float all-reduce and the bus bandwidth of a large one, with
// nccl-tests' definition (busbw = 2 (n-1)/n × bytes / time), so numbers are
// comparable across group sizes.
#pragma once
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "doctor/finding.h"

namespace parallm::doctor {

struct CommCheckOptions {
  int tp = 1, pp = 1;
  size_t large_bytes = 16u << 20;  // the bandwidth all-reduce
  int iterations = 5;              // of each size; the median is reported
  // Bus bandwidth below which the check warns "slow" (GB/s); none: no verdict.
  std::optional<double> expected_bus_gbps;
  std::string expected_why;  // what the expectation is for ("threads sharing host memory")
};

struct CommCheckResult {
  std::string backend;  // "local", "mpi"
  int ranks = 0;        // tp × pp
  int group_ranks = 0;  // the all-reduce group measured: the TP group (the world when pp is 1 or tp is 1)
  bool ok = false;
  std::string error;              // the CommError (or wrong-sum) message when !ok
  double elapsed_s = 0;           // the whole check, failures included
  double latency_us = 0;          // median one-float all-reduce
  double bus_bandwidth_gbps = 0;  // median large all-reduce, 1e9 bytes/s
};

// Runs the check on `comms` (the communicators this process hosts, as
// make_communicators() returns them: all ranks for local, this rank for mpi),
// each on its own thread. The world all-reduce first (every rank must answer),
// then the timed ones in each TP group (ranks [g·tp, (g+1)·tp)). Each result
// is checked against the exact sum. Throws nothing for communicator failures:
// they come back as !ok.
CommCheckResult run_comm_check(const std::vector<std::unique_ptr<Communicator>>& comms, int world_ranks,
                               const CommCheckOptions& options);

// error "did not answer" with the CommError; warning "slow" under the
// expectation; info with the numbers otherwise.
std::vector<Finding> comm_findings(const CommCheckResult& result, const CommCheckOptions& options, double timeout_s);

}  // namespace parallm::doctor
