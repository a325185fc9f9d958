// The GPU link matrix of one machine, as `nvidia-smi topo -m` prints it.
// A saved `nvidia-smi topo -m` text is parsed into a square matrix of links
// between GPUs (NV# = # bonded NVLinks, PIX/PXB/PHB/NODE/SYS = PCIe paths of
// growing distance, X = self), plus the GPU-to-NIC links and each GPU's CPU
// and NUMA affinity. The planner turns links into bandwidths (planner/fabric.h);
// this file only knows the names.
#pragma once
#include <string>
#include <vector>

namespace parallm::topo {

// Ordered from nearest to farthest; the order is used to find the slowest
// link of a group.
enum class LinkKind { kSelf, kNvLink, kPix, kPxb, kPhb, kNode, kSys };

struct Link {
  LinkKind kind = LinkKind::kSys;
  int nv_links = 0;  // number of bonded NVLinks when kind == kNvLink
};

struct TopoMatrix {
  std::vector<std::string> gpus;                 // "GPU0", "GPU1", ...
  std::vector<std::vector<Link>> gpu_links;      // [n_gpu][n_gpu]
  std::vector<std::string> nics;                 // "mlx5_0" or "NIC0" columns, in order
  std::vector<std::vector<Link>> gpu_nic_links;  // [n_gpu][n_nic]
  std::vector<std::string> cpu_affinity;         // [n_gpu], e.g. "0-31" ("" when absent)
  std::vector<std::string> numa_affinity;        // [n_gpu], e.g. "0" ("" when absent)

  int n_gpu() const { return static_cast<int>(gpus.size()); }
};

// Parses the text of `nvidia-smi topo -m`; throws InputError naming the line
// and what was expected when the text is not such a table.
TopoMatrix parse_nvidia_smi_topo(const std::string& text);

// "X", "NV12", "PIX", ... as nvidia-smi writes them.
std::string link_name(const Link& link);
// Parses one cell ("NV4", "PHB", "SOC" = old name of SYS); returns false if unknown.
bool parse_link(const std::string& cell, Link* out);
// Human words for the legend: "NVLink x12", "PCIe via host bridge", ...
std::string link_description(const Link& link);

}  // namespace parallm::topo
