// One `parallm bench` invocation from frozen options to a report: resolve and
// probe the server (unreachable is bad input, exit 2), find the model name if
// none was given (GET /v1/models, the standard listing), then run each level
// or the capacity search. Progress goes to `progress` (stderr in the CLI).
#pragma once
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "loadtest/bench_options.h"
#include "loadtest/capacity.h"
#include "loadtest/stats.h"

namespace parallm::loadtest {

struct BenchReport {
  BenchOptions options;
  std::string model;                       // sent in requests ("" if the server named none)
  std::string request_path;                // e.g. /v1/chat/completions
  std::vector<LevelResult> results;        // one per level run, in order
  std::optional<CapacityResult> capacity;  // --find-capacity
};

BenchReport run_bench(const BenchOptions& options, std::ostream* progress);

// Writers; each throws InputError when the output file cannot be written.
void write_text_report(const BenchReport& report, std::ostream& out);
std::string json_report(const BenchReport& report);  // pretty-printed JSON text
std::string html_report(const BenchReport& report);  // self-contained HTML page

}  // namespace parallm::loadtest
