// One line per request in the server's log: client, method, route, status,
// tokens (completions) and latency. Never the prompt's text unless the
// operator asked for it (--log-prompts): prompts are users' data.
// Probes and scrapes (/health, /metrics) are logged at debug level only.
#pragma once
#include <cstdint>
#include <string>

#include "net/http_message.h"

namespace parallm {

struct AccessRecord {
  int status = 0;
  double seconds = 0;
  int64_t prompt_tokens = -1, completion_tokens = -1;  // -1: not a completion
  std::string prompt;                                  // with --log-prompts only (cut to a few hundred bytes)
};

void log_access(const net::HttpRequest& request, const AccessRecord& record);

}  // namespace parallm
