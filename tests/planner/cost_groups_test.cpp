// The seeds' cost formula (cost_model.h) on hand-computed numbers, and the
// GPU groups of the replicas (gpu_groups.h) on saved and made-up topologies.
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>

#include "planner/cost_model.h"
#include "planner/fabric.h"
#include "planner/gpu_groups.h"
#include "planner/hardware.h"
#include "topo/topo_matrix.h"
#include "util/check.h"

namespace parallm::planner {
namespace {

TEST(CostModel, RentPowerOpsAndTokensAsTheSeeds) {
  // 2 cards rented at 2.5/h, 400 W each at 0.8 per kWh, 3000 ops a month;
  // 10,000 requests a day of 256 output tokens; 1,000 tokens/s at capacity.
  CostInputs in;
  in.gpus = 2;
  in.gpu_hour_price = 2.5;
  in.gpu_watts = 400;
  in.power_price = 0.8;
  in.ops_cost_month = 3000;
  in.daily_requests = 10000;
  in.mean_output_tokens = 256;
  in.capacity_tokens_per_s = 1000;
  in.currency = "CNY";
  MonthlyCost c = monthly_cost(in);
  EXPECT_EQ(c.card_basis, "rent");
  EXPECT_DOUBLE_EQ(c.cards_month, 2 * 2.5 * 720);                  // 3600
  EXPECT_DOUBLE_EQ(c.power_kwh_month, 2 * 0.4 * 720);              // 576 kWh
  EXPECT_DOUBLE_EQ(c.power_month, 576 * 0.8);                      // 460.8
  EXPECT_DOUBLE_EQ(c.total_month, 3600 + 460.8 + 3000);            // 7060.8
  EXPECT_DOUBLE_EQ(c.tokens_month_volume, 10000.0 * 256 * 30);     // 76.8 M
  EXPECT_DOUBLE_EQ(c.cost_per_million_volume, 7060.8 / 76.8);      // 91.9375
  EXPECT_DOUBLE_EQ(c.tokens_month_capacity, 1000.0 * 3600 * 720);  // 2592 M
  EXPECT_DOUBLE_EQ(c.cost_per_million_capacity, 7060.8 / 2592.0);
  EXPECT_DOUBLE_EQ(c.utilization, 76.8 / 2592.0);
  EXPECT_EQ(c.currency, "CNY");
}

TEST(CostModel, DepreciationReplacesRent) {
  // The seeds' A100 example: about 12,000 a month; bought at 72,000 over 6 months = 12,000.
  CostInputs in;
  in.gpus = 1;
  in.gpu_hour_price = 99;  // ignored when a purchase price is given
  in.gpu_price = 72000;
  in.depreciation_months = 6;
  MonthlyCost c = monthly_cost(in);
  EXPECT_EQ(c.card_basis, "depreciation");
  EXPECT_DOUBLE_EQ(c.cards_month, 12000);
  EXPECT_DOUBLE_EQ(c.total_month, 12000);
  EXPECT_DOUBLE_EQ(c.cost_per_million_volume, 0);  // no volume given
}

TEST(CostModel, NegativeInputsAreErrors) {
  for (int k = 0; k < 5; ++k) {
    CostInputs in;
    in.gpus = 1;
    if (k == 0) in.gpu_hour_price = -1;
    if (k == 1) in.gpu_watts = -300;
    if (k == 2) in.power_price = -0.1;
    if (k == 3) in.ops_cost_month = -5;
    if (k == 4) {
      in.gpu_price = 1000;
      in.depreciation_months = 0;
    }
    EXPECT_THROW(monthly_cost(in), InputError) << k;
  }
}

Fabric fabric_of(const std::string& topo_text) {
  return fabric_from_topology(catalog_gpu("A100-80G"), topo::parse_nvidia_smi_topo(topo_text), 1);
}

std::string read(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

TEST(GpuGroups, ConsecutiveWithoutTopology) {
  Fabric f = fabric_from_interconnect(catalog_gpu("H100-SXM"), "", 8, 1);
  auto g = gpu_groups(f, 2, 4);
  ASSERT_EQ(g.size(), 4u);
  for (int r = 0; r < 4; ++r) EXPECT_EQ(g[r].gpus, (std::vector<int>{2 * r, 2 * r + 1}));
  EXPECT_EQ(gpu_list(g[1].gpus), "2,3");
}

// An 8-GPU box whose NVLink pairs are (0,3) (1,2) (4,7) (5,6), two sockets:
// consecutive pairs (0,1) would run TP over PCIe across the host bridge.
const char* kPairs8 =
    "\tGPU0\tGPU1\tGPU2\tGPU3\tGPU4\tGPU5\tGPU6\tGPU7\tCPU Affinity\tNUMA Affinity\n"
    "GPU0\t X \tPHB\tPHB\tNV12\tSYS\tSYS\tSYS\tSYS\t0-31\t0\n"
    "GPU1\tPHB\t X \tNV12\tPHB\tSYS\tSYS\tSYS\tSYS\t0-31\t0\n"
    "GPU2\tPHB\tNV12\t X \tPHB\tSYS\tSYS\tSYS\tSYS\t0-31\t0\n"
    "GPU3\tNV12\tPHB\tPHB\t X \tSYS\tSYS\tSYS\tSYS\t0-31\t0\n"
    "GPU4\tSYS\tSYS\tSYS\tSYS\t X \tPHB\tPHB\tNV12\t32-63\t1\n"
    "GPU5\tSYS\tSYS\tSYS\tSYS\tPHB\t X \tNV12\tPHB\t32-63\t1\n"
    "GPU6\tSYS\tSYS\tSYS\tSYS\tPHB\tNV12\t X \tPHB\t32-63\t1\n"
    "GPU7\tSYS\tSYS\tSYS\tSYS\tNV12\tPHB\tPHB\t X \t32-63\t1\n";

TEST(GpuGroups, TpGroupsSitOnNvLinkAndReplicasSpreadOverNuma) {
  Fabric f = fabric_of(kPairs8);
  // Every TP2 group is an NV12 pair.
  auto g = gpu_groups(f, 2, 4);
  ASSERT_EQ(g.size(), 4u);
  std::set<int> all;
  for (const auto& grp : g) {
    ASSERT_EQ(grp.gpus.size(), 2u);
    EXPECT_TRUE(f.fast[grp.gpus[0]][grp.gpus[1]]) << gpu_list(grp.gpus);
    all.insert(grp.gpus.begin(), grp.gpus.end());
  }
  EXPECT_EQ(all.size(), 8u);
  // Two replicas go to different sockets.
  auto two = gpu_groups(f, 2, 2);
  EXPECT_NE(two[0].numa_node, two[1].numa_node);
  EXPECT_EQ(two[0].gpus, (std::vector<int>{0, 3}));
  EXPECT_EQ(two[1].gpus, (std::vector<int>{4, 7}));
  // Single-GPU replicas alternate sockets too.
  auto ones = gpu_groups(f, 1, 2);
  EXPECT_NE(ones[0].numa_node, ones[1].numa_node);
}

TEST(GpuGroups, PipelineStagesKeepTheirTpRanksOnNvLink) {
  // tp2 x pp2 on the pairs box: one group per socket, ordered so that each
  // stage's two consecutive ranks are an NV12 pair ("0,3,1,2", not "0,1,2,3").
  Fabric f = fabric_of(kPairs8);
  auto g = gpu_groups(f, 4, 2, 2);
  ASSERT_EQ(g.size(), 2u);
  for (const auto& grp : g) {
    ASSERT_EQ(grp.gpus.size(), 4u);
    EXPECT_TRUE(f.fast[grp.gpus[0]][grp.gpus[1]]) << gpu_list(grp.gpus);
    EXPECT_TRUE(f.fast[grp.gpus[2]][grp.gpus[3]]) << gpu_list(grp.gpus);
  }
  EXPECT_NE(g[0].numa_node, g[1].numa_node);
  EXPECT_EQ(gpu_list(g[0].gpus), "0,3,1,2");
}

TEST(GpuGroups, SavedA100PairsAndReplicasBeyondANode) {
  Fabric f = fabric_of(read(std::string(PARALLM_SOURCE_DIR) + "/tests/doctor/data/a100_pairs_nvlink.txt"));
  auto g = gpu_groups(f, 2, 2);
  EXPECT_EQ(g[0].gpus, (std::vector<int>{0, 1}));
  EXPECT_EQ(g[1].gpus, (std::vector<int>{2, 3}));
  // 4 replicas of 2 on a 4-GPU node: two per node, nodes 0 and 1.
  auto four = gpu_groups(f, 2, 4);
  EXPECT_EQ(four[2].node, 1);
  EXPECT_EQ(four[2].gpus, four[0].gpus);
}

}  // namespace
}  // namespace parallm::planner
