// libFuzzer target: `parallm simulate --trace` JSONL parsing (sim/trace.h).
// Any bytes must give requests that satisfy the schema or an InputError.
// FUZZ_SOURCES: src/sim/trace.cpp src/util/json_parse.cpp src/util/check.cpp src/util/log.cpp
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "sim/trace.h"
#include "util/check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const auto requests = parallm::sim::parse_trace(std::string(reinterpret_cast<const char*>(data), size), "fuzz");
    double last = 0;
    for (const auto& r : requests) {
      if (!(r.arrival_s >= last) || !std::isfinite(r.arrival_s) || r.input_tokens < 1 || r.output_tokens < 1 ||
          r.input_tokens > parallm::sim::kMaxTraceTokens || r.output_tokens > parallm::sim::kMaxTraceTokens)
        std::abort();  // the parser let through what its schema forbids
      last = r.arrival_s;
    }
  } catch (const parallm::InputError&) {
  }
  return 0;
}
