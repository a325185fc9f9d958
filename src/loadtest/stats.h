// Aggregation of one level's request records into the numbers the report
// prints. Definitions (docs/bench.md has the long form):
//  - latency statistics use successful requests only;
//  - percentiles interpolate linearly between order statistics (NumPy's
//    default): rank = p/100 * (n - 1);
//  - TPOT per request = (e2e - TTFT) / (output_tokens - 1), for >= 2 tokens;
//  - ITL pools every gap between text-bearing chunks of every request;
//  - goodput = share of all issued requests that succeeded and met both SLOs
//    (an SLO of 0 is no constraint).
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "loadtest/request_record.h"
#include "loadtest/stream_client.h"

namespace parallm::loadtest {

struct Summary {
  int64_t count = 0;
  double mean = 0, p50 = 0, p90 = 0, p95 = 0, p99 = 0;
};

struct Slo {
  double ttft_ms = 0;  // 0: none
  double tpot_ms = 0;  // 0: none
};

// One request as --save-detailed writes it, in issue order: times from the
// level's start; a missing value (no first token, fewer than 2 tokens, a
// failed request's latencies) is -1 and written as null.
struct RequestDetail {
  double start_s = 0;
  double ttft_ms = -1, tpot_ms = -1, e2e_ms = -1;
  int64_t input_tokens = 0, output_tokens = 0;
  ErrorKind error = ErrorKind::kNone;
};

struct LevelResult {
  int64_t concurrency = 0;                               // closed loop: streams in flight; open loop: cap (0: none)
  double rate = 0;                                       // requests/s; 0: closed loop ("inf")
  int64_t requests = 0;                                  // issued
  int64_t completed = 0;                                 // succeeded
  std::array<int64_t, kNumErrorKinds> errors{};          // by ErrorKind; [0] unused
  std::array<std::string, kNumErrorKinds> error_sample;  // first message of each kind
  int64_t input_tokens = 0;                              // successful requests; usage when sent, else our estimate
  int64_t output_tokens = 0;                             // successful requests; usage when sent, else counted
  int64_t output_tokens_counted = 0;                     // successful requests; text-bearing chunks seen
  int64_t usage_reported = 0;                            // successful requests whose stream carried `usage`
  double duration_s = 0;                                 // first request issued to last finished
  double requests_per_s = 0, input_tokens_per_s = 0, output_tokens_per_s = 0;
  // Aggregate decode rate: the streams in flight (time average of successful
  // requests) x their decode rate (tokens after the first per second after
  // the first). Unlike output_tokens_per_s it leaves out the time streams
  // spend queued or in prefill: what the server's decode steps deliver.
  double decode_tokens_per_s = 0;
  double goodput = 0;  // share in [0, 1]
  double goodput_requests_per_s = 0;
  Summary ttft_ms, tpot_ms, itl_ms, e2e_ms;
  // The client's own cost: CPU time of the event-loop thread.
  double client_cpu_s = 0;
  double client_cpu_us_per_token = 0;  // per text-bearing chunk received
  double client_cpu_share = 0;         // client_cpu_s / duration_s (1.0 = loop saturated)
  int64_t max_in_flight = 0;
  int64_t connections_opened = 0;
  // Sorted samples for the CDF charts.
  std::vector<double> ttft_samples, tpot_samples, itl_samples, e2e_samples;
  // --save-detailed: every request of the level, so runs can be pooled or
  // compared request by request (vLLM's benchmark has a flag of that name).
  std::vector<RequestDetail> detailed;

  int64_t failed() const { return requests - completed; }
};

// Linear-interpolation percentile of sorted values; p in [0, 100].
double percentile_sorted(const std::vector<double>& sorted, double p);
Summary summarize(std::vector<double>& values);  // sorts `values` in place

bool meets_slo(const RequestRecord& r, const Slo& slo);
LevelResult aggregate(const LevelRun& run, const Slo& slo, int64_t concurrency, double rate);
std::vector<RequestDetail> request_details(const LevelRun& run);

}  // namespace parallm::loadtest
