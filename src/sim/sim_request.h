// One request the simulator issues: when it arrives and how many tokens it
// carries. Plain data shared by the trace reader, the load generators and
// the fleet loop.
#pragma once
#include <cstdint>

namespace parallm::sim {

struct SimRequest {
  double arrival_s = 0;       // seconds from the start of the run
  int64_t input_tokens = 1;   // prompt tokens
  int64_t output_tokens = 1;  // tokens generated (max_tokens with ignore_eos)
};

}  // namespace parallm::sim
