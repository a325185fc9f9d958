// Host and process metrics from Linux's text files. Every parser takes the
// file's contents as a string (tests feed saved /proc and /sys text); the
// collector only reads the files and keeps the previous CPU sample, so the
// CPU ratio covers the time between two scrapes.
//
// Sources (Documentation/filesystems/proc.rst, drivers/base/node.c):
//   /proc/stat                         aggregate "cpu" line, in USER_HZ ticks
//   /sys/devices/system/node/nodeN/meminfo  "Node N MemTotal: X kB" per node
//   /proc/meminfo                      the fallback as node 0 (no NUMA sysfs)
//   /proc/self/status VmRSS, /proc/self/stat utime+stime, /proc/self/fd
#pragma once
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace parallm::hwmetrics {

struct CpuTimes {
  uint64_t busy_ticks = 0;   // user nice system irq softirq steal
  uint64_t total_ticks = 0;  // busy + idle + iowait
};

// The aggregate "cpu " line of /proc/stat (guest time is already in user).
std::optional<CpuTimes> parse_proc_stat(std::string_view text);
// Busy share of all cores between two samples, in [0, 1]; nullopt when no
// tick passed (or the counters went backwards).
std::optional<double> cpu_utilization(const CpuTimes& before, const CpuTimes& after);

struct NodeMemory {
  int numa_node = 0;
  uint64_t total_bytes = 0;
  uint64_t used_bytes = 0;  // total - free: the kernel's "MemUsed", page cache included
};

// /sys/devices/system/node/node<N>/meminfo.
std::optional<NodeMemory> parse_node_meminfo(std::string_view text, int numa_node);
// /proc/meminfo, reported as node 0 with the same meaning (MemTotal - MemFree).
std::optional<NodeMemory> parse_proc_meminfo(std::string_view text);
// VmRSS of /proc/<pid>/status, in bytes.
std::optional<uint64_t> parse_status_rss_bytes(std::string_view text);
// utime + stime of /proc/<pid>/stat, in seconds.
std::optional<double> parse_stat_cpu_seconds(std::string_view text, long ticks_per_second);

struct HostSample {
  std::optional<double> cpu_utilization_ratio;
  std::vector<NodeMemory> memory;  // by numa_node, ascending
  std::optional<uint64_t> process_resident_bytes;
  std::optional<double> process_cpu_seconds;
  std::optional<int64_t> process_open_fds;
};

// Reads the files under `proc_root` and `sys_root` (tests point them at a
// folder of saved text). Thread-safe.
class HostCollector {
 public:
  explicit HostCollector(std::string proc_root = "/proc", std::string sys_root = "/sys");
  // The CPU ratio is over the time since the previous call; the first call
  // reports the average since boot.
  HostSample sample();

 private:
  std::string proc_root_, sys_root_;
  std::mutex mu_;
  CpuTimes prev_cpu_;
};

}  // namespace parallm::hwmetrics
