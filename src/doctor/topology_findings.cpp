#include "doctor/topology_findings.h"

#include <algorithm>
#include <functional>

#include "util/log.h"

namespace parallm::doctor {
namespace {

bool slow(const topo::Link& l) {
  return l.kind == topo::LinkKind::kPhb || l.kind == topo::LinkKind::kNode || l.kind == topo::LinkKind::kSys ||
         l.kind == topo::LinkKind::kPix || l.kind == topo::LinkKind::kPxb;
}

// Groups of GPUs joined by NVLink (connected components).
std::vector<std::vector<int>> nvlink_islands(const topo::TopoMatrix& t) {
  std::vector<int> island(t.n_gpu(), -1);
  std::vector<std::vector<int>> out;
  for (int s = 0; s < t.n_gpu(); ++s) {
    if (island[s] >= 0) continue;
    std::vector<int> members;
    std::vector<int> stack = {s};
    island[s] = static_cast<int>(out.size());
    while (!stack.empty()) {
      int a = stack.back();
      stack.pop_back();
      members.push_back(a);
      for (int b = 0; b < t.n_gpu(); ++b)
        if (island[b] < 0 && t.gpu_links[a][b].kind == topo::LinkKind::kNvLink) {
          island[b] = island[s];
          stack.push_back(b);
        }
    }
    std::sort(members.begin(), members.end());
    out.push_back(members);
  }
  return out;
}

std::string gpu_list(const std::vector<int>& g) {
  std::string s;
  for (int i : g) s += (s.empty() ? "" : ",") + std::to_string(i);
  return s;
}

}  // namespace

std::vector<Finding> topology_findings(const topo::TopoMatrix& t, int tp, int pp) {
  std::vector<Finding> out;
  tp = std::max(tp, 1);
  pp = std::max(pp, 1);
  const int need = tp * pp;
  if (need > t.n_gpu()) {
    Finding f;
    f.severity = Severity::kError;
    f.title = strfmt("tp × pp = %d GPUs but the topology lists %d", need, t.n_gpu());
    f.evidence.push_back(strfmt("--tp %d --pp %d", tp, pp));
    f.evidence.push_back(strfmt("GPUs in the matrix: %d", t.n_gpu()));
    f.fixes = {strfmt("lower --tp / --pp so that tp × pp ≤ %d", t.n_gpu()), "or run on a machine with more GPUs"};
    out.push_back(std::move(f));
    return out;
  }
  const auto islands = nvlink_islands(t);
  size_t biggest = 0;
  for (const auto& is : islands) biggest = std::max(biggest, is.size());

  for (int g = 0; g < pp; ++g) {
    std::vector<int> group;
    for (int i = 0; i < tp; ++i) group.push_back(g * tp + i);
    Finding f;
    std::vector<std::string> slow_pairs;
    topo::LinkKind worst = topo::LinkKind::kSelf;
    for (size_t a = 0; a < group.size(); ++a)
      for (size_t b = a + 1; b < group.size(); ++b) {
        const topo::Link& l = t.gpu_links[group[a]][group[b]];
        if (slow(l)) {
          slow_pairs.push_back(t.gpus[group[a]] + "-" + t.gpus[group[b]] + ": " + topo::link_name(l) + " (" +
                               topo::link_description(l) + ")");
          worst = std::max(worst, l.kind);
        }
      }
    std::vector<std::string> numa;
    for (int i : group)
      if (!t.numa_affinity.empty() && !t.numa_affinity[i].empty() && t.numa_affinity[i] != "N/A" &&
          std::find(numa.begin(), numa.end(), t.numa_affinity[i]) == numa.end())
        numa.push_back(t.numa_affinity[i]);
    const bool cross_numa = numa.size() > 1;
    const std::string name = strfmt("TP group %d (GPUs %s)", g, gpu_list(group).c_str());
    if (slow_pairs.empty() && !cross_numa) continue;
    // Across NUMA nodes on NVLink the all-reduce never touches the host: only a note.
    f.severity = slow_pairs.empty() ? Severity::kInfo : Severity::kWarning;
    f.title = name + (slow_pairs.empty() ? " spans NUMA nodes (over NVLink)"
                                         : " crosses " + topo::link_name({worst, 0}) + " links");
    f.evidence = slow_pairs;
    if (cross_numa) {
      std::string s = "NUMA affinity:";
      for (int i : group) s += " " + t.gpus[i] + "=" + t.numa_affinity[i];
      f.evidence.push_back(s);
    }
    for (const auto& is : islands)
      if (is.size() >= static_cast<size_t>(tp) && is.size() > 1) {
        std::vector<int> pick(is.begin(), is.begin() + tp);
        f.fixes.push_back("pick GPUs on NV# links for the TP group: CUDA_VISIBLE_DEVICES=" + gpu_list(pick));
        break;
      }
    if (biggest > 1 && biggest < static_cast<size_t>(tp))
      f.fixes.push_back(
          strfmt("keep TP within the NVLink islands (--tp %zu) and use PP across the slow link "
                 "(--pp %d)",
                 biggest, need / static_cast<int>(biggest)));
    if (biggest <= 1)
      f.fixes.push_back("no NVLink here: prefer --pp across PCIe over --tp, or GPUs behind one PCIe switch (PIX)");
    if (cross_numa) f.fixes.push_back("keep the TP group within one NUMA node (same NUMA affinity)");
    out.push_back(std::move(f));
  }
  if (out.empty()) {
    Finding f;
    f.severity = Severity::kInfo;
    f.title = strfmt("every TP group of %d GPUs is on NVLink within one NUMA node", tp);
    for (int g = 0; g < pp; ++g)
      for (int i = 1; i < tp; ++i)
        f.evidence.push_back(t.gpus[g * tp] + "-" + t.gpus[g * tp + i] + ": " +
                             topo::link_name(t.gpu_links[g * tp][g * tp + i]));
    out.push_back(std::move(f));
  }
  return out;
}

}  // namespace parallm::doctor
