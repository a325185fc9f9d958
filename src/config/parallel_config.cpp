#include "config/parallel_config.h"

#include "util/check.h"

namespace parallm {

void ParallelConfig::validate() const {
  if (tp < 1 || pp < 1 || ep < 1 || dp < 1) throw InputError("--tp, --pp, --ep and --dp must be >= 1");
  if (tp > 1 && ep > 1 && tp != ep) {
    throw InputError("--tp and --ep must be equal when both are above 1 (experts are spread over the tp ranks)");
  }
}

ParallelConfig::Role ParallelConfig::role(int world_rank) const {
  PARALLM_CHECK(world_rank >= 0 && world_rank < world_size());
  Role r;
  r.stage = world_rank / group_size();
  r.group_rank = world_rank % group_size();
  r.tp_rank = tp > 1 ? r.group_rank : 0;
  r.ep_rank = ep > 1 ? r.group_rank : 0;
  r.first_stage = r.stage == 0;
  r.last_stage = r.stage == pp - 1;
  return r;
}

std::string ParallelConfig::describe() const {
  std::string s = "tp=" + std::to_string(tp) + " pp=" + std::to_string(pp) + " ep=" + std::to_string(ep);
  if (dp > 1) s += " dp=" + std::to_string(dp);
  return s;
}

}  // namespace parallm
