// GPU groups of the replicas (algorithm in gpu_groups.h).
#include "planner/gpu_groups.h"

#include <algorithm>
#include <functional>

#include "util/check.h"

namespace parallm::planner {

namespace {

struct Score {
  double min_bw = 0;
  int numa_load = 0;
  double sum_bw = 0;
};

bool better(const Score& a, const std::vector<int>& ga, const Score& b, const std::vector<int>& gb) {
  if (a.min_bw != b.min_bw) return a.min_bw > b.min_bw;
  if (a.numa_load != b.numa_load) return a.numa_load < b.numa_load;
  if (a.sum_bw != b.sum_bw) return a.sum_bw > b.sum_bw;
  return ga < gb;
}

int numa_of(const Fabric& f, int gpu) { return gpu < static_cast<int>(f.numa_node.size()) ? f.numa_node[gpu] : -1; }

// Groups of one node, picked greedily among the free GPUs (see the header);
// `allowed` (empty = all) limits the GPUs to choose from.
std::vector<std::vector<int>> pick_on_node(const Fabric& f, int size, int count, const std::vector<int>& allowed = {}) {
  const int n = f.gpus_per_node;
  std::vector<bool> used(static_cast<size_t>(n), !allowed.empty());
  for (int g : allowed) used[static_cast<size_t>(g)] = false;
  std::vector<int> groups_on_numa(static_cast<size_t>(n + 1), 0);
  std::vector<std::vector<int>> out;
  for (int k = 0; k < count; ++k) {
    std::vector<int> free;
    for (int g = 0; g < n; ++g)
      if (!used[g]) free.push_back(g);
    std::vector<int> best, cur;
    Score best_score;
    bool have = false;
    std::function<void(size_t)> rec = [&](size_t start) {
      if (static_cast<int>(cur.size()) == size) {
        Score s;
        s.min_bw = size > 1 ? 1e300 : 0;
        for (size_t i = 0; i < cur.size(); ++i)
          for (size_t j = i + 1; j < cur.size(); ++j) {
            const double bw = std::min(f.bw_gbps[cur[i]][cur[j]], f.bw_gbps[cur[j]][cur[i]]);
            s.min_bw = std::min(s.min_bw, bw);
            s.sum_bw += bw;
          }
        const int numa = numa_of(f, cur[0]);
        s.numa_load = numa >= 0 && numa < n + 1 ? groups_on_numa[numa] : 0;
        if (!have || better(s, cur, best_score, best)) {
          best = cur;
          best_score = s;
          have = true;
        }
        return;
      }
      for (size_t i = start; i < free.size(); ++i) {
        if (free.size() - i < static_cast<size_t>(size) - cur.size()) break;
        cur.push_back(free[i]);
        rec(i + 1);
        cur.pop_back();
      }
    };
    rec(0);
    PARALLM_CHECK(have);
    for (int g : best) used[g] = true;
    const int numa = numa_of(f, best[0]);
    if (numa >= 0 && numa < n + 1) ++groups_on_numa[numa];
    out.push_back(best);
  }
  return out;
}

}  // namespace

std::vector<GpuGroup> gpu_groups(const Fabric& f, int group_size, int replicas, int tp) {
  PARALLM_CHECK(group_size >= 1 && replicas >= 1);
  const int n = std::max(1, f.gpus_per_node);
  std::vector<GpuGroup> out;
  if (group_size >= n) {
    // A replica spans whole nodes: every GPU of each of its nodes.
    const int nodes_per_replica = (group_size + n - 1) / n;
    for (int r = 0; r < replicas; ++r) {
      GpuGroup g;
      g.node = r * nodes_per_replica;
      for (int i = 0; i < std::min(group_size, n); ++i) g.gpus.push_back(i);
      g.numa_node = numa_of(f, 0);
      out.push_back(g);
    }
    return out;
  }
  const int per_node = n / group_size;
  const bool measured = f.from_topology && n <= 16 && static_cast<int>(f.bw_gbps.size()) == n;
  std::vector<std::vector<int>> node_groups;
  if (measured) {
    node_groups = pick_on_node(f, group_size, std::min(per_node, replicas));
    if (tp > 1 && tp < group_size && group_size % tp == 0)
      for (auto& g : node_groups) {
        std::vector<int> ordered;
        for (const auto& chunk : pick_on_node(f, tp, group_size / tp, g))
          ordered.insert(ordered.end(), chunk.begin(), chunk.end());
        g = ordered;
      }
  } else {
    for (int k = 0; k < std::min(per_node, replicas); ++k) {
      std::vector<int> g;
      for (int i = 0; i < group_size; ++i) g.push_back(k * group_size + i);
      node_groups.push_back(g);
    }
  }
  for (int r = 0; r < replicas; ++r) {
    GpuGroup g;
    g.node = r / per_node;
    g.gpus = node_groups[static_cast<size_t>(r % per_node)];
    g.numa_node = numa_of(f, g.gpus[0]);
    if (group_size > 1 && static_cast<int>(f.bw_gbps.size()) == n) {
      g.min_bw_gbps = 1e300;
      for (size_t i = 0; i < g.gpus.size(); ++i)
        for (size_t j = i + 1; j < g.gpus.size(); ++j)
          g.min_bw_gbps = std::min(g.min_bw_gbps, f.bw_gbps[g.gpus[i]][g.gpus[j]]);
    }
    out.push_back(g);
  }
  return out;
}

std::string gpu_list(const std::vector<int>& gpus) {
  std::string s;
  for (int g : gpus) s += (s.empty() ? "" : ",") + std::to_string(g);
  return s;
}

}  // namespace parallm::planner
