// The error every communicator throws when a collective cannot complete: a peer
// died, left, stalled past the timeout, or the transport failed. The message names
// the operation and the lost or late rank(s), e.g.
//   "all_reduce_sum on local rank 0 of 4: rank 2 did not arrive within 1.0 s".
// NOTE: deliberately not an InputError: it is not the user's input that is wrong,
// and the CLI should exit with a distinct non-zero status (not 2).
#pragma once
#include <stdexcept>
#include <string>

namespace parallm {

class CommError : public std::runtime_error {
 public:
  explicit CommError(const std::string& message) : std::runtime_error(message) {}
};

}  // namespace parallm
