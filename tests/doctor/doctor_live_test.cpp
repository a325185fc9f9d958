// doctor's two live checks: other processes' device memory through NVML
// (against the stand-in libnvidia-ml of tests/hwmetrics/fake_nvml.cpp, whose
// readings are restated here from its header comment), and the timed
// all-reduce over the local communicator, including a rank that never joins
// and one that died.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>

#include "comm/local_comm.h"
#include "doctor/comm_check.h"
#include "doctor/process_findings.h"
#include "hwmetrics/nvml_metrics.h"

namespace parallm::doctor {
namespace {

bool has(const std::vector<std::string>& v, const std::string& needle) {
  for (const auto& s : v)
    if (s.find(needle) != std::string::npos) return true;
  return false;
}

TEST(DoctorProcesses, FakeNvmlNamesEachHolderAndTheCap) {
  hwmetrics::NvmlReader nvml(FAKE_NVML);
  ASSERT_TRUE(nvml.available()) << nvml.status();
  const auto f = process_findings(nvml.sample(), nvml.processes());
  ASSERT_EQ(f.size(), 2u);  // both GPUs have another process
  EXPECT_EQ(f[0].severity, Severity::kWarning);
  EXPECT_NE(f[0].title.find("GPU 0"), std::string::npos) << f[0].title;
  EXPECT_NE(f[0].title.find("2 other processes hold 8.00 GiB"), std::string::npos) << f[0].title;
  EXPECT_TRUE(has(f[0].evidence, "pid 4242 (python3, compute): 6.00 GiB"));
  EXPECT_TRUE(has(f[0].evidence, "pid 4343 (blender, compute+graphics): 2.00 GiB"));
  // 10 GiB used, 8 GiB listed: 2 GiB nobody accounts for.
  EXPECT_TRUE(has(f[0].evidence, "2.00 GiB in use that no listed process accounts for"));
  EXPECT_NE(f[0].fixes[0].find("kill 4242 4343"), std::string::npos) << f[0].fixes[0];
  // The cap: the free share (70 of 80 GiB) less a context margin, rounded down.
  const double cap = std::floor((70.0 / 80.0 - 0.02) * 100) / 100;
  char want[32];
  std::snprintf(want, sizeof(want), "at most %.2f", cap);
  ASSERT_GE(f[0].fixes.size(), 2u);
  EXPECT_NE(f[0].fixes[1].find(want), std::string::npos) << f[0].fixes[1];
  EXPECT_NE(f[0].fixes[1].find("--gpu-memory-utilization"), std::string::npos);
  EXPECT_NE(f[1].title.find("GPU 1"), std::string::npos);
  EXPECT_NE(f[1].title.find("1 other process holds an unreported amount of device memory"), std::string::npos)
      << f[1].title;
  EXPECT_TRUE(has(f[1].evidence, "pid 5151 (compute): amount not reported"));
}

TEST(DoctorProcesses, NoOtherProcessIsInfo) {
  hwmetrics::GpuSample g;
  g.index = 0;
  g.memory_used_bytes = 300ull << 20;  // a context's worth, under the unaccounted threshold
  g.memory_total_bytes = 24ull << 30;
  const auto f = process_findings({g}, {});
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].severity, Severity::kInfo);
  EXPECT_TRUE(has(f[0].evidence, "GPU 0: 300.00 MiB used"));
  // Memory in use with no process listed (another container) is still named.
  g.memory_used_bytes = 6ull << 30;
  const auto hidden = process_findings({g}, {});
  ASSERT_EQ(hidden.size(), 1u);
  EXPECT_EQ(hidden[0].severity, Severity::kWarning);
  EXPECT_NE(hidden[0].title.find("does not list"), std::string::npos) << hidden[0].title;
}

TEST(DoctorProcesses, NvmlAbsent) {
  hwmetrics::NvmlReader nvml("/nonexistent/libnvidia-ml.so.1");
  ASSERT_FALSE(nvml.available());
  const Finding f = nvml_unavailable(nvml.status());
  EXPECT_EQ(f.title, "NVML not available: cannot list other processes");
  EXPECT_TRUE(has(f.evidence, "not found"));
}

double since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

TEST(DoctorComm, AllRanksAnswer) {
  for (auto [tp, pp] : {std::pair{4, 1}, std::pair{2, 2}}) {
    LocalWorld world(tp * pp, 20.0);
    auto comms = world.take_all();
    CommCheckOptions o;
    o.tp = tp;
    o.pp = pp;
    o.large_bytes = 1u << 20;
    const CommCheckResult r = run_comm_check(comms, tp * pp, o);
    ASSERT_TRUE(r.ok) << r.error;
    EXPECT_EQ(r.group_ranks, tp);
    EXPECT_GT(r.latency_us, 0);
    EXPECT_GT(r.bus_bandwidth_gbps, 0);
    const auto f = comm_findings(r, o, 20.0);
    ASSERT_EQ(f.size(), 1u);
    EXPECT_EQ(f[0].severity, Severity::kInfo);
    EXPECT_NE(f[0].title.find("the communicator answers"), std::string::npos) << f[0].title;
    // A bar it cannot reach turns the same numbers into a "slow" warning.
    o.expected_bus_gbps = r.bus_bandwidth_gbps * 2 + 1;
    o.expected_why = "a test's bar";
    EXPECT_EQ(comm_findings(r, o, 20.0)[0].severity, Severity::kWarning);
  }
}

TEST(DoctorComm, RankThatNeverJoinsIsATimeoutNotAHang) {
  const double timeout_s = 1.0;
  LocalWorld world(4, timeout_s);
  auto comms = world.take_all();
  std::unique_ptr<Communicator> silent = std::move(comms[2]);  // alive, never calls
  comms.erase(comms.begin() + 2);
  CommCheckOptions o;
  o.tp = 4;
  const auto t0 = std::chrono::steady_clock::now();
  const CommCheckResult r = run_comm_check(comms, 4, o);
  const double took = since(t0);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("rank 2"), std::string::npos) << r.error;
  EXPECT_GE(took, timeout_s * 0.9);
  EXPECT_LT(took, timeout_s + 3.0);  // the deadline plus scheduling slack on a busy machine
  const auto f = comm_findings(r, o, timeout_s);
  EXPECT_EQ(f[0].severity, Severity::kError);
  EXPECT_NE(f[0].title.find("did not answer"), std::string::npos);
  EXPECT_TRUE(has(f[0].evidence, "rank 2"));
}

TEST(DoctorComm, DeadRankFailsFast) {
  LocalWorld world(3, 30.0);
  auto comms = world.take_all();
  comms[1].reset();  // gone: its peers are told at once, not after 30 s
  comms.erase(comms.begin() + 1);
  const auto t0 = std::chrono::steady_clock::now();
  const CommCheckResult r = run_comm_check(comms, 3, CommCheckOptions{});
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("rank 1"), std::string::npos) << r.error;
  EXPECT_LT(since(t0), 10.0);
}

}  // namespace
}  // namespace parallm::doctor
