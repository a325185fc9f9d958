#include "server/access_log.h"

#include "util/log.h"

namespace parallm {

void log_access(const net::HttpRequest& request, const AccessRecord& r) {
  const bool probe = request.path == "/health" || request.path == "/metrics";
  const LogLevel level = probe ? LogLevel::kDebug : LogLevel::kInfo;
  if (static_cast<int>(level) > static_cast<int>(log_level())) return;
  std::string line = strfmt("%s \"%s %s\" %d %.3f s", request.remote_addr.c_str(), request.method.c_str(),
                            request.path.c_str(), r.status, r.seconds);
  if (r.prompt_tokens >= 0) {
    line += strfmt(" prompt_tokens=%lld completion_tokens=%lld", (long long)r.prompt_tokens,
                   (long long)r.completion_tokens);
  }
  if (!r.prompt.empty()) {
    constexpr size_t kMaxLogged = 300;
    line += " prompt=" + (r.prompt.size() > kMaxLogged ? r.prompt.substr(0, kMaxLogged) + "..." : r.prompt);
  }
  log_message(level, line);
}

}  // namespace parallm
