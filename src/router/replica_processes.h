// ReplicaProcesses: the child processes of `parallm serve --dp N
// --dp-processes`, one `parallm serve` per replica on a private port, so that
// one replica's crash leaves the others serving. It starts them, prefixes
// each line they write to stderr with "[replica i] ", restarts one that exits
// while not stopping (at most once per restart_backoff_s, so a replica that
// cannot start does not spin), and forwards signals for the drain. The
// router in front (http_router.h) ejects a dead replica through its health
// checks and re-admits the restarted one.
//
// NOTE: fork + execve with an environment built before the fork (nothing
// after the fork but async-signal-safe calls, as POSIX requires of a
// multithreaded parent). Children get PR_SET_PDEATHSIG(SIGKILL): if the parent
// dies without draining them, they do not linger holding ports and memory.
#pragma once
#include <sys/types.h>

#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace parallm {

struct ReplicaProcessSpec {
  std::vector<std::string> argv;                         // argv[0]: the executable's path
  std::vector<std::pair<std::string, std::string>> env;  // set over the parent's environment
};

class ReplicaProcesses {
 public:
  explicit ReplicaProcesses(std::vector<ReplicaProcessSpec> specs, double restart_backoff_s = 1.0);
  ~ReplicaProcesses();  // SIGKILLs and reaps any child still running
  ReplicaProcesses(const ReplicaProcesses&) = delete;
  ReplicaProcesses& operator=(const ReplicaProcesses&) = delete;

  void start_all();
  // Reaps children that exited; restarts them unless stopping. Call it often
  // (the serve loop does, every ~20 ms).
  void poll();
  // Sends `sig` to every running child; after SIGTERM/SIGINT nothing restarts.
  void signal_all(int sig);
  bool all_exited() const;

  int size() const { return static_cast<int>(children_.size()); }
  pid_t pid(int i) const;     // 0 while not running
  int restarts(int i) const;  // times replica i was started again after exiting

 private:
  struct Child {
    ReplicaProcessSpec spec;
    pid_t pid = 0;
    int restarts = 0;
    std::chrono::steady_clock::time_point started, exited;
    bool waiting_restart = false;
  };
  void spawn(size_t i);

  mutable std::mutex mu_;
  std::vector<Child> children_;
  std::vector<std::thread> readers_;  // one per spawn: copies a child's stderr with its prefix
  double restart_backoff_s_;
  bool stopping_ = false;
};

// The command line of replica `port`'s child from the parent's own `serve`
// arguments (everything after "serve"): --dp / --data-parallel-size,
// --dp-processes, --host, --port and --devices are dropped (with their
// values, `--opt value` or `--opt=value`), then `--host 127.0.0.1 --port P`
// (and `--devices D` when not empty) are appended.
std::vector<std::string> replica_serve_args(const std::vector<std::string>& serve_args, int port,
                                            const std::string& devices);

// A TCP port on 127.0.0.1 that nothing listens on now (bound, then closed).
int pick_free_loopback_port();

}  // namespace parallm
