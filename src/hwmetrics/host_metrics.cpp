// Parsers of /proc and /sys text, and the collector that reads them (see
// host_metrics.h). Parsers never throw: a malformed or missing field yields
// nullopt and the metric is left out of that scrape.
#include "hwmetrics/host_metrics.h"

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace parallm::hwmetrics {

namespace {

std::vector<std::string_view> split_ws(std::string_view s) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
    size_t j = i;
    while (j < s.size() && s[j] != ' ' && s[j] != '\t') ++j;
    if (j > i) out.push_back(s.substr(i, j - i));
    i = j;
  }
  return out;
}

std::optional<uint64_t> to_u64(std::string_view s) {
  uint64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}

// Calls fn(line) for each line of text.
template <typename F>
void for_each_line(std::string_view text, F fn) {
  size_t i = 0;
  while (i < text.size()) {
    size_t j = text.find('\n', i);
    if (j == std::string_view::npos) j = text.size();
    fn(text.substr(i, j - i));
    i = j + 1;
  }
}

// "Key:   123 kB" fields (after an optional prefix such as "Node 0 ") -> bytes.
std::optional<uint64_t> kb_field(std::string_view text, std::string_view key) {
  std::optional<uint64_t> out;
  for_each_line(text, [&](std::string_view line) {
    if (out) return;
    std::vector<std::string_view> t = split_ws(line);
    for (size_t k = 0; k + 1 < t.size(); ++k) {
      if (t[k].size() == key.size() + 1 && t[k].substr(0, key.size()) == key && t[k].back() == ':') {
        std::optional<uint64_t> v = to_u64(t[k + 1]);
        if (!v) return;
        const bool kb = k + 2 < t.size() && t[k + 2] == "kB";
        out = kb ? *v * 1024 : *v;
        return;
      }
    }
  });
  return out;
}

std::optional<std::string> read_file(const std::string& path) {
  std::ifstream f(path);
  if (!f) return std::nullopt;
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace

std::optional<CpuTimes> parse_proc_stat(std::string_view text) {
  std::optional<CpuTimes> out;
  for_each_line(text, [&](std::string_view line) {
    if (out || line.substr(0, 4) != "cpu ") return;
    std::vector<std::string_view> t = split_ws(line);
    // cpu user nice system idle iowait irq softirq steal [guest guest_nice]
    if (t.size() < 5) return;
    uint64_t f[8] = {0};
    for (size_t k = 1; k < t.size() && k <= 8; ++k) {
      std::optional<uint64_t> v = to_u64(t[k]);
      if (!v) return;
      f[k - 1] = *v;
    }
    CpuTimes c;
    const uint64_t idle = f[3] + f[4];
    c.busy_ticks = f[0] + f[1] + f[2] + f[5] + f[6] + f[7];
    c.total_ticks = c.busy_ticks + idle;
    out = c;
  });
  return out;
}

std::optional<double> cpu_utilization(const CpuTimes& before, const CpuTimes& after) {
  if (after.total_ticks <= before.total_ticks || after.busy_ticks < before.busy_ticks) return std::nullopt;
  const double r = static_cast<double>(after.busy_ticks - before.busy_ticks) /
                   static_cast<double>(after.total_ticks - before.total_ticks);
  return std::clamp(r, 0.0, 1.0);
}

std::optional<NodeMemory> parse_node_meminfo(std::string_view text, int numa_node) {
  std::optional<uint64_t> total = kb_field(text, "MemTotal");
  if (!total) return std::nullopt;
  std::optional<uint64_t> used = kb_field(text, "MemUsed");
  if (!used) {
    std::optional<uint64_t> free = kb_field(text, "MemFree");
    if (!free) return std::nullopt;
    used = *total - std::min(*free, *total);
  }
  return NodeMemory{numa_node, *total, std::min(*used, *total)};
}

std::optional<NodeMemory> parse_proc_meminfo(std::string_view text) {
  std::optional<uint64_t> total = kb_field(text, "MemTotal");
  std::optional<uint64_t> free = kb_field(text, "MemFree");
  if (!total || !free) return std::nullopt;
  return NodeMemory{0, *total, *total - std::min(*free, *total)};
}

std::optional<uint64_t> parse_status_rss_bytes(std::string_view text) { return kb_field(text, "VmRSS"); }

std::optional<double> parse_stat_cpu_seconds(std::string_view text, long ticks_per_second) {
  // "pid (comm) state ppid ...": comm may hold spaces and ')', so fields are
  // counted from the last ')'. utime and stime are fields 14 and 15.
  const size_t close = text.rfind(')');
  if (close == std::string_view::npos || ticks_per_second <= 0) return std::nullopt;
  std::string_view rest = text.substr(close + 1);
  if (size_t nl = rest.find('\n'); nl != std::string_view::npos) rest = rest.substr(0, nl);
  std::vector<std::string_view> t = split_ws(rest);
  if (t.size() < 13) return std::nullopt;  // t[0] is field 3 (state)
  std::optional<uint64_t> utime = to_u64(t[11]), stime = to_u64(t[12]);
  if (!utime || !stime) return std::nullopt;
  return static_cast<double>(*utime + *stime) / static_cast<double>(ticks_per_second);
}

HostCollector::HostCollector(std::string proc_root, std::string sys_root)
    : proc_root_(std::move(proc_root)), sys_root_(std::move(sys_root)) {}

HostSample HostCollector::sample() {
  namespace fs = std::filesystem;
  HostSample s;
  if (std::optional<std::string> stat = read_file(proc_root_ + "/stat")) {
    if (std::optional<CpuTimes> now = parse_proc_stat(*stat)) {
      std::lock_guard<std::mutex> lock(mu_);
      s.cpu_utilization_ratio = cpu_utilization(prev_cpu_, *now);
      if (s.cpu_utilization_ratio) prev_cpu_ = *now;
    }
  }
  std::error_code ec;
  const fs::path nodes = sys_root_ + "/devices/system/node";
  for (fs::directory_iterator it(nodes, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.size() < 5 || name.compare(0, 4, "node") != 0) continue;
    std::optional<uint64_t> id = to_u64(std::string_view(name).substr(4));
    if (!id) continue;
    std::optional<std::string> text = read_file((it->path() / "meminfo").string());
    if (!text) continue;
    if (std::optional<NodeMemory> m = parse_node_meminfo(*text, static_cast<int>(*id))) s.memory.push_back(*m);
  }
  if (s.memory.empty()) {
    if (std::optional<std::string> text = read_file(proc_root_ + "/meminfo")) {
      if (std::optional<NodeMemory> m = parse_proc_meminfo(*text)) s.memory.push_back(*m);
    }
  }
  std::sort(s.memory.begin(), s.memory.end(),
            [](const NodeMemory& a, const NodeMemory& b) { return a.numa_node < b.numa_node; });
  if (std::optional<std::string> text = read_file(proc_root_ + "/self/status"))
    s.process_resident_bytes = parse_status_rss_bytes(*text);
  if (std::optional<std::string> text = read_file(proc_root_ + "/self/stat"))
    s.process_cpu_seconds = parse_stat_cpu_seconds(*text, ::sysconf(_SC_CLK_TCK));
  int64_t fds = 0;
  ec.clear();
  for (fs::directory_iterator it(proc_root_ + "/self/fd", ec), end; !ec && it != end; it.increment(ec)) ++fds;
  // NOTE: in the live /proc the iterator's own descriptor is in the listing.
  if (!ec) s.process_open_fds = proc_root_ == "/proc" && fds > 0 ? fds - 1 : fds;
  return s;
}

}  // namespace parallm::hwmetrics
