// parallm doctor's recognisers over saved logs, /metrics and topologies
// (tests/doctor/data/, written in the shapes vLLM, SGLang and parallm print).
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "doctor/finding.h"
#include "doctor/log_findings.h"
#include "doctor/memory_findings.h"
#include "doctor/metrics_findings.h"
#include "doctor/topology_findings.h"
#include "planner/model_catalog.h"

namespace parallm::doctor {
namespace {

std::string data(const std::string& name) {
  std::ifstream f(std::string(PARALLM_SOURCE_DIR) + "/tests/doctor/data/" + name);
  EXPECT_TRUE(f.good()) << name;
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

bool has(const std::vector<std::string>& v, const std::string& needle) {
  for (const auto& s : v)
    if (s.find(needle) != std::string::npos) return true;
  return false;
}

// Index of the first fix mentioning `needle`; -1 when none does.
int fix_index(const Finding& f, const std::string& needle) {
  for (size_t i = 0; i < f.fixes.size(); ++i)
    if (f.fixes[i].find(needle) != std::string::npos) return static_cast<int>(i);
  return -1;
}

// The seeds' order: precision / weight size, max-model-len, memory cap, concurrency, then TP.
void expect_oom_order(const Finding& f, const char* len, const char* cap, const char* seqs, const char* tp) {
  int p = fix_index(f, "precision"), l = fix_index(f, len), c = fix_index(f, cap), s = fix_index(f, seqs),
      t = fix_index(f, tp);
  ASSERT_GE(p, 0);
  EXPECT_LT(p, l);
  EXPECT_LT(l, c);
  EXPECT_LT(c, s);
  EXPECT_LT(s, t);
}

TEST(DoctorLog, VllmTorchOomGivesNumbersAndOrderedFixes) {
  auto f = log_findings(data("vllm_torch_oom.log"));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].severity, Severity::kError);
  EXPECT_TRUE(has(f[0].evidence, "tried to allocate 2.00 GiB"));
  EXPECT_TRUE(has(f[0].evidence, "GPU 0: total capacity 79.19 GiB, free 1.50 GiB"));
  EXPECT_TRUE(has(f[0].evidence, "process 5151 holds 6.40 GiB"));
  // Two processes share the GPU: that comes first, then the checklist.
  EXPECT_EQ(fix_index(f[0], "more than one process"), 0);
  // An allocator failure with memory held elsewhere: the cap goes down, not up.
  EXPECT_GE(fix_index(f[0], "lower --gpu-memory-utilization"), 0);
  expect_oom_order(f[0], "--max-model-len", "--gpu-memory-utilization", "--max-num-seqs", "--tensor-parallel-size");
}

TEST(DoctorLog, VllmMaxSeqLenSuggestsTheKvLimit) {
  auto f = log_findings(data("vllm_max_seq_len.log"));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].severity, Severity::kError);
  EXPECT_TRUE(has(f[0].evidence, "max model len 131072 tokens, KV cache holds 45000 tokens"));
  EXPECT_TRUE(has(f[0].fixes, "--max-model-len to at most 45000"));
  EXPECT_GE(fix_index(f[0], "raise --gpu-memory-utilization"), 0);
  expect_oom_order(f[0], "--max-model-len", "--gpu-memory-utilization", "--max-num-seqs", "--tensor-parallel-size");
}

TEST(DoctorLog, VllmNoCacheBlocks) {
  auto f = log_findings(data("vllm_no_cache_blocks.log"));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_NE(f[0].title.find("no memory left for the KV cache"), std::string::npos);
  expect_oom_order(f[0], "--max-model-len", "--gpu-memory-utilization", "--max-num-seqs", "--tensor-parallel-size");
}

TEST(DoctorLog, SglangNotEnoughMemoryUsesSglangFlags) {
  auto f = log_findings(data("sglang_not_enough.log"));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_TRUE(has(f[0].evidence, "mem_fraction_static 0.78"));
  expect_oom_order(f[0], "--context-length", "--mem-fraction-static", "--max-running-requests", "--tp");
}

