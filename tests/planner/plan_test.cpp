// Decisions of the planner on the playbook's scenarios, the layout rules,
// the fabric built from saved topologies, the JSON schema and the errors.
#include "planner/plan.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sstream>

#include "planner/model_catalog.h"
#include "planner/plan_output.h"
#include "util/check.h"

namespace parallm::planner {
namespace {

const std::string kTopo = std::string(PARALLM_SOURCE_DIR) + "/tests/topo/data/";

PlanRequest request(const char* model, const char* weights, const char* gpu, int gpus, const char* ic = "") {
  PlanRequest r;
  r.model = catalog_model(model);
  r.model_ref = r.model.hf_repo;
  r.weights = parse_weight_format(weights);
  r.gpu = catalog_gpu(gpu);
  r.fabric = fabric_from_interconnect(r.gpu, ic, gpus, 1);
  r.workload.input_len = 1024;
  r.workload.output_len = 256;
  return r;
}

std::string text_of(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

TEST(Plan, SevenBThatFitsGetsReplicasNotTp) {
  PlanRequest r = request("llama-2-7b", "fp16", "A100-80G", 2);
  r.workload.concurrency = 300;
  Plan p = make_plan(r);
  ASSERT_GE(p.best, 0);
  EXPECT_EQ(p.recommended.tp, 1);
  // 300 users need more than the 2 cards given: the recommendation runs both,
  // the capacity line says how many the peak needs.
  EXPECT_EQ(p.recommended.dp, 2);
  EXPECT_GT(p.capacity.replicas, 2);
  EXPECT_EQ(p.verdict, Verdict::kCantKeepUp);  // fits one card, the load needs replicas
  bool explained = false;
  for (const auto& s : p.reasons) explained = explained || s.find("Replicas beat tensor parallelism") == 0;
  EXPECT_TRUE(explained);
}

TEST(Plan, SevenBAtLightLoadIsFineOnOneDevice) {
  PlanRequest r = request("llama-2-7b", "fp16", "A100-80G", 1);
  r.workload.concurrency = 4;
  r.workload.tpot_slo_ms = 50;
  Plan p = make_plan(r);
  EXPECT_EQ(p.verdict, Verdict::kFine);
  EXPECT_EQ(p.capacity.replicas, 1);
  EXPECT_EQ(p.capacity.gpus, 1);
}

TEST(Plan, SeventyBFp16DoesntFitOneCardAndTakesTp2) {
  PlanRequest one = request("llama-2-70b", "fp16", "H100-SXM", 1);
  Plan p1 = make_plan(one);
  EXPECT_EQ(p1.verdict, Verdict::kDoesntFit);
  EXPECT_EQ(p1.best, -1);
  EXPECT_EQ(p1.recommended.tp * p1.recommended.pp, 2);  // the smallest split that fits
  bool quant = false;
  for (const auto& s : p1.reasons) quant = quant || s.find("Quantization alternative: at fp8") == 0;
  EXPECT_TRUE(quant) << "fp8 (~69 GB) already fits one 80 GB card";

  Plan p2 = make_plan(request("llama-2-70b", "fp16", "H100-SXM", 2));
  EXPECT_EQ(p2.verdict, Verdict::kDoesntFit);
  ASSERT_GE(p2.best, 0);
  EXPECT_EQ(p2.recommended.tp, 2);
  EXPECT_GT(p2.candidates[p2.best].memory.kv_capacity_tokens, 20000);

  Plan p3 = make_plan(request("llama-2-70b", "int4", "H100-SXM", 1));
  EXPECT_EQ(p3.verdict, Verdict::kFine);
}

TEST(Plan, ThirteenBOnTwo4090sOverPcie) {
  Plan p = make_plan(request("llama-2-13b", "fp16", "RTX-4090", 2));
  EXPECT_EQ(p.verdict, Verdict::kDoesntFit);
  ASSERT_GE(p.best, 0);
  EXPECT_EQ(p.recommended.tp * p.recommended.pp, 2);
  EXPECT_FALSE(p.candidates[p.best].tp_link.fast);
}

TEST(Plan, TpOverPcieIsExplainedAndReplicasPreferred) {
  PlanRequest r = request("llama-3.1-8b", "bf16", "L40S", 4);
  r.workload.concurrency = 64;
  Plan p = make_plan(r);
  EXPECT_EQ(p.recommended.tp, 1);
  bool pcie = false;
  for (const auto& s : p.reasons) pcie = pcie || s.find("over PCIe4") != std::string::npos;
  EXPECT_TRUE(pcie);
}

TEST(Plan, CapacityIsPeakOverPerReplicaTimesHeadroom) {
  PlanRequest r = request("llama-3.1-8b", "bf16", "H100-SXM", 8);
  r.workload.tpot_slo_ms = 30;
  r.workload.ttft_slo_ms = 2000;
  r.economics.peak_concurrency = 1000;
  r.economics.headroom = 1.5;
  Plan p = make_plan(r);
  ASSERT_GE(p.best, 0);
  const Capacity& c = p.capacity;
  ASSERT_GT(c.per_replica, 0);
  EXPECT_EQ(c.replicas, static_cast<int64_t>(std::ceil(1000.0 / c.per_replica * 1.5)));
  EXPECT_EQ(c.gpus, c.replicas * p.recommended.gpus_per_replica());
  // The seeds' month: 30 days of rent (cost_model.h; power and ops not given).
  EXPECT_DOUBLE_EQ(c.cost_per_month, c.gpus * r.gpu.price_per_hour * 720.0);
}

TEST(Plan, PinnedLayoutIsPredictedAsGiven) {
  PlanRequest r = request("llama-2-70b", "fp16", "H100-SXM", 8);
  r.pinned = Layout{0, 4, 2, 0};
  Plan p = make_plan(r);
  for (const auto& c : p.candidates) {
    EXPECT_EQ(c.layout.tp, 4);
    EXPECT_EQ(c.layout.pp, 2);
  }
}

TEST(Plan, LayoutRules) {
  ModelSpec m = catalog_model("qwen2.5-7b");  // 28 heads, 4 KV heads
  for (const Layout& l : enumerate_layouts(m, 8, 1, Layout{0, 0, 0, 0})) {
    EXPECT_EQ(m.config.n_head % l.tp, 0);
    EXPECT_TRUE(m.config.n_kv_head % l.tp == 0 || l.tp % m.config.n_kv_head == 0);
    EXPECT_LE(l.gpus(), 8);
  }
  ModelSpec mix = catalog_model("mixtral-8x7b");
  bool has_ep = false;
  bool has_dp_attention_ep = false;
  for (const Layout& l : enumerate_layouts(mix, 8, 1, Layout{0, 0, 0, 0})) {
    EXPECT_EQ(mix.config.n_expert % l.ep, 0);
    // ep splits the experts inside the tp group, or spans ep/tp attention
    // replicas (no longer only a divisor of tp: issue #27).
    const bool inside_tp = l.tp % l.ep == 0;
    const bool over_dp = l.ep % l.tp == 0 && (l.dp * l.tp) % l.ep == 0 && l.pp == 1;
    EXPECT_TRUE(inside_tp || over_dp) << l.dp << "x" << l.tp << "x" << l.pp << " ep" << l.ep;
    has_ep = has_ep || (l.ep > 1 && inside_tp);
    has_dp_attention_ep = has_dp_attention_ep || (l.ep > l.tp);
  }
  EXPECT_TRUE(has_ep);
  EXPECT_TRUE(has_dp_attention_ep);
}

TEST(Plan, ImpossibleSloIsAnInputError) {
  PlanRequest r = request("llama-2-70b", "fp16", "A100-80G", 8);
  r.workload.tpot_slo_ms = 0.5;  // faster than reading the weights once
  try {
    make_plan(r);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("impossible SLO"), std::string::npos);
  }
  PlanRequest bad = request("llama-2-7b", "fp16", "A100-80G", 1);
  bad.workload.ttft_slo_ms = -1;
  EXPECT_THROW(make_plan(bad), InputError);
  PlanRequest too_many = request("llama-2-7b", "fp16", "A100-80G", 2);
  too_many.pinned = Layout{0, 4, 0, 0};
  EXPECT_THROW(make_plan(too_many), InputError);
}

TEST(Plan, JsonHasTheFixedFields) {
  PlanRequest r = request("mixtral-8x7b", "bf16", "H100-SXM", 4);
  r.workload.mode = LoadMode::kOffline;
  r.pinned.ep = 1;  // a tensor-parallel plan: llama.cpp has no expert parallelism to launch
  nlohmann::json j = plan_to_json(make_plan(r));
  for (const char* k : {"params_total", "params_active", "weight_bytes", "kv_bytes_per_token"})
    EXPECT_TRUE(j["model"].contains(k)) << k;
  ASSERT_FALSE(j["candidates"].empty());
  const auto& c = j["candidates"][0];
  for (const char* k : {"layout", "gpus", "fits", "memory_per_device", "kv_capacity_tokens", "predicted",
                        "cost_per_million_output_tokens"})
    EXPECT_TRUE(c.contains(k)) << k;
  for (const char* k : {"dp", "tp", "pp", "ep"}) EXPECT_TRUE(c["layout"].contains(k)) << k;
  for (const char* k : {"weights_bytes", "kv_bytes", "activation_bytes", "overhead_bytes", "total_bytes"})
    EXPECT_TRUE(c["memory_per_device"].contains(k)) << k;
  for (const char* k : {"ttft_ms", "tpot_ms", "output_tokens_per_s", "max_concurrency_at_slo"})
    EXPECT_TRUE(c["predicted"].contains(k)) << k;
  EXPECT_TRUE(j["recommendation"].contains("layout"));
  EXPECT_TRUE(j["recommendation"]["reasons"].is_array());
  const std::string verdict = j["recommendation"]["verdict"];
  EXPECT_TRUE(verdict == "fine" || verdict == "doesnt_fit" || verdict == "cant_keep_up");
  EXPECT_TRUE(j["capacity"].contains("replicas"));
  EXPECT_TRUE(j["capacity"].contains("gpus"));
  const std::string vllm = j["launch"]["vllm"];
  EXPECT_EQ(vllm.rfind("vllm serve mistralai/Mixtral-8x7B-v0.1 --tensor-parallel-size", 0), 0u) << vllm;
  for (const char* flag : {"--pipeline-parallel-size", "--gpu-memory-utilization", "--max-model-len", "--max-num-seqs"})
    EXPECT_NE(vllm.find(flag), std::string::npos) << flag;
  EXPECT_NE(std::string(j["launch"]["sglang"]).find("--tp-size "), std::string::npos);
  EXPECT_NE(std::string(j["launch"]["trtllm"]).find("--tp_size"), std::string::npos);
  // llama.cpp loads GGUF (here a bf16 conversion of the checkpoint), never the safetensors id.
  EXPECT_NE(std::string(j["launch"]["llamacpp"]).find("llama-server -m ./mixtral-8x7b-BF16.gguf "), std::string::npos)
      << j["launch"]["llamacpp"];
  EXPECT_FALSE(plan_to_text(make_plan(r)).empty());
  EXPECT_EQ(std::string(j["launch"]["parallm"]).find("--kv-dtype"), std::string::npos);
}

// A plan sized for an 8-bit cache launches servers with one.
TEST(Plan, EightBitKvCacheReachesTheLaunchLines) {
  for (double bytes : {1.0, 1.0625}) {
    PlanRequest r = request("llama-2-7b", "fp16", "A100-80G", 1);
    r.kv_elem_bytes = bytes;
    const Plan p = make_plan(r);
    ASSERT_GE(p.best, 0);
    EXPECT_NE(p.commands.vllm.find("--kv-cache-dtype fp8"), std::string::npos) << p.commands.vllm;
    EXPECT_NE(p.commands.llamacpp.find("-ctk q8_0 -ctv q8_0"), std::string::npos) << p.commands.llamacpp;
  }
}

TEST(Fabric, FromSavedTopologies) {
  GpuSpec h100 = catalog_gpu("H100-SXM");
  Fabric dgx = fabric_from_topology(h100, topo::parse_nvidia_smi_topo(text_of(kTopo + "dgx_h100.txt")), 1);
  EXPECT_EQ(fast_group_size(dgx), 8);
  EXPECT_DOUBLE_EQ(best_group(dgx, 8).bw_gbps, 450);  // NV18 x 25 GB/s
  GpuSpec a100 = catalog_gpu("A100-80G");
  Fabric pairs = fabric_from_topology(a100, topo::parse_nvidia_smi_topo(text_of(kTopo + "a100_pairs_nvlink.txt")), 1);
  EXPECT_EQ(fast_group_size(pairs), 2);
  GroupLink g2 = best_group(pairs, 2);
  EXPECT_TRUE(g2.fast);
  EXPECT_DOUBLE_EQ(g2.bw_gbps, 300);
  EXPECT_FALSE(best_group(pairs, 4).fast);
  EXPECT_DOUBLE_EQ(best_group(pairs, 4).bw_gbps, 32 * 0.8);  // PHB on PCIe4
  GpuSpec rtx = catalog_gpu("RTX-4090");
  Fabric pcie = fabric_from_topology(rtx, topo::parse_nvidia_smi_topo(text_of(kTopo + "pcie_4x4090.txt")), 1);
  GroupLink p2 = best_group(pcie, 2);
  EXPECT_EQ(p2.gpus, (std::vector<int>{0, 1}));  // the PIX pair, not across sockets
  EXPECT_DOUBLE_EQ(p2.bw_gbps, 32);
  EXPECT_DOUBLE_EQ(best_group(pcie, 4).bw_gbps, 16);  // SYS halves it
  EXPECT_THROW(fabric_from_interconnect(rtx, "nvlink", 2, 1), InputError);
  EXPECT_THROW(fabric_from_interconnect(rtx, "infiniband", 2, 1), InputError);
}

TEST(PerfModel, RingAllReduceAndMoeTouchedExperts) {
  // tp=2 over a 100 GB/s link, link_eff 1: a decode step of batch 1 grows by
  // exactly 2 all-reduces per layer = layers * 2 * (2*(1/2)*msg/bw + latency).
  ModelSpec m = catalog_model("llama-2-7b");
  PerfInputs in;
  in.model = &m;
  in.params = count_params(m);
  in.weights = parse_weight_format("fp16");
  in.gpu = catalog_gpu("A100-80G");
  in.k.link_eff = 1.0;
  in.layout = Layout{1, 2, 1, 1};
  in.memory = device_memory(m, in.params, in.weights, 2, in.gpu, in.layout, MemoryOptions{}, 4096);
  in.tp_link.bw_gbps = 100;
  in.tp_link.latency_us = 0;
  const double with_link = decode_step_s(in, 1, 100);
  in.tp_link.bw_gbps = 1e12;
  const double free_link = decode_step_s(in, 1, 100);
  const double msg = 4096 * 2.0;
  EXPECT_NEAR(with_link - free_link, 32 * 2 * (msg / 100e9 - msg / 1e21), 1e-12);
}

TEST(Plan, LoadFlagsBadInputIsAnInputError) {
  EXPECT_THROW(parse_objective("fastest"), InputError);
  EXPECT_EQ(parse_objective("latency"), Objective::kLatency);
  PlanRequest r = request("mixtral-8x7b", "bf16", "H100-SXM", 8);
  r.expert_imbalance = 0.5;  // the busiest rank cannot carry less than the mean
  EXPECT_THROW(make_plan(r), InputError);
  r.expert_imbalance = 0;
  r.memory.max_num_batched_tokens = 0;
  EXPECT_THROW(make_plan(r), InputError);
}

TEST(Plan, PoissonLoadReportsPercentilesAndRequestCapacity) {
  PlanRequest r = request("llama-3.1-8b", "bf16", "H100-SXM", 2);
  r.workload.mode = LoadMode::kQps;
  r.workload.qps = 4;
  r.workload.load_given = true;
  r.workload.ttft_slo_ms = 500;
  r.workload.tpot_slo_ms = 40;
  Plan p = make_plan(r);
  ASSERT_GE(p.best, 0);
  const Candidate& b = p.candidates[p.best];
  EXPECT_TRUE(b.at_load.stable);
  EXPECT_LE(b.at_load.ttft_p50_ms, b.at_load.ttft_p95_ms);
  EXPECT_LE(b.at_load.tpot_p50_ms, b.at_load.tpot_p95_ms);
  EXPECT_LE(b.at_load.ttft_p95_ms, 500);
  EXPECT_GT(b.max_qps_slo, 0);
  EXPECT_EQ(p.capacity.unit, "requests/s");
  EXPECT_DOUBLE_EQ(p.capacity.per_replica, b.max_qps_slo);
  EXPECT_EQ(p.capacity.replicas, static_cast<int64_t>(std::ceil(4.0 / b.max_qps_slo * r.economics.headroom - 1e-9)));
  EXPECT_EQ(p.recommended.dp, p.capacity.replicas);
  // Past what one replica serves, the open queue grows without bound.
  r.workload.qps = 1e4;
  r.pinned = Layout{1, 1, 1, 0};
  r.workload.ttft_slo_ms = r.workload.tpot_slo_ms = 0;
  Plan q = make_plan(r);
  EXPECT_FALSE(q.candidates[0].at_load.stable);
  EXPECT_FALSE(q.candidates[0].meets_slo);
}

}  // namespace
}  // namespace parallm::planner
