// Which GPU indices each replica of a layout gets (CUDA_VISIBLE_DEVICES of a
// per-replica launch line, the device_ids of a compose service, ...).
//
// Without a measured topology the groups are consecutive: replica r of group
// size g gets r*g .. r*g+g-1 on its node. With `plan --topology` (a parsed
// `nvidia-smi topo -m`) the groups are picked greedily, one replica at a time,
// among the GPUs still free on the node: the group whose slowest link is the
// fastest (so a TP group sits on NV# links), then the one on the NUMA node
// holding the fewest groups so far (replicas spread over the sockets), then
// the one with the most total link bandwidth, then the lowest indices.
// Exhaustive over subsets up to 16 GPUs a node (C(16,8) = 12,870).
#pragma once
#include <string>
#include <vector>

#include "planner/fabric.h"

namespace parallm::planner {

struct GpuGroup {
  int node = 0;            // node index (0-based) the replica runs on
  std::vector<int> gpus;   // [group_size] GPU indices on that node
  int numa_node = -1;      // NUMA node of the first GPU, -1 unknown
  double min_bw_gbps = 0;  // slowest link inside the group (0 for a single GPU)
};

// group_size = tp x pp, replicas = dp. Replicas fill node 0 first, then node
// 1, ...; a group larger than a node spans whole nodes (gpus lists node-local
// indices 0..gpus_per_node-1 of each of its nodes, node = first node). With
// 1 < tp < group_size (pipeline stages), each group is ordered so that every
// run of tp consecutive GPUs (one stage's TP ranks, as the engines assign
// them from CUDA_VISIBLE_DEVICES) is the best-linked tp-subset left.
std::vector<GpuGroup> gpu_groups(const Fabric& fabric, int group_size, int replicas, int tp = 0);

// "0,3" for CUDA_VISIBLE_DEVICES.
std::string gpu_list(const std::vector<int>& gpus);

}  // namespace parallm::planner
