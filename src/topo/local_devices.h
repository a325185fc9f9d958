// What this machine has: CPU packages, NUMA nodes, cores and host memory
// (hwloc), and NVIDIA GPUs with their memory and pairwise links (NVML, loaded
// with dlopen at run time: a machine without the driver simply has no GPUs).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "topo/topo_matrix.h"

namespace parallm::topo {

struct LocalGpu {
  std::string name;           // "NVIDIA H200"
  uint64_t memory_bytes = 0;  // total device memory
  std::string pci_bus_id;     // "00000000:18:00.0"
};

struct LocalMachine {
  int packages = 0;  // CPU sockets
  int numa_nodes = 0;
  int cores = 0;  // physical cores
  int hardware_threads = 0;
  uint64_t host_memory_bytes = 0;
  std::vector<LocalGpu> gpus;
  std::optional<TopoMatrix> gpu_links;  // present when NVML reported >= 1 GPU
  std::string gpu_status;               // why there are no GPUs, or "NVML <version>"
};

// Never throws for a missing driver or library; fills what it can.
LocalMachine discover_local_machine();

// Fills gpus / gpu_links / gpu_status from NVML (nvml_probe.cpp).
void probe_nvml(LocalMachine* machine);

}  // namespace parallm::topo
