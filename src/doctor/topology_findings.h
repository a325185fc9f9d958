// Topology recogniser: does each tensor-parallel group sit on NVLink within
// one NUMA node? The input is a parsed `nvidia-smi topo -m` (topo/topo_matrix.h).
#pragma once
#include <vector>

#include "doctor/finding.h"
#include "topo/topo_matrix.h"

namespace parallm::doctor {

// TP groups are GPUs [g*tp, (g+1)*tp) for g in 0..pp-1, as serve places them.
std::vector<Finding> topology_findings(const topo::TopoMatrix& t, int tp, int pp);

}  // namespace parallm::doctor
