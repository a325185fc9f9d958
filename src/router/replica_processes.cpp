// ReplicaProcesses (see replica_processes.h).
#include "router/replica_processes.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>

#include "util/check.h"
#include "util/log.h"

extern char** environ;

namespace parallm {

namespace {

std::string describe_exit(int status) {
  if (WIFSIGNALED(status)) return strfmt("killed by signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
  return strfmt("exited with status %d", WEXITSTATUS(status));
}

// Copies one child's stderr to ours, a line at a time, each line prefixed.
void copy_lines(int fd, std::string prefix) {
  std::string pending;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    pending.append(buf, static_cast<size_t>(n));
    size_t nl;
    while ((nl = pending.find('\n')) != std::string::npos) {
      const std::string line = prefix + pending.substr(0, nl + 1);
      std::fwrite(line.data(), 1, line.size(), stderr);
      pending.erase(0, nl + 1);
    }
    std::fflush(stderr);
  }
  if (!pending.empty()) std::fprintf(stderr, "%s%s\n", prefix.c_str(), pending.c_str());
  ::close(fd);
}

}  // namespace

ReplicaProcesses::ReplicaProcesses(std::vector<ReplicaProcessSpec> specs, double restart_backoff_s)
    : restart_backoff_s_(restart_backoff_s) {
  for (auto& s : specs) {
    PARALLM_CHECK(!s.argv.empty());
    Child c;
    c.spec = std::move(s);
    children_.push_back(std::move(c));
  }
}

ReplicaProcesses::~ReplicaProcesses() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    for (Child& c : children_) {
      if (c.pid <= 0) continue;
      ::kill(c.pid, SIGKILL);
      ::waitpid(c.pid, nullptr, 0);
      c.pid = 0;
    }
  }
  for (auto& t : readers_)
    if (t.joinable()) t.join();
}

void ReplicaProcesses::start_all() {
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t i = 0; i < children_.size(); ++i) spawn(i);
}

void ReplicaProcesses::spawn(size_t i) {
  Child& c = children_[i];
  // Everything execve needs, built before fork.
  std::map<std::string, std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const char* eq = std::strchr(*e, '=');
    if (eq != nullptr) env[std::string(*e, static_cast<size_t>(eq - *e))] = eq + 1;
  }
  for (const auto& [k, v] : c.spec.env) env[k] = v;
  std::vector<std::string> env_strings;
  for (const auto& [k, v] : env) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp, argv;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  for (auto& s : c.spec.argv) argv.push_back(s.data());
  argv.push_back(nullptr);
  int pipe_fds[2];
  PARALLM_CHECK(::pipe2(pipe_fds, O_CLOEXEC) == 0);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  PARALLM_CHECK(pid >= 0);
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);  // the parent died before prctl
    ::dup2(pipe_fds[1], STDERR_FILENO);       // dup2 clears O_CLOEXEC on the copy
    ::execve(argv[0], argv.data(), envp.data());
    static const char kMsg[] = "parallm: error: cannot run the replica's executable\n";
    (void)!::write(pipe_fds[1], kMsg, sizeof(kMsg) - 1);
    ::_exit(127);
  }
  ::close(pipe_fds[1]);
  c.pid = pid;
  c.started = std::chrono::steady_clock::now();
  c.waiting_restart = false;
  readers_.emplace_back(copy_lines, pipe_fds[0], strfmt("[replica %zu] ", i));
  log_info(strfmt("replica %zu: pid %d, started", i, static_cast<int>(pid)));
}

void ReplicaProcesses::poll() {
  std::lock_guard<std::mutex> lock(mu_);
  const auto now = std::chrono::steady_clock::now();
  for (size_t i = 0; i < children_.size(); ++i) {
    Child& c = children_[i];
    if (c.pid > 0) {
      int status = 0;
      const pid_t r = ::waitpid(c.pid, &status, WNOHANG);
      if (r != c.pid) continue;
      const int old = static_cast<int>(c.pid);
      c.pid = 0;
      c.exited = now;
      if (stopping_) {
        log_info(strfmt("replica %zu: pid %d %s", i, old, describe_exit(status).c_str()));
        continue;
      }
      log_warn(strfmt("replica %zu: pid %d %s; restarting it", i, old, describe_exit(status).c_str()));
      c.waiting_restart = true;
    }
    if (c.waiting_restart && !stopping_ &&
        std::chrono::duration<double>(now - c.started).count() >= restart_backoff_s_) {
      ++c.restarts;
      spawn(i);
    }
  }
}

void ReplicaProcesses::signal_all(int sig) {
  std::lock_guard<std::mutex> lock(mu_);
  if (sig == SIGTERM || sig == SIGINT) stopping_ = true;
  for (const Child& c : children_)
    if (c.pid > 0) ::kill(c.pid, sig);
}

bool ReplicaProcesses::all_exited() const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const Child& c : children_)
    if (c.pid > 0 || (c.waiting_restart && !stopping_)) return false;
  return true;
}

pid_t ReplicaProcesses::pid(int i) const {
  std::lock_guard<std::mutex> lock(mu_);
  return children_.at(static_cast<size_t>(i)).pid;
}

int ReplicaProcesses::restarts(int i) const {
  std::lock_guard<std::mutex> lock(mu_);
  return children_.at(static_cast<size_t>(i)).restarts;
}

std::vector<std::string> replica_serve_args(const std::vector<std::string>& serve_args, int port,
                                            const std::string& devices) {
  static const char* const kValued[] = {"--dp", "--data-parallel-size", "--host", "--port", "--devices"};
  std::vector<std::string> out;
  for (size_t i = 0; i < serve_args.size(); ++i) {
    const std::string& a = serve_args[i];
    if (a == "--dp-processes") continue;
    bool dropped = false;
    for (const char* opt : kValued) {
      const std::string o = opt;
      if (a == o) {
        ++i;  // and its value
        dropped = true;
      } else if (a.rfind(o + "=", 0) == 0) {
        dropped = true;
      }
      if (dropped) break;
    }
    if (!dropped) out.push_back(a);
  }
  out.insert(out.end(), {"--host", "127.0.0.1", "--port", std::to_string(port)});
  if (!devices.empty()) out.insert(out.end(), {"--devices", devices});
  return out;
}

int pick_free_loopback_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  PARALLM_CHECK(fd >= 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof(a);
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0;
  ::close(fd);
  if (!ok) throw InputError("cannot find a free loopback port for a --dp replica");
  return ntohs(a.sin_port);
}

}  // namespace parallm
