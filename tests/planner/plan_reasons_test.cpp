// The reasons and the report say what the numbers say: a "replicas beat
// tensor parallelism" sentence only when the replicas serve more per device
// and cost less; "needs N replicas" only with replicas; unset SLOs "none";
// memory in GiB; "–" (JSON null) for candidates without SLO capacity; the
// textbook KV formula set against the model's. Plus the seeds' example of 8
// GPUs as 4 x TP2 replicas on a box whose NVLink pairs are not consecutive.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>

#include "planner/model_catalog.h"
#include "planner/plan.h"
#include "planner/plan_output.h"
#include "topo/topo_matrix.h"

namespace parallm::planner {
namespace {

PlanRequest request(const char* model, const char* weights, const char* gpu, int gpus, const char* ic = "") {
  PlanRequest r;
  r.model = catalog_model(model);
  r.model_ref = r.model.hf_repo;
  r.weights = parse_weight_format(weights);
  r.gpu = catalog_gpu(gpu);
  r.fabric = fabric_from_interconnect(r.gpu, ic, gpus, 1);
  return r;
}

bool has_prefix(const Plan& p, const std::string& prefix, std::string* which = nullptr) {
  for (const auto& s : p.reasons)
    if (s.rfind(prefix, 0) == 0) {
      if (which) *which = s;
      return true;
    }
  return false;
}

const Candidate* find(const Plan& p, int tp, int pp) {
  for (const auto& c : p.candidates)
    if (c.layout.tp == tp && c.layout.pp == pp && c.layout.ep == 1) return &c;
  return nullptr;
}

TEST(PlanReasons, ReplicasBeatTpOnlyWhenTheNumbersSaySo) {
  int seen = 0;
  for (const char* gpu : {"A100-80G", "H100-SXM", "L40S", "RTX-4090"})
    for (double conc : {8.0, 64.0, 300.0}) {
      PlanRequest r = request("llama-2-7b", "fp16", gpu, 2);
      r.workload.concurrency = conc;
      Plan p = make_plan(r);
      std::string s;
      if (!has_prefix(p, "Replicas beat tensor parallelism", &s)) continue;
      ++seen;
      const Candidate& b = p.candidates[p.best];
      const Candidate* tp = find(p, 2, 1);
      ASSERT_NE(tp, nullptr);
      EXPECT_GE(b.capacity_tokens_per_s / b.layout.gpus(), tp->capacity_tokens_per_s / tp->layout.gpus()) << s;
      EXPECT_LE(b.cost_per_million_output_tokens, tp->cost_per_million_output_tokens) << s;
    }
  EXPECT_GT(seen, 0);
}

TEST(PlanReasons, NeedsReplicasOnlyWithReplicas) {
  int seen = 0;
  for (int gpus : {1, 2, 4})
    for (double conc : {16.0, 128.0, 512.0}) {
      PlanRequest r = request("llama-3.1-8b", "bf16", "L40S", gpus, "pcie4");
      r.workload.concurrency = conc;
      r.workload.tpot_slo_ms = 60;
      Plan p = make_plan(r);
      std::string s;
      if (has_prefix(p, "Can't keep up", &s) && s.find("replicas (data parallel)") != std::string::npos) {
        ++seen;
        EXPECT_TRUE(p.capacity.replicas > 1 || p.recommended.dp > 1) << s;
      }
    }
  EXPECT_GT(seen, 0);
}

TEST(PlanReasons, UnsetSlosSayNoneAndMemoryIsInGiB) {
  PlanRequest r = request("llama-2-7b", "fp16", "A100-80G", 1);
  r.workload.concurrency = 4;
  r.workload.tpot_slo_ms = 50;
  Plan p = make_plan(r);
  std::string s;
  ASSERT_TRUE(has_prefix(p, "SLOs (", &s));
  EXPECT_NE(s.find("TTFT: none"), std::string::npos) << s;
  EXPECT_EQ(s.find("<= 0 ms"), std::string::npos) << s;
  const std::string text = plan_to_text(p);
  EXPECT_NE(text.find("TTFT SLO: none"), std::string::npos);
  EXPECT_NE(text.find("80.0 GiB"), std::string::npos) << "an 80 GB A100 holds 80 GiB";
  EXPECT_EQ(text.find("85.9"), std::string::npos);
  for (const auto& reason : p.reasons) {
    for (size_t at = reason.find(" GB"); at != std::string::npos; at = reason.find(" GB", at + 1))
      EXPECT_EQ(reason.compare(at, 5, " GB/s"), 0) << "memory must be GiB: " << reason;
  }
}

TEST(PlanReasons, MissingTheSloShowsADashNotZero) {
  PlanRequest r = request("llama-2-70b", "fp16", "A100-80G", 4, "nvlink");
  r.workload.concurrency = 64;
  r.workload.tpot_slo_ms = 50;
  Plan p = make_plan(r);
  const nlohmann::json j = plan_to_json(p);
  int misses = 0;
  for (size_t i = 0; i < p.candidates.size(); ++i) {
    const Candidate& c = p.candidates[i];
    if (!c.fits || c.max_concurrency_slo > 0) continue;
    ++misses;
    EXPECT_TRUE(j["candidates"][i]["cost_per_million_output_tokens"].is_null()) << i;
  }
  ASSERT_GT(misses, 0);
  EXPECT_NE(plan_to_text(p).find("\u2013"), std::string::npos);
}

TEST(PlanReasons, TextbookKvFormulaAgainstGqa) {
  // Llama-2-70B: 80 layers x 8 KV heads of 128 x 2 (K and V) x 2 B = 327,680 B/token,
  // against the textbook 2 x 80 x 8192 x 2 B = 2,621,440 B/token.
  Plan p = make_plan(request("llama-2-70b", "fp16", "H100-SXM", 8));
  std::string s;
  ASSERT_TRUE(has_prefix(p, "KV cache: 328 KB per token, not the textbook", &s));
  EXPECT_NE(s.find("= 2621 KB"), std::string::npos) << s;
  EXPECT_NE(s.find("8 KV heads of 64"), std::string::npos) << s;
  // int4 weights carry group scales: 4.25 bits a weight, not the playbook's 0.5 bytes.
  Plan q = make_plan(request("llama-2-70b", "int4", "A100-80G", 1));
  ASSERT_TRUE(has_prefix(q, "Weights: ", &s));
  const double params = static_cast<double>(q.params.total);
  char want[160];
  std::snprintf(want, sizeof(want), "= %.1f GB (%.1f GiB), not the playbook's 4 bits a weight = %.1f GB",
                params * 4.25 / 8 / 1e9, params * 4.25 / 8 / (1024.0 * 1024 * 1024), params * 4 / 8 / 1e9);
  EXPECT_NE(s.find(want), std::string::npos) << s << "\n" << want;
  // Llama-2-7B has no GQA and head_dim x heads = hidden: no such sentence.
  EXPECT_FALSE(has_prefix(make_plan(request("llama-2-7b", "fp16", "H100-SXM", 1)), "KV cache:"));
}

TEST(PlanReasons, CostLineIsTheSeedsFormula) {
  PlanRequest r = request("llama-2-7b", "fp16", "A100-80G", 1);
  r.workload.concurrency = 32;
  r.economics.gpu_hour_price = 16.4;  // about 12,000 a month, the seeds' A100 rent
  r.economics.currency = "CNY";
  r.economics.power_price = 1.0;
  r.economics.ops_cost_month = 2000;
  r.economics.daily_requests = 50000;
  Plan p = make_plan(r);
  const MonthlyCost& c = p.cost;
  const double gpus = static_cast<double>(p.capacity.gpus);
  EXPECT_DOUBLE_EQ(c.cards_month, gpus * 16.4 * 720);
  EXPECT_DOUBLE_EQ(c.power_month, gpus * 0.4 * 720 * 1.0);  // the catalog's 400 W
  EXPECT_DOUBLE_EQ(c.total_month, c.cards_month + c.power_month + 2000);
  EXPECT_DOUBLE_EQ(c.cost_per_million_volume, c.total_month / (50000.0 * 256 * 30) * 1e6);
  EXPECT_DOUBLE_EQ(p.capacity.cost_per_month, c.total_month);
  std::string s;
  ASSERT_TRUE(has_prefix(p, "Cost per month (30 days)", &s));
  EXPECT_NE(s.find("CNY"), std::string::npos) << s;
}

TEST(PlanReasons, CandidatesAreCostedWithDepreciationAndPower) {
  // Bought cards (60,000 over 36 months) and 400 W at 1.2 a kWh: every
  // candidate's cost per million is at that device-hour, not the catalog rent.
  PlanRequest r = request("llama-2-7b", "fp16", "A100-80G", 2);
  r.workload.concurrency = 64;
  r.economics.gpu_price = 60000;
  r.economics.depreciation_months = 36;
  r.economics.power_price = 1.2;
  r.economics.currency = "CNY";
  const double hour = 60000.0 / 36 / 720 + 0.4 * 1.2;
  EXPECT_DOUBLE_EQ(device_hour_price(r), hour);
  Plan p = make_plan(r);
  int costed = 0;
  for (const auto& c : p.candidates) {
    if (c.max_concurrency_slo <= 0) continue;
    ++costed;
    EXPECT_NEAR(c.cost_per_million_output_tokens, hour * c.layout.gpus() / 3600.0 / c.capacity_tokens_per_s * 1e6,
                1e-9 * c.cost_per_million_output_tokens);
  }
  EXPECT_GT(costed, 0);
  EXPECT_EQ(p.cost.card_basis, "depreciation");
  EXPECT_NE(plan_to_text(p).find("CNY/Mtok"), std::string::npos);
}

TEST(PlanReasons, EightGpusAsFourTp2ReplicasOnNvLinkPairs) {
  // NVLink pairs (0,3) (1,2) (4,7) (5,6), two sockets: TP2 on consecutive
  // indices (0,1) would all-reduce over PCIe through the host bridge.
  std::ifstream f(std::string(PARALLM_SOURCE_DIR) + "/tests/planner/data/pairs_8gpu_topo.txt");
  std::stringstream ss;
  ss << f.rdbuf();
  PlanRequest r = request("llama-3.1-8b", "bf16", "A100-80G", 8);
  r.fabric = fabric_from_topology(r.gpu, topo::parse_nvidia_smi_topo(ss.str()), 1);
  r.pinned = Layout{4, 2, 1, 0};
  r.workload.concurrency = 256;
  Plan p = make_plan(r);
  ASSERT_EQ(p.recommended.dp, 4);
  const auto& lines = p.commands.trtllm_all.lines;
  ASSERT_EQ(lines.size(), 4u);
  const std::set<std::string> pairs = {"0,3", "1,2", "4,7", "5,6"};
  std::set<std::string> got;
  for (const auto& l : lines) {
    const std::string env = l.command.substr(0, l.command.find(' '));
    got.insert(env.substr(env.find('=') + 1));
  }
  EXPECT_EQ(got, pairs);
  // The first two replicas sit on different sockets.
  EXPECT_EQ(lines[0].command.rfind("CUDA_VISIBLE_DEVICES=0,3 ", 0), 0u) << lines[0].command;
  EXPECT_EQ(lines[1].command.rfind("CUDA_VISIBLE_DEVICES=4,7 ", 0), 0u) << lines[1].command;
  // vLLM's built-in data parallelism takes the GPUs in order, TP ranks first:
  // the line lists the same pairs in the same order.
  const std::string vllm = p.commands.vllm_all.lines.at(0).command;
  EXPECT_EQ(vllm.rfind("CUDA_VISIBLE_DEVICES=0,3,4,7,1,2,5,6 vllm serve ", 0), 0u) << vllm;
  // Without a topology the order is 0..7: no prefix.
  PlanRequest plain = request("llama-3.1-8b", "bf16", "A100-80G", 8);
  plain.pinned = r.pinned;
  plain.workload.concurrency = 256;
  EXPECT_EQ(make_plan(plain).commands.vllm_all.lines.at(0).command.rfind("vllm serve ", 0), 0u);
}

}  // namespace
}  // namespace parallm::planner
