// What a shell command prints on stdout, for tests that compare parallm with
// an independent reference run as a separate program (node, python3).
#pragma once
#include <cstdio>
#include <memory>
#include <string>

namespace parallm::test {

// The command's stdout ("" when it cannot be started).
inline std::string command_output(const std::string& command) {
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(command.c_str(), "r"), pclose);
  if (!pipe) return {};
  std::string out;
  char buf[65536];
  for (size_t n; (n = fread(buf, 1, sizeof(buf), pipe.get())) > 0;) out.append(buf, n);
  return out;
}

}  // namespace parallm::test
