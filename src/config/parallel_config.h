// ParallelConfig: how one model is laid over ranks, the one place where the
// rank arithmetic is written. A replica is pp pipeline stages of one group
// each; a group is the stage's tensor-parallel ranks, which also hold the
// experts under expert parallelism (ep reuses the tp ranks, so the group is
// max(tp, ep) wide and tp, ep are each 1 or the group's width). dp replicas
// of that layout serve side by side.
//
//   world rank r of a replica:  stage = r / group_size, group_rank = r % group_size
#pragma once
#include <string>

namespace parallm {

struct ParallelConfig {
  int tp = 1, pp = 1, ep = 1, dp = 1;

  // What one world rank does.
  struct Role {
    int stage = 0;       // pipeline stage
    int group_rank = 0;  // rank within its stage's tp / ep group
    int tp_rank = 0;     // shard of the heads and FFN columns (0 when tp == 1)
    int ep_rank = 0;     // shard of the experts (0 when ep == 1)
    bool first_stage = true, last_stage = true;
  };

  // Throws InputError naming the rule a layout breaks (a count below 1, or
  // tp and ep both above 1 and unequal).
  void validate() const;

  int group_size() const { return tp > ep ? tp : ep; }
  int world_size() const { return group_size() * pp; }  // ranks of one replica
  int total_ranks() const { return world_size() * dp; }
  Role role(int world_rank) const;
  // The world rank at (stage, group_rank).
  int rank_at(int stage, int group_rank) const { return stage * group_size() + group_rank; }
  // "tp=2 pp=1 ep=1" (dp only when above 1).
  std::string describe() const;
};

}  // namespace parallm
