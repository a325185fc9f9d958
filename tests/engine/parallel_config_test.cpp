// ParallelConfig: the rank arithmetic every part of the engine shares, with
// the exact roles of each world rank written out.
#include "config/parallel_config.h"

#include <gtest/gtest.h>

#include "util/check.h"

namespace parallm {
namespace {

TEST(ParallelConfig, RolesOfTpTimesPp) {
  const ParallelConfig p{2, 3, 1, 1};
  EXPECT_EQ(p.group_size(), 2);
  EXPECT_EQ(p.world_size(), 6);
  // rank: stage, group_rank
  const int want[6][2] = {{0, 0}, {0, 1}, {1, 0}, {1, 1}, {2, 0}, {2, 1}};
  for (int r = 0; r < 6; ++r) {
    const ParallelConfig::Role role = p.role(r);
    EXPECT_EQ(role.stage, want[r][0]) << r;
    EXPECT_EQ(role.group_rank, want[r][1]) << r;
    EXPECT_EQ(role.tp_rank, want[r][1]) << r;
    EXPECT_EQ(role.ep_rank, 0) << r;
    EXPECT_EQ(role.first_stage, want[r][0] == 0) << r;
    EXPECT_EQ(role.last_stage, want[r][0] == 2) << r;
    EXPECT_EQ(p.rank_at(role.stage, role.group_rank), r);
  }
}

TEST(ParallelConfig, ExpertsReuseTheTpRanks) {
  const ParallelConfig ep_only{1, 2, 4, 1};
  EXPECT_EQ(ep_only.world_size(), 8);
  EXPECT_EQ(ep_only.role(5).ep_rank, 1);
  EXPECT_EQ(ep_only.role(5).tp_rank, 0);
  EXPECT_EQ(ep_only.role(5).stage, 1);
  const ParallelConfig both{2, 1, 2, 3};
  EXPECT_EQ(both.world_size(), 2);
  EXPECT_EQ(both.total_ranks(), 6);
  EXPECT_EQ(both.role(1).tp_rank, 1);
  EXPECT_EQ(both.role(1).ep_rank, 1);
  EXPECT_EQ(both.describe(), "tp=2 pp=1 ep=2 dp=3");
}

TEST(ParallelConfig, RejectsLayoutsItCannotRun) {
  EXPECT_THROW((ParallelConfig{2, 1, 4, 1}.validate()), InputError);
  EXPECT_THROW((ParallelConfig{0, 1, 1, 1}.validate()), InputError);
  EXPECT_THROW((ParallelConfig{1, 1, 1, 0}.validate()), InputError);
  EXPECT_NO_THROW((ParallelConfig{4, 2, 1, 2}.validate()));
  EXPECT_NO_THROW((ParallelConfig{4, 1, 4, 1}.validate()));
}

}  // namespace
}  // namespace parallm
