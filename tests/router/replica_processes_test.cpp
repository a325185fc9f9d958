// ReplicaProcesses over /bin/sh children: a child killed with SIGKILL is
// restarted (a new pid), SIGTERM stops every child and nothing restarts
// after it; and the replica command line drops exactly the parent's
// --dp / --host / --port / --devices / --dp-processes.
#include "router/replica_processes.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <functional>
#include <thread>

namespace parallm {
namespace {

bool wait_for(const std::function<bool()>& cond, ReplicaProcesses& p, double seconds = 10) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < until) {
    p.poll();
    if (cond()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return cond();
}

TEST(ReplicaProcesses, RestartsAKilledChildAndStopsOnSigterm) {
  std::vector<ReplicaProcessSpec> specs(2);
  for (auto& s : specs) s.argv = {"/bin/sh", "-c", "echo started >&2; exec sleep 60"};
  ReplicaProcesses p(std::move(specs), 0.2);
  p.start_all();
  const pid_t first = p.pid(0), other = p.pid(1);
  ASSERT_GT(first, 0);
  ASSERT_GT(other, 0);
  ASSERT_EQ(::kill(first, SIGKILL), 0);
  ASSERT_TRUE(wait_for([&] { return p.restarts(0) == 1 && p.pid(0) > 0; }, p)) << "not restarted";
  EXPECT_NE(p.pid(0), first);
  EXPECT_EQ(p.pid(1), other);  // the other replica was left alone
  EXPECT_EQ(p.restarts(1), 0);
  p.signal_all(SIGTERM);
  ASSERT_TRUE(wait_for([&] { return p.all_exited(); }, p));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // past the backoff: still nothing restarts
  p.poll();
  EXPECT_TRUE(p.all_exited());
  EXPECT_EQ(p.restarts(0), 1);
}

TEST(ReplicaProcesses, ReplicaArguments) {
  const std::vector<std::string> parent = {"--model",
                                           "m.gguf",
                                           "--dp",
                                           "2",
                                           "--port=9000",
                                           "--host",
                                           "0.0.0.0",
                                           "--dp-processes",
                                           "--threads",
                                           "1",
                                           "--data-parallel-size=2",
                                           "--devices",
                                           "cpu:0,cpu:1",
                                           "--api-key",
                                           "k"};
  const std::vector<std::string> want = {"--model", "m.gguf",    "--threads", "1",     "--api-key", "k",
                                         "--host",  "127.0.0.1", "--port",    "41000", "--devices", "cpu:1"};
  EXPECT_EQ(replica_serve_args(parent, 41000, "cpu:1"), want);
  const auto no_devices = replica_serve_args({"--model", "m"}, 5, "");
  EXPECT_EQ(no_devices, (std::vector<std::string>{"--model", "m", "--host", "127.0.0.1", "--port", "5"}));
  const int port = pick_free_loopback_port();
  EXPECT_GT(port, 0);
  EXPECT_LT(port, 65536);
}

}  // namespace
}  // namespace parallm
