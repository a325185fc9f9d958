#include "util/log.h"

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <ctime>
#include <mutex>

#include "util/check.h"

namespace parallm {

namespace {
std::atomic<int> g_level{static_cast<int>(LogLevel::kInfo)};
std::atomic<bool> g_timestamps{false};
std::mutex g_mutex;
}  // namespace

void set_log_level(LogLevel level) { g_level = static_cast<int>(level); }
void set_log_timestamps(bool on) { g_timestamps = on; }

LogLevel parse_log_level(const std::string& name) {
  if (name == "error") return LogLevel::kError;
  if (name == "warn" || name == "warning") return LogLevel::kWarn;
  if (name == "info") return LogLevel::kInfo;
  if (name == "debug") return LogLevel::kDebug;
  throw InputError("--log-level must be error, warn, info or debug, not '" + name + "'");
}
LogLevel log_level() { return static_cast<LogLevel>(g_level.load()); }

void log_message(LogLevel level, const std::string& message) {
  if (static_cast<int>(level) > g_level.load()) return;
  static const char* const kNames[] = {"error", "warn", "info", "debug"};
  char stamp[64] = "";
  if (g_timestamps) {
    timespec ts{};
    clock_gettime(CLOCK_REALTIME, &ts);
    tm t{};
    localtime_r(&ts.tv_sec, &t);
    std::snprintf(stamp, sizeof(stamp), " %02d-%02d %02d:%02d:%02d.%03d", t.tm_mon + 1, t.tm_mday, t.tm_hour, t.tm_min,
                  t.tm_sec, static_cast<int>(ts.tv_nsec / 1000000));
  }
  std::lock_guard<std::mutex> lock(g_mutex);
  std::fprintf(stderr, "[parallm %s]%s %s\n", kNames[static_cast<int>(level)], stamp, message.c_str());
}

std::string strfmt(const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  va_list copy;
  va_copy(copy, args);
  int n = std::vsnprintf(nullptr, 0, fmt, copy);
  va_end(copy);
  std::string out(n > 0 ? static_cast<size_t>(n) : 0, '\0');
  if (n > 0) std::vsnprintf(out.data(), out.size() + 1, fmt, args);
  va_end(args);
  return out;
}

std::string format_bytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024.0 && u < 4) {
    bytes /= 1024.0;
    ++u;
  }
  return u == 0 ? strfmt("%.0f B", bytes) : strfmt("%.2f %s", bytes, units[u]);
}

}  // namespace parallm
