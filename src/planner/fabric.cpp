// Link speeds. Nominal one-direction bandwidths: NVLink per the GPU's
// datasheet split over its links (NV# cells scale with #), PCIe x16 per
// generation, reduced for paths through the host bridge (x0.8), between host
// bridges (x0.7) and across CPU sockets (x0.5: the SMP interconnect and
// P2P-through-host). Latencies are per collective step (NCCL-class small
// message all-reduce): NVLink 8 us, PCIe 20 us, across sockets 30 us.
// NOTE: these are planning figures, not measurements; `parallm plan
// --calibrate` measures the local all-reduce instead.
#include "planner/fabric.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <functional>

#include "util/check.h"
#include "util/log.h"

namespace parallm::planner {

void link_speed(const GpuSpec& gpu, const topo::Link& link, double* bw, double* lat) {
  const double pcie = pcie_gbps(gpu.pcie_gen);
  switch (link.kind) {
    case topo::LinkKind::kSelf:
      *bw = gpu.mem_bw_gbps;
      *lat = 0;
      return;
    case topo::LinkKind::kNvLink: {
      double per_link = gpu.nvlink_links > 0 ? gpu.nvlink_gbps / gpu.nvlink_links : 25.0;
      *bw = per_link * link.nv_links;
      *lat = 15;
      return;
    }
    case topo::LinkKind::kPix:
    case topo::LinkKind::kPxb:
      *bw = pcie;
      *lat = 20;
      return;
    case topo::LinkKind::kPhb:
      *bw = pcie * 0.8;
      *lat = 20;
      return;
    case topo::LinkKind::kNode:
      *bw = pcie * 0.7;
      *lat = 25;
      return;
    case topo::LinkKind::kSys:
      *bw = pcie * 0.5;
      *lat = 30;
      return;
  }
}

namespace {

Fabric empty_fabric(int n, int nodes) {
  if (n < 1) throw InputError("--gpus must be at least 1");
  if (nodes < 1) throw InputError("--nodes must be at least 1");
  Fabric f;
  f.gpus_per_node = n;
  f.nodes = nodes;
  f.bw_gbps.assign(n, std::vector<double>(n, 0));
  f.latency_us.assign(n, std::vector<double>(n, 0));
  f.fast.assign(n, std::vector<bool>(n, true));
  f.kind.assign(n, std::vector<std::string>(n, "self"));
  return f;
}

}  // namespace

Fabric fabric_from_interconnect(const GpuSpec& gpu, const std::string& ic_in, int n, int nodes) {
  Fabric f = empty_fabric(n, nodes);
  std::string ic = ic_in;
  if (ic.empty())
    ic = gpu.is_cpu ? "memory" : gpu.nvlink_group >= 8 ? "nvswitch" : "pcie" + std::to_string(gpu.pcie_gen);
  int group = n;  // GPUs sharing the fast fabric
  double fast_bw = 0, slow_bw = 0, fast_lat = 15, slow_lat = 20;
  std::string fast_kind, slow_kind;
  if (ic == "nvlink" || ic == "nvswitch") {
    if (gpu.nvlink_gbps <= 0)
      throw InputError("--interconnect " + ic + ": " + gpu.name + " has no NVLink (use pcie3, pcie4 or pcie5)");
    fast_bw = gpu.nvlink_gbps;
    fast_kind = "NVLink";
    group = ic == "nvswitch" ? n : std::min(n, std::max(1, gpu.nvlink_group));
    slow_bw = pcie_gbps(gpu.pcie_gen) * 0.5;  // between NVLink islands: PCIe across the host
    slow_lat = 30;
    slow_kind = "PCIe" + std::to_string(gpu.pcie_gen) + " (between NVLink groups)";
  } else if (ic == "pcie3" || ic == "pcie4" || ic == "pcie5" || ic == "pcie6") {
    int gen = ic.back() - '0';
    fast_bw = slow_bw = pcie_gbps(gen);
    fast_kind = slow_kind = "PCIe" + std::to_string(gen);
    fast_lat = slow_lat = 20;
  } else if (ic == "memory") {  // CPU "devices" share host memory
    fast_bw = slow_bw = gpu.mem_bw_gbps * 0.5;
    fast_lat = slow_lat = 5;
    fast_kind = slow_kind = "host memory";
  } else {
    throw InputError("unknown --interconnect '" + ic_in + "' (use nvlink, nvswitch, pcie3, pcie4 or pcie5)");
  }
  const bool is_nv = fast_kind == "NVLink";
  for (int a = 0; a < n; ++a)
    for (int b = 0; b < n; ++b) {
      if (a == b) continue;
      bool same = a / group == b / group;
      f.bw_gbps[a][b] = same ? fast_bw : slow_bw;
      f.latency_us[a][b] = same ? fast_lat : slow_lat;
      f.fast[a][b] = same && is_nv;
      f.kind[a][b] = same ? fast_kind : slow_kind;
    }
  f.description = strfmt("%d x %s per node, %s %.0f GB/s", n, gpu.name.c_str(), fast_kind.c_str(), fast_bw);
  if (is_nv && group < n) f.description += strfmt(" in groups of %d", group);
  if (nodes > 1) f.description += strfmt(", %d nodes over a %.0f GB/s/GPU network", nodes, f.network_gbps);
  return f;
}

Fabric fabric_from_topology(const GpuSpec& gpu, const topo::TopoMatrix& t, int nodes) {
  const int n = t.n_gpu();
  if (n < 1) throw InputError("topology lists no GPUs");
  Fabric f = empty_fabric(n, nodes);
  for (int a = 0; a < n; ++a)
    for (int b = 0; b < n; ++b) {
      if (a == b) continue;
      const topo::Link& l = t.gpu_links[a][b];
      link_speed(gpu, l, &f.bw_gbps[a][b], &f.latency_us[a][b]);
      f.fast[a][b] = l.kind == topo::LinkKind::kNvLink;
      f.kind[a][b] = topo::link_name(l);
    }
  f.from_topology = true;
  // NUMA affinity ("0", "0-1", "N/A"): the first number, -1 when absent.
  for (int a = 0; a < n; ++a) {
    const std::string cell = a < static_cast<int>(t.numa_affinity.size()) ? t.numa_affinity[a] : "";
    f.numa_node.push_back(!cell.empty() && std::isdigit(static_cast<unsigned char>(cell[0])) ? std::atoi(cell.c_str())
                                                                                             : -1);
  }
  f.description = strfmt("%d x %s from nvidia-smi topo", n, gpu.name.c_str());
  if (nodes > 1) f.description += strfmt(", %d nodes", nodes);
  return f;
}

GroupLink best_group(const Fabric& f, int size) {
  GroupLink g;
  g.size = size;
  if (size <= 1) {
    g.bw_gbps = 1e9;
    g.fast = true;
    g.kind = "none";
    g.gpus = {0};
    return g;
  }
  const int n = f.gpus_per_node;
  if (size > n) {
    g.bw_gbps = f.network_gbps;
    g.latency_us = f.network_latency_us;
    g.fast = false;
    g.crosses_nodes = true;
    g.kind = "network between nodes";
    return g;
  }
  // Exhaustive over subsets for small nodes (C(16,8) = 12870), greedy beyond.
  std::vector<int> best, cur;
  double best_bw = -1, best_lat = 0;
  std::function<void(int, double, double)> rec = [&](int start, double min_bw, double max_lat) {
    if (static_cast<int>(cur.size()) == size) {
      if (min_bw > best_bw || (min_bw == best_bw && max_lat < best_lat)) {
        best_bw = min_bw;
        best_lat = max_lat;
        best = cur;
      }
      return;
    }
    for (int i = start; i < n; ++i) {
      if (n - i < size - static_cast<int>(cur.size())) break;
      double mb = min_bw, ml = max_lat;
      for (int j : cur) {
        mb = std::min(mb, f.bw_gbps[i][j]);
        ml = std::max(ml, f.latency_us[i][j]);
      }
      if (mb < best_bw) continue;  // the slowest link only gets slower
      cur.push_back(i);
      rec(i + 1, mb, ml);
      cur.pop_back();
    }
  };
  if (n <= 16) {
    rec(0, 1e18, 0);
  } else {
    best.clear();
    for (int i = 0; i < size; ++i) best.push_back(i);
    best_bw = 1e18;
    for (int a : best)
      for (int b : best)
        if (a != b) {
          best_bw = std::min(best_bw, f.bw_gbps[a][b]);
          best_lat = std::max(best_lat, f.latency_us[a][b]);
        }
  }
  g.gpus = best;
  g.bw_gbps = best_bw;
  g.latency_us = best_lat;
  g.fast = true;
  std::string slow_kind;
  double slow = 1e18;
  for (int a : best)
    for (int b : best) {
      if (a == b) continue;
      if (!f.fast[a][b]) g.fast = false;
      if (f.bw_gbps[a][b] < slow) {
        slow = f.bw_gbps[a][b];
        slow_kind = f.kind[a][b];
      }
    }
  g.kind = slow_kind;
  return g;
}

int fast_group_size(const Fabric& f) {
  int best = 1;
  for (int s = 2; s <= f.gpus_per_node; ++s)
    if (best_group(f, s).fast) best = s;
  return best;
}

}  // namespace parallm::planner
