// Request traces for `parallm simulate --trace FILE.jsonl`: one JSON object
// per line (docs/simulate.md),
//   {"arrival_s": 0.25, "input_tokens": 812, "output_tokens": 128}
// arrival_s: seconds from the start (>= 0, finite); the two counts: integers
// >= 1. Other keys are ignored (traces may carry ids or text); blank lines are
// skipped. Lines need not be sorted: requests are replayed in arrival order,
// ties in line order. Every bad line is an InputError naming the origin, the
// line number and what is wrong with it.
#pragma once
#include <string>
#include <vector>

#include "sim/sim_request.h"

namespace parallm::sim {

constexpr int64_t kMaxTraceTokens = 100000000;  // per count: beyond any context window
constexpr double kMaxTraceArrivalS = 1e9;       // ~30 years

// Parses trace text; `origin` (the file name) prefixes messages.
std::vector<SimRequest> parse_trace(const std::string& text, const std::string& origin);
std::vector<SimRequest> load_trace(const std::string& path);

}  // namespace parallm::sim
