// What a shell command prints on stdout, for tests that compare parallm with
// an independent reference run as a separate program (node, python3).
#pragma once
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
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

struct CommandResult {
  int code = -1;  // exit status; -1 when it could not run or was killed
  std::string out, err;
};

// Runs `command` through the shell and keeps its exit status, stdout and
// stderr. stderr goes through a file of this process's own (ctest runs tests
// as parallel processes).
inline CommandResult run_command(const std::string& command) {
  const std::string err_path =
      std::filesystem::temp_directory_path() / ("parallm_test_stderr." + std::to_string(::getpid()) + ".txt");
  CommandResult r;
  FILE* p = popen((command + " 2>" + err_path).c_str(), "r");
  if (p == nullptr) return r;
  char buf[65536];
  for (size_t n; (n = fread(buf, 1, sizeof(buf), p)) > 0;) r.out.append(buf, n);
  const int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream e(err_path);
  std::ostringstream text;
  text << e.rdbuf();
  r.err = text.str();
  std::filesystem::remove(err_path);
  return r;
}

}  // namespace parallm::test
