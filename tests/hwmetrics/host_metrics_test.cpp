// Host parsers against saved /proc and /sys text, and HostCollector over a
// saved tree (data/two_node: two NUMA nodes; data/one_node: no node sysfs).
#include "hwmetrics/host_metrics.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

namespace parallm::hwmetrics {
namespace {

std::string data(const std::string& rel) {
  std::ifstream f(std::string(HWMETRICS_DATA) + "/" + rel);
  EXPECT_TRUE(f.good()) << rel;
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

TEST(ProcStat, AggregateLine) {
  std::optional<CpuTimes> c = parse_proc_stat(data("two_node/proc/stat"));
  ASSERT_TRUE(c);
  // user 1000 nice 0 system 500 idle 8000 iowait 300 irq 0 softirq 100 steal 100
  EXPECT_EQ(c->busy_ticks, 1700u);
  EXPECT_EQ(c->total_ticks, 10000u);
}

TEST(ProcStat, OldKernelsWithFewerFieldsAndGarbage) {
  std::optional<CpuTimes> c = parse_proc_stat("cpu  10 0 10 80\ncpu0 10 0 10 80\n");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->busy_ticks, 20u);
  EXPECT_EQ(c->total_ticks, 100u);
  EXPECT_FALSE(parse_proc_stat("cpu0 1 2 3 4\n"));  // no aggregate line
  EXPECT_FALSE(parse_proc_stat("cpu  1 x 3 4\n"));
  EXPECT_FALSE(parse_proc_stat(""));
}

TEST(CpuUtilization, DeltaBetweenSamples) {
  EXPECT_DOUBLE_EQ(*cpu_utilization({100, 400}, {175, 500}), 0.75);
  EXPECT_DOUBLE_EQ(*cpu_utilization({}, {0, 10}), 0.0);
  EXPECT_FALSE(cpu_utilization({100, 400}, {100, 400}));  // no tick passed
  EXPECT_FALSE(cpu_utilization({100, 400}, {90, 500}));   // counters went back
}

TEST(NodeMeminfo, TwoNodes) {
  std::optional<NodeMemory> n0 = parse_node_meminfo(data("two_node/sys/devices/system/node/node0/meminfo"), 0);
  std::optional<NodeMemory> n1 = parse_node_meminfo(data("two_node/sys/devices/system/node/node1/meminfo"), 1);
  ASSERT_TRUE(n0 && n1);
  EXPECT_EQ(n0->total_bytes, 65536000ull * 1024);
  EXPECT_EQ(n0->used_bytes, 25536000ull * 1024);
  EXPECT_EQ(n1->numa_node, 1);
  EXPECT_EQ(n1->total_bytes, 66060288ull * 1024);
  EXPECT_EQ(n1->used_bytes, 6060288ull * 1024);
}

TEST(NodeMeminfo, WithoutMemUsedFallsBackToFree) {
  std::optional<NodeMemory> n = parse_node_meminfo("Node 3 MemTotal: 1000 kB\nNode 3 MemFree: 250 kB\n", 3);
  ASSERT_TRUE(n);
  EXPECT_EQ(n->used_bytes, 750u * 1024);
  EXPECT_FALSE(parse_node_meminfo("Node 3 MemFree: 250 kB\n", 3));
  EXPECT_FALSE(parse_node_meminfo("Node 3 MemTotal: lots kB\n", 3));
}

TEST(ProcMeminfo, SavedFromThisKindOfMachine) {
  std::optional<NodeMemory> m = parse_proc_meminfo(data("one_node/proc/meminfo"));
  ASSERT_TRUE(m);
  EXPECT_EQ(m->numa_node, 0);
  EXPECT_EQ(m->total_bytes, 24683656ull * 1024);
  EXPECT_EQ(m->used_bytes, (24683656ull - 20809616ull) * 1024);
  // "MemTotal" must not match "MemTotalX" or a later field's prefix.
  EXPECT_FALSE(parse_proc_meminfo("MemTotalX: 5 kB\nMemFree: 1 kB\n"));
}

TEST(ProcSelf, RssAndCpuSeconds) {
  EXPECT_EQ(*parse_status_rss_bytes(data("two_node/proc/self/status")), 204800ull * 1024);
  EXPECT_FALSE(parse_status_rss_bytes("Name:\tkthreadd\nState:\tS\n"));  // kernel threads have no VmRSS
  // comm "parallm (w) x" holds spaces and ')': utime 250 + stime 150 ticks.
  EXPECT_DOUBLE_EQ(*parse_stat_cpu_seconds(data("two_node/proc/self/stat"), 100), 4.0);
  EXPECT_FALSE(parse_stat_cpu_seconds("4242 (x) S 1 2", 100));
  EXPECT_FALSE(parse_stat_cpu_seconds("garbage", 100));
}

TEST(HostCollector, SavedTwoNodeTree) {
  HostCollector c(std::string(HWMETRICS_DATA) + "/two_node/proc", std::string(HWMETRICS_DATA) + "/two_node/sys");
  HostSample s = c.sample();
  ASSERT_TRUE(s.cpu_utilization_ratio);  // first sample: the average since boot
  EXPECT_DOUBLE_EQ(*s.cpu_utilization_ratio, 0.17);
  ASSERT_EQ(s.memory.size(), 2u);
  EXPECT_EQ(s.memory[0].numa_node, 0);
  EXPECT_EQ(s.memory[1].numa_node, 1);
  EXPECT_EQ(*s.process_resident_bytes, 204800ull * 1024);
  EXPECT_TRUE(s.process_cpu_seconds);
  EXPECT_EQ(*s.process_open_fds, 3);
  // The same /proc/stat again: no tick passed, so no ratio this time.
  EXPECT_FALSE(c.sample().cpu_utilization_ratio);
}

TEST(HostCollector, NoNumaSysfsFallsBackToProcMeminfo) {
  HostCollector c(std::string(HWMETRICS_DATA) + "/one_node/proc", std::string(HWMETRICS_DATA) + "/missing");
  HostSample s = c.sample();
  ASSERT_EQ(s.memory.size(), 1u);
  EXPECT_EQ(s.memory[0].numa_node, 0);
  EXPECT_EQ(s.memory[0].total_bytes, 24683656ull * 1024);
  EXPECT_FALSE(s.process_resident_bytes);  // no self/ in the saved tree
  EXPECT_FALSE(s.process_open_fds);
}

TEST(HostCollector, LiveMachineIsSane) {
  HostCollector c;
  HostSample s = c.sample();
  ASSERT_TRUE(s.cpu_utilization_ratio);
  EXPECT_GE(*s.cpu_utilization_ratio, 0.0);
  EXPECT_LE(*s.cpu_utilization_ratio, 1.0);
  ASSERT_FALSE(s.memory.empty());
  for (const NodeMemory& m : s.memory) {
    EXPECT_GT(m.total_bytes, 0u);
    EXPECT_LE(m.used_bytes, m.total_bytes);
  }
  EXPECT_GT(*s.process_resident_bytes, 0u);
  EXPECT_GE(*s.process_open_fds, 3);
}

}  // namespace
}  // namespace parallm::hwmetrics
