// How fast the devices of a deployment talk to each other. A Fabric is a
// per-node matrix of link bandwidths and latencies, built either from an
// --interconnect name or from a parsed `nvidia-smi topo -m` (topo/), plus the
// network between nodes. best_group() picks the GPUs for a tensor-parallel
// group: the set whose slowest link is fastest.
#pragma once
#include <string>
#include <vector>

#include "planner/hardware.h"
#include "topo/topo_matrix.h"

namespace parallm::planner {

struct Fabric {
  int gpus_per_node = 1;
  int nodes = 1;
  std::vector<std::vector<double>> bw_gbps;     // [gpus_per_node][gpus_per_node], one direction, nominal
  std::vector<std::vector<double>> latency_us;  // per collective step over that link
  std::vector<std::vector<bool>> fast;          // NVLink-class link
  std::vector<std::vector<std::string>> kind;   // "NVLink", "PCIe4", "PCIe across sockets", ...
  std::vector<int> numa_node;                   // [gpus_per_node] from the topology's NUMA column; empty = unknown
  bool from_topology = false;                   // links measured (nvidia-smi topo), not assumed uniform
  double network_gbps = 50;                     // per GPU between nodes (400 Gb/s NIC)
  double network_latency_us = 25;
  std::string description;
};

struct GroupLink {
  int size = 1;
  double bw_gbps = 0;     // slowest link inside the group (nominal)
  double latency_us = 0;  // its per-step latency
  bool fast = true;       // every link is NVLink-class
  bool crosses_nodes = false;
  std::string kind;       // kind of the slowest link
  std::vector<int> gpus;  // chosen GPUs of node 0 (empty when crossing nodes)
};

// interconnect: nvlink | nvswitch | pcie3 | pcie4 | pcie5 | "" (the GPU's usual
// fabric: NVSwitch for SXM boards, its PCIe generation otherwise).
Fabric fabric_from_interconnect(const GpuSpec& gpu, const std::string& interconnect, int gpus_per_node, int nodes);
// Links as measured by nvidia-smi; gpus_per_node is the matrix size.
Fabric fabric_from_topology(const GpuSpec& gpu, const topo::TopoMatrix& topo, int nodes);
// Bandwidth (GB/s, one direction, nominal) and latency of one link kind.
void link_speed(const GpuSpec& gpu, const topo::Link& link, double* bw_gbps, double* latency_us);

GroupLink best_group(const Fabric& fabric, int size);
// Size of the largest group whose links are all NVLink-class (1 when none).
int fast_group_size(const Fabric& fabric);

}  // namespace parallm::planner
