// Two tiers of errors (STYLE.md principle 13).
//  - PARALLM_CHECK: a broken invariant inside parallm. Always on, prints file
//    and line and aborts: continuing would compute garbage.
//  - InputError: bad input from a user, a file or a client. Library code throws
//    it with an actionable one-line message; the CLI prints it and exits 2, the
//    server maps it to an OpenAI-style 4xx. Library code never calls exit().
// NOTE: an exception (not a Status return) carries InputError because parsers
// nest deeply and every level would otherwise re-test the same status; the
// boundary (CLI main, HTTP handler) is the only place that catches it.
#pragma once
#include <stdexcept>
#include <string>

namespace parallm {

class InputError : public std::runtime_error {
 public:
  explicit InputError(const std::string& message) : std::runtime_error(message) {}
};

// Thrown when a device memory budget is exceeded; the message names what was
// needed, what the device has, and what would fit.
class CapacityError : public InputError {
 public:
  explicit CapacityError(const std::string& message) : InputError(message) {}
};

[[noreturn]] void check_failed(const char* expr, const char* file, int line, const std::string& msg);

}  // namespace parallm

#define PARALLM_CHECK(cond)                                              \
  do {                                                                   \
    if (!(cond)) ::parallm::check_failed(#cond, __FILE__, __LINE__, ""); \
  } while (0)

#define PARALLM_CHECK_MSG(cond, msg)                                        \
  do {                                                                      \
    if (!(cond)) ::parallm::check_failed(#cond, __FILE__, __LINE__, (msg)); \
  } while (0)
