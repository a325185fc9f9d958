// Minimal leveled logging to stderr. stdout belongs to command output
// (completions, JSON), so every diagnostic goes to stderr.
#pragma once
#include <string>

namespace parallm {

enum class LogLevel { kError = 0, kWarn = 1, kInfo = 2, kDebug = 3 };

void set_log_level(LogLevel level);
LogLevel log_level();
// "error" | "warn" | "warning" | "info" | "debug"; throws InputError otherwise.
LogLevel parse_log_level(const std::string& name);
// Prefix each line with the wall-clock time (the server's log; CLI tools keep
// bare lines): "[parallm info] 12-02 00:45:01.123 message".
void set_log_timestamps(bool on);
void log_message(LogLevel level, const std::string& message);

inline void log_info(const std::string& m) { log_message(LogLevel::kInfo, m); }
inline void log_warn(const std::string& m) { log_message(LogLevel::kWarn, m); }
inline void log_debug(const std::string& m) { log_message(LogLevel::kDebug, m); }

// printf-style formatting into a std::string.
std::string strfmt(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

// "1.23 GiB" style human-readable byte counts.
std::string format_bytes(double bytes);

}  // namespace parallm
