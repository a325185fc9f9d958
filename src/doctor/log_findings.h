// Start-up log recognisers: out-of-memory at start as vLLM, SGLang and parallm
// print it. Each finding carries the numbers taken from the log and the fixes
// in the troubleshooting order: real load precision and weight size first,
// then max-model-len, then the memory-utilization cap, then concurrency, and
// only then more TP or a larger device.
#pragma once
#include <string>
#include <vector>

#include "doctor/finding.h"

namespace parallm::doctor {

// Findings for one log text; empty when nothing is recognised.
std::vector<Finding> log_findings(const std::string& log);

}  // namespace parallm::doctor
