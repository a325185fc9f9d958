#include "util/check.h"

#include <cstdio>
#include <cstdlib>

namespace parallm {

void check_failed(const char* expr, const char* file, int line, const std::string& msg) {
  std::fprintf(stderr, "parallm: internal check failed: %s at %s:%d%s%s\n", expr, file, line, msg.empty() ? "" : ": ",
               msg.c_str());
  std::fflush(stderr);
  std::abort();
}

}  // namespace parallm