TEST(DoctorLog, SglangCudaOom) {
  auto f = log_findings(data("sglang_cuda_oom.log"));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_TRUE(has(f[0].evidence, "tried to allocate 512.00 MiB"));
  expect_oom_order(f[0], "--context-length", "--mem-fraction-static", "--max-running-requests", "--tp");
}

TEST(DoctorLog, ParallmKvBlocks) {
  auto f = log_findings(data("parallm_kv_blocks.log"));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_TRUE(has(f[0].evidence, "KV blocks that fit per device: 3, one sequence of 4096 tokens needs 256"));
  EXPECT_TRUE(has(f[0].evidence, "budget 1.00 GiB × memory utilization 0.90, weights 812.0 MiB, activations 64.0 MiB"));
  expect_oom_order(f[0], "--max-model-len", "--memory-utilization", "--max-num-seqs", "--tp");
}

TEST(DoctorLog, ParallmEngineCapacity) {
  auto f = log_findings(data("parallm_engine_capacity.log"));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_TRUE(has(f[0].evidence, "needs 14.20 GiB per device at tp=1, pp=1"));
  EXPECT_TRUE(has(f[0].evidence, "weights 12.50 GiB + KV cache 1.70 GiB for 8192 tokens"));
  EXPECT_TRUE(has(f[0].evidence, "cpu:0 has 8.00 GiB"));
}

TEST(DoctorLog, ParallmDeviceCapacity) {
  auto f = log_findings(
      "parallm: error: cpu:0 needs 9.00 GiB, has 8.00 GiB: 2.00 GiB more of kv cache does not fit "
      "on top of weights 7.00 GiB");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_TRUE(has(f[0].evidence, "cpu:0 needs 9.00 GiB, has 8.00 GiB"));
}

TEST(DoctorLog, UnknownAndEmptyGiveNothing) {
  EXPECT_TRUE(log_findings(data("unknown.log")).empty());
  EXPECT_TRUE(log_findings("").empty());
  EXPECT_TRUE(log_findings(std::string(100000, 'x')).empty());
  // A huge line with a known needle is matched on its head, never overflowing the regex engine.
  EXPECT_EQ(log_findings("CUDA out of memory. Tried to allocate 1.00 GiB" + std::string(100000, 'x')).size(), 1u);
}

TEST(DoctorMetrics, ParsesLabelsAndValues) {
  auto s = parse_metrics_text("# HELP x y\nparallm:kv_cache_usage_perc{device=\"cpu:0\"} 0.5\nbad line\nfoo 3\n");
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].labels.at("device"), "cpu:0");
  EXPECT_DOUBLE_EQ(s[0].value, 0.5);
  EXPECT_EQ(s[1].name, "foo");
}

TEST(DoctorMetrics, SmallKvPoolServer) {
  auto f = metrics_findings(data("small_kv_metrics.txt"));
  ASSERT_FALSE(f.empty());
  rank(&f);
  EXPECT_EQ(f[0].severity, Severity::kWarning);
  bool preempt = false;
  for (const auto& x : f) preempt |= x.title.find("preempted") != std::string::npos;
  EXPECT_TRUE(preempt);
}

TEST(DoctorMetrics, FullKvWaitingAndUnevenDevices) {
  const std::string text =
      "parallm:num_requests_running 8\nparallm:num_requests_waiting 5\n"
      "parallm:kv_cache_usage_perc{device=\"cuda:0\"} 0.97\nparallm:kv_cache_usage_perc{device=\"cuda:1\"} 0.41\n"
      "parallm:num_preemptions_total 0\n";
  auto f = metrics_findings(text);
  ASSERT_EQ(f.size(), 3u);
  EXPECT_NE(f[0].title.find("KV cache nearly full (97% used)"), std::string::npos);
  EXPECT_EQ(fix_index(f[0], "--kv-dtype q8_0"), 0);
  EXPECT_LT(fix_index(f[0], "--max-num-seqs"), fix_index(f[0], "router"));
  EXPECT_NE(f[1].title.find("5 requests waiting while 8 run"), std::string::npos);
  EXPECT_NE(f[2].title.find("uneven KV use"), std::string::npos);
  EXPECT_TRUE(has(f[2].evidence, "device=\"cuda:1\"} 0.41"));
}

