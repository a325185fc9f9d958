// The report, the JSON and the reasons of a plan tell one story (issue #27):
// for the seeds' worked examples under both ranking bases (at the workload,
// at full capacity) and all three objectives, this reads the printed report
// and the JSON back and checks
//   - headline, the table's first row, the "Recommended" reason, the capacity
//     line and the vLLM launch line agree on tp/pp/dp and the device count;
//   - the table's cost column is the cost the ranking used, and says which;
//   - each ranking claim of the reasons ("costs more", "not enough cheaper",
//     "slower P95 TPOT", "fewer tokens/s", "replicas beat tp") holds for the
//     JSON numbers it cites, with the ranking's rule recomputed here.
// Every reason that compares the runner-up must match one of the known
// claims, so a new wording cannot slip past unchecked.
#include <gtest/gtest.h>

#include <cmath>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "planner/catalog_request.h"
#include "planner/model_catalog.h"
#include "planner/plan.h"
#include "planner/plan_output.h"

namespace parallm::planner {
namespace {

using nlohmann::json;

struct Case {
  std::string name;
  PlanRequest request;
};

PlanRequest with_load(PlanRequest r, double concurrency, Objective o = Objective::kAuto, double tpot_slo = 0,
                      double ttft_slo = 0) {
  r.workload.mode = LoadMode::kConcurrency;
  r.workload.concurrency = concurrency;
  r.workload.load_given = true;
  r.workload.objective = o;
  r.workload.tpot_slo_ms = tpot_slo;
  r.workload.ttft_slo_ms = ttft_slo;
  return r;
}

std::vector<Case> cases() {
  std::vector<Case> out;
  const PlanRequest a100x4 = catalog_request("llama-3.1-70b", "bf16", "A100-80G", 4, "nvlink");
  // The issue's reproduction, under every objective and without a workload.
  out.push_back({"70B 4xA100 c=1 auto", with_load(a100x4, 1)});
  out.push_back({"70B 4xA100 no workload", a100x4});
  out.push_back({"70B 4xA100 c=1 latency", with_load(a100x4, 1, Objective::kLatency)});
  out.push_back({"70B 4xA100 c=1 throughput", with_load(a100x4, 1, Objective::kThroughput)});
  out.push_back({"70B 4xA100 c=1 cost", with_load(a100x4, 1, Objective::kCost)});
  // The seeds' worked examples (seeds_test.cpp).
  out.push_back(
      {"13B 2x4090 PCIe c=50 TTFT 600",
       with_load(catalog_request("llama-2-13b", "fp16", "RTX-4090", 2, "pcie4"), 50, Objective::kAuto, 0, 600)});
  const PlanRequest l2 = catalog_request("llama-2-70b", "fp16", "A100-80G", 4, "nvlink");
  out.push_back({"70B fp16 4xA100 c=1 TPOT 30", with_load(l2, 1, Objective::kAuto, 30)});
  out.push_back({"70B fp16 4xA100 c=64 TPOT 100", with_load(l2, 64, Objective::kAuto, 100)});
  out.push_back({"70B fp16 4xA100 c=64 latency", with_load(l2, 64, Objective::kLatency, 100)});
  const PlanRequest seven = catalog_request("llama-2-7b", "fp16", "A100-80G", 4, "nvlink");
  out.push_back({"7B 4xA100 c=200", with_load(seven, 200)});
  out.push_back({"7B 4xA100 no workload", seven});
  out.push_back({"7B 4xA100 c=200 throughput", with_load(seven, 200, Objective::kThroughput)});
  out.push_back({"70B int4 1xA100 c=8", with_load(catalog_request("llama-2-70b", "int4", "A100-80G", 1), 8)});
  out.push_back(
      {"70B int8 8xA100 PCIe c=200 TPOT 42",
       with_load(catalog_request("llama-3.1-70b", "int8", "A100-80G", 8, "pcie4"), 200, Objective::kAuto, 42)});
  PlanRequest qps = catalog_request("llama-2-7b", "fp16", "A100-80G", 4, "nvlink");
  qps.workload.mode = LoadMode::kQps;
  qps.workload.qps = 20;
  qps.workload.load_given = true;
  qps.workload.ttft_slo_ms = 1000;
  out.push_back({"7B 4xA100 qps=20 TTFT 1000", qps});
  // MoE: attention data-parallel + expert-parallel layouts, one and two nodes.
  out.push_back({"DeepSeek-V3 8xH200 c=256 TPOT 100",
                 with_load(catalog_request("deepseek-v3", "fp8", "H200", 8), 256, Objective::kAuto, 100)});
  out.push_back({"DeepSeek-V3 8xH200 no workload", catalog_request("deepseek-v3", "fp8", "H200", 8)});
  out.push_back({"DeepSeek-V3 2x8xH100 c=256 TPOT 100",
                 with_load(catalog_request("deepseek-v3", "fp8", "H100-SXM", 8, "", 2), 256, Objective::kAuto, 100)});
  out.push_back({"Qwen3-235B 8xH200 c=128", with_load(catalog_request("qwen3-235b-a22b", "bf16", "H200", 8), 128)});
  out.push_back({"Qwen3-235B 8xH200 c=128 latency",
                 with_load(catalog_request("qwen3-235b-a22b", "bf16", "H200", 8), 128, Objective::kLatency)});
  return out;
}

std::string label(const json& l) {
  std::string s = "tp=" + std::to_string(l["tp"].get<int>()) + " pp=" + std::to_string(l["pp"].get<int>()) +
                  " dp=" + std::to_string(l["dp"].get<int>());
  if (l["ep"].get<int>() > 1) s += " ep=" + std::to_string(l["ep"].get<int>());
  return s;
}

int gpus_per_replica(const json& l) { return l["tp"].get<int>() * l["pp"].get<int>(); }

// The printed form of a number the reasons and the table cite.
std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

// Splits a table row on runs of two or more spaces (the label has single spaces).
std::vector<std::string> cells(const std::string& row) {
  std::vector<std::string> out;
  std::string cur;
  int spaces = 0;
  for (char ch : row) {
    if (ch == ' ') {
      ++spaces;
      continue;
    }
    if (spaces >= 2 || (spaces == 1 && cur.empty())) {
      if (!cur.empty()) out.push_back(cur);
      cur.clear();
    } else if (spaces == 1) {
      cur += ' ';
    }
    spaces = 0;
    cur += ch;
  }
  if (!cur.empty()) out.push_back(cur);
  return out;
}

const json* reason_starting(const json& reasons, const std::string& prefix) {
  for (const auto& s : reasons)
    if (s.get<std::string>().rfind(prefix, 0) == 0) return &s;
  return nullptr;
}

double ranked(const json& c) {
  return c["ranked_cost_per_million_output_tokens"].is_null()
             ? NAN
             : c["ranked_cost_per_million_output_tokens"].get<double>();
}

class PlanAgreement : public ::testing::TestWithParam<Case> {};

TEST_P(PlanAgreement, ReportJsonAndReasonsAgree) {
  const Plan plan = make_plan(GetParam().request);
  const json j = plan_to_json(plan);
  const std::string text = plan_to_text(plan);
  ASSERT_GE(j["recommendation"]["candidate_index"].get<int>(), 0);
  const json& rec = j["recommendation"]["layout"];
  const std::string rec_label = label(rec);
  const json& cands = j["candidates"];
  const json& win = cands[j["recommendation"]["candidate_index"].get<int>()];
  const int rec_gpus = rec["dp"].get<int>() * gpus_per_replica(rec);

  // The basis: auto ranks at the load only when a load is given.
  const bool at_load = j["ranking"]["cost_at"] == "load";
  const bool load_given = GetParam().request.workload.load_given;
  const Objective o = GetParam().request.workload.objective;
  EXPECT_EQ(at_load, load_given && o == Objective::kAuto);
  EXPECT_EQ(j["ranking_basis"], j["ranking"]["basis"]);
  if (!load_given) {
    EXPECT_NE(j["ranking_basis"].get<std::string>().find("no --concurrency or --qps given"), std::string::npos);
  }
  for (const auto& c : cands) {
    const json& want = at_load ? c["cost_per_million_output_tokens_at_load"] : c["cost_per_million_output_tokens"];
    EXPECT_EQ(c["ranked_cost_per_million_output_tokens"].is_null(), want.is_null());
    if (!want.is_null()) {
      EXPECT_DOUBLE_EQ(ranked(c), want.get<double>());
    }
  }

  // One layout: JSON winner, headline, reason, table row, capacity line, launch line.
  EXPECT_EQ(label(win["layout"]), rec_label);
  EXPECT_EQ(win["gpus"].get<int>(), rec_gpus);
  EXPECT_EQ(j["recommendation"]["gpus"].get<int>(), rec_gpus);
  std::smatch m;
  ASSERT_TRUE(std::regex_search(text, m,
                                std::regex("recommended: ([^\n]*?)(\n|   for the peak: ([0-9]+) "
                                           "replica\\(s\\) = ([0-9]+) devices\n)")))
      << text;
  EXPECT_EQ(m[1].str(), rec_label);
  if (m[3].matched) {
    EXPECT_EQ(std::stoll(m[3]), j["capacity"]["replicas"].get<int64_t>());
    EXPECT_EQ(std::stoll(m[4]), j["capacity"]["gpus"].get<int64_t>());
  } else {
    EXPECT_EQ(j["capacity"]["gpus"].get<int>(), rec_gpus);
  }
  const json& reasons = j["recommendation"]["reasons"];
  const json* recommended = reason_starting(reasons, "Recommended ");
  ASSERT_NE(recommended, nullptr);
  EXPECT_EQ(recommended->get<std::string>().rfind(
                "Recommended " + rec_label + " on " + std::to_string(rec_gpus) + " device(s):", 0),
            0u)
      << *recommended;

  const std::vector<std::string> lines = lines_of(text);
  size_t header = 0;
  while (header < lines.size() && lines[header].rfind("  layout ", 0) != 0) ++header;
  ASSERT_LT(header + 1, lines.size()) << text;
  const std::string cost_head = std::string(" USD/Mtok@") + (at_load ? "load" : "cap");
  EXPECT_EQ(lines[header].substr(lines[header].size() - cost_head.size()), cost_head) << lines[header];
  EXPECT_NE(text.find(at_load ? "Cost column: per million output tokens at the workload"
                              : "Cost column: per million output tokens at full SLO capacity"),
            std::string::npos);
  for (size_t i = 0; i < cands.size() && i < 12; ++i) {
    const std::vector<std::string> row = cells(lines[header + 1 + i]);
    ASSERT_EQ(row.size(), 12u) << lines[header + 1 + i];
    EXPECT_EQ(row[0], label(cands[i]["layout"]));
    EXPECT_EQ(row[1], std::to_string(cands[i]["gpus"].get<int>()));
    const double cost = ranked(cands[i]);
    EXPECT_EQ(row.back(), std::isfinite(cost) ? fixed(cost, 3) : "\u2013") << lines[header + 1 + i];
    if (cands[i]["fits"].get<bool>()) {
      const json& p = cands[i]["predicted"];
      EXPECT_EQ(row[6], p["ttft_p95_ms"].is_null() ? "\u2013" : fixed(p["ttft_p95_ms"].get<double>(), 0));
      EXPECT_EQ(row[8], p["tpot_p95_ms"].is_null() ? "\u2013" : fixed(p["tpot_p95_ms"].get<double>(), 1));
    }
  }

  const json& cap = j["capacity"];
  const int64_t replicas = cap["replicas"].get<int64_t>();
  EXPECT_EQ(cap["gpus"].get<int64_t>(), replicas * gpus_per_replica(rec));
  const int given = GetParam().request.fabric.gpus_per_node * GetParam().request.fabric.nodes;
  EXPECT_EQ(rec["dp"].get<int64_t>(), std::min<int64_t>(replicas, given / gpus_per_replica(rec)));
  EXPECT_NE(text.find("\nCapacity: " + std::to_string(replicas) + " replica(s), " +
                      std::to_string(cap["gpus"].get<int64_t>()) + " devices"),
            std::string::npos);
  if (const json* c = reason_starting(reasons, "Capacity: ")) {
    const std::string per_replica = "tp=" + std::to_string(rec["tp"].get<int>()) +
                                    " pp=" + std::to_string(rec["pp"].get<int>()) + " dp=1" +
                                    (rec["ep"].get<int>() > 1 ? " ep=" + std::to_string(rec["ep"].get<int>()) : "");
    EXPECT_NE(c->get<std::string>().find("-> " + std::to_string(replicas) + " replica(s) of " + per_replica + " = " +
                                         std::to_string(cap["gpus"].get<int64_t>()) + " devices"),
              std::string::npos)
        << *c;
  }
  const json& vllm = j["launch_all"]["vllm"]["lines"];
  ASSERT_FALSE(vllm.empty());
  const std::string serve = vllm.back()["command"].get<std::string>();
  EXPECT_NE(serve.find("--tensor-parallel-size " + std::to_string(rec["tp"].get<int>()) + " "), std::string::npos);
  EXPECT_NE(serve.find("--pipeline-parallel-size " + std::to_string(rec["pp"].get<int>()) + " "), std::string::npos);
  if (std::regex_search(serve, m, std::regex("--data-parallel-size (\\d+)"))) {
    EXPECT_EQ(std::stoi(m[1]), rec["dp"].get<int>());
  } else {
    EXPECT_EQ(rec["dp"].get<int>(), 1) << serve;
  }

  // "Ranked by <basis>: <the winner's number>".
  const json* basis = reason_starting(reasons, "Ranked by ");
  ASSERT_NE(basis, nullptr);
  const std::string bs = basis->get<std::string>();
  EXPECT_EQ(bs.rfind("Ranked by " + j["ranking_basis"].get<std::string>() + ": ", 0), 0u) << bs;
  const json& wp = win["predicted"];
  std::string winner_number;
  if (o == Objective::kLatency) {
    winner_number = "P95 TPOT " + fixed(wp["tpot_p95_ms"].get<double>(), 2) + " ms";
  } else if (o == Objective::kThroughput) {
    winner_number = fixed(wp["capacity_output_tokens_per_s"].get<double>(), 0) + " output tokens/s";
  } else if (std::isfinite(ranked(win))) {
    winner_number = fixed(ranked(win), 3) + " USD per million output tokens " +
                    (at_load ? "at the workload" : "at full SLO capacity");
  }
  EXPECT_NE(bs.find(winner_number), std::string::npos) << bs;

  // The runner-up's claim against its numbers and the winner's.
  const int ru_index = j["recommendation"]["runner_up_index"].get<int>();
  const json* ru_reason = reason_starting(reasons, "Runner-up ");
  ASSERT_EQ(ru_reason != nullptr, ru_index >= 0);
  if (ru_index >= 0) {
    const json& ru = cands[ru_index];
    const std::string s = ru_reason->get<std::string>();
    EXPECT_EQ(s.rfind("Runner-up " + label(ru["layout"]) + ": ", 0), 0u) << s;
    const json& rp = ru["predicted"];
    const std::string num = "([0-9]+(?:\\.[0-9]+)?)";
    if (std::regex_search(s, m,
                          std::regex("it costs " + num + " USD instead of " + num +
                                     " USD per million output tokens (at the workload|at full SLO capacity)"))) {
      EXPECT_EQ(m[1].str(), fixed(ranked(ru), 3));
      EXPECT_EQ(m[2].str(), fixed(ranked(win), 3));
      EXPECT_GT(ranked(ru), ranked(win));
      EXPECT_EQ(m[3].str(), at_load ? "at the workload" : "at full SLO capacity");
      EXPECT_EQ(plan.ranked_by, Objective::kCost);
    } else if (std::regex_search(s, m,
                                 std::regex("it is " + num + " USD against " + num +
                                            " USD per million output "
                                            "tokens .*not enough for ([0-9]+) instead of ([0-9]+) devices"))) {
      // Cheaper, but not by the ranking's 10% per doubling of devices per replica.
      EXPECT_EQ(m[1].str(), fixed(ranked(ru), 3));
      EXPECT_EQ(m[2].str(), fixed(ranked(win), 3));
      EXPECT_LE(ranked(ru), ranked(win));
      const int nr = std::stoi(m[3]), nb = std::stoi(m[4]);
      EXPECT_EQ(nr, gpus_per_replica(ru["layout"]));
      EXPECT_EQ(nb, gpus_per_replica(win["layout"]));
      EXPECT_GT(nr, nb);
      EXPECT_GT(ranked(ru) * (1 + 0.1 * std::log2(nr)), ranked(win) * (1 + 0.1 * std::log2(nb)));
    } else if (std::regex_search(s, m,
                                 std::regex("its P95 TPOT at the workload is " + num + " ms against " + num + " ms"))) {
      EXPECT_EQ(plan.ranked_by, Objective::kLatency);
      EXPECT_EQ(m[1].str(), fixed(rp["tpot_p95_ms"].get<double>(), 2));
      EXPECT_EQ(m[2].str(), fixed(wp["tpot_p95_ms"].get<double>(), 2));
      EXPECT_GT(rp["tpot_p95_ms"].get<double>(), wp["tpot_p95_ms"].get<double>());
    } else if (std::regex_search(
                   s, m, std::regex("it serves " + num + " output tokens/s at full SLO capacity against " + num))) {
      EXPECT_EQ(plan.ranked_by, Objective::kThroughput);
      EXPECT_EQ(m[1].str(), fixed(rp["capacity_output_tokens_per_s"].get<double>(), 0));
      EXPECT_EQ(m[2].str(), fixed(wp["capacity_output_tokens_per_s"].get<double>(), 0));
      EXPECT_LT(rp["capacity_output_tokens_per_s"].get<double>(), wp["capacity_output_tokens_per_s"].get<double>());
    } else if (s.find("it does not carry the workload within the SLOs") != std::string::npos) {
      EXPECT_FALSE(ru["meets_load"].get<bool>());
      EXPECT_TRUE(win["meets_load"].get<bool>());
    } else if (s.find("it misses the SLOs even with one request") != std::string::npos) {
      EXPECT_EQ(rp["max_concurrency_at_slo"].get<int64_t>(), 0);
      EXPECT_GT(wp["max_concurrency_at_slo"].get<int64_t>(), 0);
    } else if (s.find("it has no cost") != std::string::npos) {
      EXPECT_TRUE(std::isnan(ranked(ru)));
    } else {
      ADD_FAILURE() << "a runner-up claim this test does not check: " << s;
    }
  }

  // Replicas against tp=2: "beat" only when the replicas serve more per device
  // and cost less; "tp is faster and cheaper" only when it is, by the numbers
  // in the same sentence, the cost being the ranking's.
  for (const auto& reason : reasons) {
    const std::string s = reason.get<std::string>();
    const bool beat = s.rfind("Replicas beat tensor parallelism", 0) == 0;
    const bool tp_wins = s.rfind("Tensor parallelism is faster and cheaper", 0) == 0;
    if (!beat && !tp_wins) continue;
    ASSERT_TRUE(std::regex_search(s, m,
                                  std::regex("serves ([0-9]+) tokens/s per device at TPOT ([0-9.]+) ms, ([0-9.]+) "
                                             "USD per million (at the workload|at full SLO capacity); tp=2 serves "
                                             "([0-9]+) per device at TPOT ([0-9.]+) ms, ([0-9.]+) USD")))
        << s;
    EXPECT_EQ(m[4].str(), plan.ranked_by == Objective::kCost && at_load ? "at the workload" : "at full SLO capacity");
    const json* tp2 = nullptr;
    for (const auto& c : cands)
      if (c["layout"]["tp"] == 2 && c["layout"]["pp"] == 1 && c["layout"]["ep"] == 1) tp2 = &c;
    ASSERT_NE(tp2, nullptr);
    const char* cost_key =
        plan.ranked_by == Objective::kCost ? "ranked_cost_per_million_output_tokens" : "cost_per_million_output_tokens";
    EXPECT_EQ(m[3].str(), fixed(win[cost_key].get<double>(), 3));
    EXPECT_EQ(m[7].str(), fixed((*tp2)[cost_key].get<double>(), 3));
    if (beat) {
      EXPECT_GE(std::stod(m[1]), std::stod(m[5]));
      EXPECT_LE(win[cost_key].get<double>(), (*tp2)[cost_key].get<double>());
    } else {
      EXPECT_LT(std::stod(m[6]), std::stod(m[2]));
      EXPECT_LT((*tp2)[cost_key].get<double>(), win[cost_key].get<double>());
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Seeds, PlanAgreement, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<Case>& i) {
                           std::string n;
                           for (char ch : i.param.name) n += std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
                           return n;
                         });

}  // namespace
}  // namespace parallm::planner