TEST(DoctorMetrics, VllmNames) {
  auto f = metrics_findings(
      "vllm:gpu_cache_usage_perc{model_name=\"m\"} 0.95\nvllm:num_preemptions_total{model_name=\"m\"} 12\n");
  ASSERT_EQ(f.size(), 2u);
  EXPECT_NE(f[1].title.find("12 sequences preempted"), std::string::npos);
}

TEST(DoctorMetrics, HealthyAndUnknown) {
  auto ok = metrics_findings("parallm:kv_cache_usage_perc{device=\"cpu:0\"} 0.1\nparallm:num_requests_waiting 0\n");
  ASSERT_EQ(ok.size(), 1u);
  EXPECT_EQ(ok[0].severity, Severity::kInfo);
  EXPECT_TRUE(metrics_findings("").empty());
  EXPECT_TRUE(metrics_findings("go_goroutines 12\n").empty());
}

TEST(DoctorTopology, PcieTpAcrossSysAndNuma) {
  auto t = topo::parse_nvidia_smi_topo(data("pcie_4x4090.txt"));
  auto f = topology_findings(t, 4, 1);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].severity, Severity::kWarning);
  EXPECT_NE(f[0].title.find("crosses SYS"), std::string::npos);
  EXPECT_TRUE(has(f[0].evidence, "GPU0-GPU2: SYS"));
  EXPECT_TRUE(has(f[0].evidence, "NUMA affinity: GPU0=0 GPU1=0 GPU2=1 GPU3=1"));
  EXPECT_TRUE(has(f[0].fixes, "prefer --pp"));
  // tp=2 pp=2 keeps each TP pair behind one PCIe switch in one NUMA node, but PIX is still PCIe.
  auto g = topology_findings(t, 2, 2);
  ASSERT_EQ(g.size(), 2u);
  EXPECT_TRUE(has(g[0].evidence, "GPU0-GPU1: PIX"));
}

TEST(DoctorTopology, NvlinkPairsSuggestPpAcrossIslands) {
  auto t = topo::parse_nvidia_smi_topo(data("a100_pairs_nvlink.txt"));
  auto f = topology_findings(t, 4, 1);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_TRUE(has(f[0].evidence, "GPU0-GPU2: PHB"));
  EXPECT_TRUE(has(f[0].fixes, "--tp 2") && has(f[0].fixes, "--pp 2"));
  auto ok = topology_findings(t, 2, 2);
  ASSERT_EQ(ok.size(), 1u);
  EXPECT_EQ(ok[0].severity, Severity::kInfo);
  auto bad = topology_findings(t, 8, 1);
  ASSERT_EQ(bad.size(), 1u);
  EXPECT_EQ(bad[0].severity, Severity::kError);
}

TEST(DoctorTopology, NvSwitchBoardIsFine) {
  auto t = topo::parse_nvidia_smi_topo(data("dgx_h100.txt"));
  auto f = topology_findings(t, 4, 1);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].severity, Severity::kInfo);
  // TP 8 spans the two NUMA nodes but stays on NVLink: a note, not a warning.
  auto g = topology_findings(t, 8, 1);
  ASSERT_EQ(g.size(), 1u);
  EXPECT_EQ(g[0].severity, Severity::kInfo);
}

TEST(DoctorMemory, SeventyBOnOneGpuDoesNotFit) {
  auto names = planner::catalog_model_names();
  ASSERT_FALSE(names.empty());
  std::string big;
  for (const auto& n : names)
    if (n.find("70") != std::string::npos) big = n;
  if (big.empty()) GTEST_SKIP() << "no 70B model in the catalog";
  auto m = planner::catalog_model(big);
  auto f = memory_findings(m, planner::parse_weight_format("bf16"), planner::catalog_gpu("H100-SXM"), 1, 1, 8192);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].severity, Severity::kError);
  EXPECT_EQ(fix_index(f[0], "precision"), 0);
  auto ok = memory_findings(m, planner::parse_weight_format("bf16"), planner::catalog_gpu("H100-SXM"), 4, 1, 8192);
  EXPECT_EQ(ok[0].severity, Severity::kInfo);
}

}  // namespace
}  // namespace parallm::doctor
