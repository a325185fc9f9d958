// Predictions against published measurements. Every case cites its source;
// the efficiency constants are the global defaults of PerfConstants, never
// set per case. Latency figures: kTolerance (40%), except the outlier marked
// below (optimistic, within kOutlierFactor). Throughput tables: split into a
// fit half (looked at when choosing the model) and a holdout half (never
// tuned on); both halves' median and share within 25% are bounded at issue
// #27's target; docs/plan.md lists every figure and explains them.
//
// Sources:
//  [T] NVIDIA TensorRT-LLM, docs/source/performance.md ("Performance of
//      TensorRT-LLM", data for v0.6.1, tables "Peak Throughput" H100 FP8 and
//      A100 FP16; "Low Latency" v0.5 first-token latency at batch 1),
//      https://github.com/NVIDIA/TensorRT-LLM/blob/release/0.6.1/docs/source/performance.md
//      Static batches of the listed size: exactly the closed-loop model.
//  [T9] the same page at release/0.9.0 ("Peak Throughput", data for v0.9.0,
//      H200 FP8, H100 FP8, A100 FP16, out tok/s/GPU), also
//      https://nvidia.github.io/TensorRT-LLM/performance/perf-overview.html of
//      that release. FP8 rows use an FP8 KV cache (kv_bytes 1).
//  [V1] J. Musgrave, "vLLM throughput-latency sweep on NVIDIA A100",
//      https://johnmusgrave.com/p/vllm-throughput-latency-sweep-on : Llama-3.1-8B-Instruct
//      BF16, A100 40GB, vLLM 0.23, 1024 in / 128 out: ~75 tokens/s at concurrency 1.
//  [V2] InferenceBench concurrency-sweep recipe,
//      https://yobitelcomm.github.io/bench/recipes/concurrency-sweep/ : Llama-3.1-8B-Instruct
//      fp16 on one H100-80GB-HBM3 with vLLM 0.21: TPOT p50 6.48 ms at concurrency 1.
//  [M] mlc-ai/llm-perf-bench pull request #1 (README "RTX 4090 (CUDA 11.8)"): 4-bit
//      Llama-2 single-stream decode, MLC: 7B 191.0 tokens/s, 13B 108.8 tokens/s.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "planner/model_catalog.h"
#include "planner/perf_model.h"
#include "planner/plan.h"

namespace parallm::planner {
namespace {

constexpr double kTolerance = 0.40;
constexpr double kOutlierFactor = 3.0;
// Throughput tables (docs/plan.md, "Accuracy against published measurements").
// Issue #27's target on both halves: median |error| <= 12%, >= 85% within 25%.
constexpr double kFitMedian = 0.12, kFitWithin25 = 0.85, kHoldoutMedian = 0.12, kHoldoutWithin25 = 0.85;
constexpr double kWorst = 0.30;  // |error|; 23% today (docs/plan.md)

struct Rig {
  ModelSpec model;
  PerfInputs in;
};

void rig(Rig& s, const char* model, const char* gpu, const char* weights, double kv_bytes, int tp) {
  s.model = catalog_model(model);
  PerfInputs& in = s.in;
  in.model = &s.model;
  in.params = count_params(s.model);
  in.weights = parse_weight_format(weights);
  in.kv_elem_bytes = kv_bytes;
  in.gpu = catalog_gpu(gpu);
  in.layout = Layout{1, tp, 1, 1};
  Fabric f = fabric_from_interconnect(in.gpu, "", 8, 1);
  in.tp_link = best_group(f, tp);
  MemoryOptions opt;
  in.memory = device_memory(s.model, in.params, in.weights, kv_bytes, in.gpu, in.layout, opt, 4096);
}

double rel_err(double predicted, double measured) { return (predicted - measured) / measured; }

struct Throughput {
  const char* model;
  const char* gpu;
  const char* weights;
  double kv_bytes;  // KV cache element bytes the benchmark used (fp8 KV on the FP8 rows)
  int tp, batch, in_len, out_len;
  double measured;  // output tokens/s (per GPU when per_gpu)
  bool per_gpu;
  const char* source;
  int engine;  // the TensorRT-LLM release of the table: kV061 or kV090
};

constexpr int kV061 = 61, kV090 = 90;

// Whether the release's decode attention reads a KV head once for its query
// group (perf_model.h, grouped_kv_reads). v0.6.1: masked multi-head attention
// only, once per query head. v0.9.0: XQA, "experimental, limited
// configurations, LLAMA2 70B is one" (its docs/source/gpt_attention.md), with
// precompiled kernels per query-heads-per-KV-head count; the counts in the
// repository's kernel list are 8 and 16 (Mistral and Mixtral have 4, which
// fall back to masked MHA). An inference from the docs and kernel names, not
// a read of v0.9.0's dispatch code (docs/plan.md).
bool engine_groups_kv(int engine, const ModelSpec& m) {
  if (engine == kV061 || m.config.n_kv_head <= 0 || m.config.n_kv_head == m.config.n_head) return false;
  const int64_t group = m.config.n_head / m.config.n_kv_head;
  return group == 8 || group == 16;
}

// Fit half: the constants and the model's terms were chosen looking at these.
// [T] v0.6.1 (H100 FP8, A100 FP16) and [T9] v0.9.0 H100 FP8, static batches.
const Throughput kFit[] = {
    {"llama-2-7b", "H100-SXM", "fp8", 1, 1, 768, 128, 128, 19694, true, "T H100", kV061},
    {"llama-2-7b", "H100-SXM", "fp8", 1, 1, 112, 128, 2048, 6818, true, "T H100", kV061},
    {"llama-2-7b", "H100-SXM", "fp8", 1, 1, 80, 2048, 128, 2244, true, "T H100", kV061},
    {"llama-2-7b", "H100-SXM", "fp8", 1, 1, 48, 2048, 2048, 2740, true, "T H100", kV061},
    {"llama-2-70b", "H100-SXM", "fp8", 1, 2, 1024, 128, 128, 2657, true, "T H100", kV061},
    {"llama-2-70b", "H100-SXM", "fp8", 1, 4, 480, 128, 2048, 1486, true, "T H100", kV061},
    {"llama-2-70b", "H100-SXM", "fp8", 1, 2, 96, 2048, 128, 306, true, "T H100", kV061},
    {"llama-2-70b", "H100-SXM", "fp8", 1, 2, 64, 2048, 2048, 547, true, "T H100", kV061},
    {"llama-2-7b", "A100-80G", "fp16", 2, 1, 384, 128, 128, 5586, false, "T A100", kV061},
    {"llama-2-7b", "A100-80G", "fp16", 2, 1, 60, 128, 2048, 1928, false, "T A100", kV061},
    {"llama-2-7b", "A100-80G", "fp16", 2, 1, 52, 2048, 128, 591, false, "T A100", kV061},
    {"mistral-7b", "H100-SXM", "fp8", 1, 1, 896, 128, 128, 20404, true, "T9 H100", kV090},
    {"mistral-7b", "H100-SXM", "fp8", 1, 1, 120, 128, 2048, 8623, true, "T9 H100", kV090},
    {"mistral-7b", "H100-SXM", "fp8", 1, 1, 84, 2048, 128, 2405, true, "T9 H100", kV090},
    {"mistral-7b", "H100-SXM", "fp8", 1, 1, 56, 2048, 2048, 3731, true, "T9 H100", kV090},
    {"mixtral-8x7b", "H100-SXM", "fp8", 1, 2, 512, 128, 128, 5255, true, "T9 H100", kV090},
    {"mixtral-8x7b", "H100-SXM", "fp8", 1, 2, 128, 128, 2048, 3408, true, "T9 H100", kV090},
    {"mixtral-8x7b", "H100-SXM", "fp8", 1, 2, 64, 2048, 128, 588, true, "T9 H100", kV090},
    {"mixtral-8x7b", "H100-SXM", "fp8", 1, 2, 32, 2048, 2048, 1317, true, "T9 H100", kV090},
    {"llama-2-7b", "H100-SXM", "fp8", 1, 1, 896, 128, 128, 19854, true, "T9 H100", kV090},
    {"llama-2-7b", "H100-SXM", "fp8", 1, 1, 120, 128, 2048, 6944, true, "T9 H100", kV090},
    {"llama-2-7b", "H100-SXM", "fp8", 1, 1, 84, 2048, 128, 2163, true, "T9 H100", kV090},
    {"llama-2-7b", "H100-SXM", "fp8", 1, 1, 56, 2048, 2048, 2826, true, "T9 H100", kV090},
    {"llama-2-70b", "H100-SXM", "fp8", 1, 2, 1024, 128, 128, 3214, true, "T9 H100", kV090},
    {"llama-2-70b", "H100-SXM", "fp8", 1, 4, 512, 128, 2048, 2725, true, "T9 H100", kV090},
    {"llama-2-70b", "H100-SXM", "fp8", 1, 2, 96, 2048, 128, 346, true, "T9 H100", kV090},
    {"llama-2-70b", "H100-SXM", "fp8", 1, 2, 64, 2048, 2048, 1011, true, "T9 H100", kV090},
};

// Holdout half: never used to choose anything; [T9] v0.9.0 H200 FP8 and A100 FP16.
const Throughput kHoldout[] = {
    {"mistral-7b", "H200", "fp8", 1, 1, 896, 128, 128, 20460, true, "T9 H200", kV090},
    {"mistral-7b", "H200", "fp8", 1, 1, 120, 128, 2048, 8950, true, "T9 H200", kV090},
    {"mistral-7b", "H200", "fp8", 1, 1, 64, 2048, 128, 2423, true, "T9 H200", kV090},
    {"mistral-7b", "H200", "fp8", 1, 1, 56, 2048, 2048, 3867, true, "T9 H200", kV090},
    {"mixtral-8x7b", "H200", "fp8", 1, 2, 1024, 128, 128, 5444, true, "T9 H200", kV090},
    {"mixtral-8x7b", "H200", "fp8", 1, 2, 256, 128, 2048, 4973, true, "T9 H200", kV090},
    {"mixtral-8x7b", "H200", "fp8", 1, 2, 64, 2048, 128, 605, true, "T9 H200", kV090},
    {"mixtral-8x7b", "H200", "fp8", 1, 2, 64, 2048, 2048, 1821, true, "T9 H200", kV090},
    {"llama-2-7b", "H200", "fp8", 1, 1, 896, 128, 128, 20618, true, "T9 H200", kV090},
    {"llama-2-7b", "H200", "fp8", 1, 1, 120, 128, 2048, 8348, true, "T9 H200", kV090},
    {"llama-2-7b", "H200", "fp8", 1, 1, 64, 2048, 128, 2391, true, "T9 H200", kV090},
    {"llama-2-7b", "H200", "fp8", 1, 1, 56, 2048, 2048, 3522, true, "T9 H200", kV090},
    {"llama-2-70b", "H200", "fp8", 1, 1, 1024, 128, 128, 3989, true, "T9 H200", kV090},
    {"llama-2-70b", "H200", "fp8", 1, 2, 512, 128, 2048, 3963, true, "T9 H200", kV090},
    {"llama-2-70b", "H200", "fp8", 1, 1, 64, 2048, 128, 418, true, "T9 H200", kV090},
    {"llama-2-70b", "H200", "fp8", 1, 1, 64, 2048, 2048, 1458, true, "T9 H200", kV090},
    {"mistral-7b", "A100-80G", "fp16", 2, 1, 896, 128, 128, 6251, true, "T9 A100", kV090},
    {"mistral-7b", "A100-80G", "fp16", 2, 1, 120, 128, 2048, 3776, true, "T9 A100", kV090},
    {"mistral-7b", "A100-80G", "fp16", 2, 1, 64, 2048, 128, 698, true, "T9 A100", kV090},
    {"mistral-7b", "A100-80G", "fp16", 2, 1, 56, 2048, 2048, 1576, true, "T9 A100", kV090},
    {"llama-2-7b", "A100-80G", "fp16", 2, 1, 256, 128, 128, 5390, true, "T9 A100", kV090},
    {"llama-2-7b", "A100-80G", "fp16", 2, 1, 32, 128, 2048, 1484, true, "T9 A100", kV090},
    {"llama-2-7b", "A100-80G", "fp16", 2, 1, 32, 2048, 128, 533, true, "T9 A100", kV090},
    {"llama-2-7b", "A100-80G", "fp16", 2, 1, 16, 2048, 2048, 603, true, "T9 A100", kV090},
    {"llama-2-70b", "A100-80G", "fp16", 2, 4, 1024, 128, 128, 686, true, "T9 A100", kV090},
    {"llama-2-70b", "A100-80G", "fp16", 2, 8, 512, 128, 2048, 684, true, "T9 A100", kV090},
    {"llama-2-70b", "A100-80G", "fp16", 2, 4, 96, 2048, 128, 80, true, "T9 A100", kV090},
    {"llama-2-70b", "A100-80G", "fp16", 2, 4, 64, 2048, 2048, 289, true, "T9 A100", kV090},
};

struct Summary {
  double median = 0, within25 = 0, worst = 0;
};

// Predicts every point, prints it, and returns the |error| statistics issue #27 asks for.
template <size_t N>
Summary summarize(const Throughput (&cases)[N], const char* half) {
  std::vector<double> abs_err;
  for (const auto& c : cases) {
    Rig s;
    rig(s, c.model, c.gpu, c.weights, c.kv_bytes, c.tp);
    s.in.grouped_kv_reads = engine_groups_kv(c.engine, s.model);
    LoadPoint p = predict_load(s.in, c.batch, c.in_len, c.out_len);
    const double predicted = c.per_gpu ? p.output_tokens_per_s / c.tp : p.output_tokens_per_s;
    const double e = rel_err(predicted, c.measured);
    std::printf("[%s] %s tp=%d bs=%d %d/%d: predicted %.0f, published %.0f (%+.0f%%)\n", c.source, c.model, c.tp,
                c.batch, c.in_len, c.out_len, predicted, c.measured, e * 100);
    abs_err.push_back(std::fabs(e));
  }
  std::sort(abs_err.begin(), abs_err.end());
  Summary r;
  r.median = abs_err.size() % 2 ? abs_err[abs_err.size() / 2]
                                : 0.5 * (abs_err[abs_err.size() / 2 - 1] + abs_err[abs_err.size() / 2]);
  r.within25 = static_cast<double>(std::count_if(abs_err.begin(), abs_err.end(), [](double x) { return x <= 0.25; })) /
               static_cast<double>(abs_err.size());
  r.worst = abs_err.back();
  std::printf("offline throughput, %s: %zu points, median |error| %.0f%%, %.0f%% within 25%%, worst %.0f%%\n", half,
              abs_err.size(), r.median * 100, r.within25 * 100, r.worst * 100);
  return r;
}

TEST(Published, ThroughputTables) {
  const Summary fit = summarize(kFit, "fit");
  const Summary holdout = summarize(kHoldout, "holdout");
  // Bounds: issue #27's target (docs/plan.md reports 7% / 100% and 11% / 100%).
  EXPECT_LE(fit.median, kFitMedian);
  EXPECT_GE(fit.within25, kFitWithin25);
  EXPECT_LE(holdout.median, kHoldoutMedian);
  EXPECT_GE(holdout.within25, kHoldoutWithin25);
  EXPECT_LT(fit.worst, kWorst);
  EXPECT_LT(holdout.worst, kWorst);
}

TEST(Published, FirstTokenLatency) {
  struct Case {
    const char* model;
    const char* gpu;
    const char* weights;
    int tp, in_len;
    double measured_ms;
    bool outlier = false;
  };
  // [T] "Low Latency" tables: batch 1, first-token latency.
  const Case cases[] = {
      {"llama-2-7b", "H100-SXM", "fp8", 1, 128, 7},         {"llama-2-7b", "H100-SXM", "fp8", 1, 2048, 36},
      {"llama-2-70b", "H100-SXM", "fp8", 4, 128, 26, true},  // outlier: fixed costs of a 128-token tp=4 pass
      {"llama-2-70b", "H100-SXM", "fp8", 4, 2048, 109},     {"llama-2-7b", "A100-80G", "fp16", 1, 128, 16},
      {"llama-2-7b", "A100-80G", "fp16", 1, 2048, 133},     {"llama-2-70b", "A100-80G", "fp16", 4, 128, 47},
      {"llama-2-70b", "A100-80G", "fp16", 4, 2048, 377},
  };
  for (const auto& c : cases) {
    Rig s;
    rig(s, c.model, c.gpu, c.weights, 2, c.tp);
    LoadPoint p = predict_load(s.in, 1, c.in_len, 1);
    const double e = rel_err(p.ttft_ms, c.measured_ms);
    std::printf("[T TTFT] %s %s tp=%d in=%d: predicted %.1f ms, published %.0f ms (%+.0f%%)\n", c.model, c.gpu, c.tp,
                c.in_len, p.ttft_ms, c.measured_ms, e * 100);
    // A too-low TTFT is optimistic: compare measured against predicted for the outlier test.
    if (c.outlier) {
      EXPECT_LT(p.ttft_ms, c.measured_ms / (1 + kTolerance)) << "outlier now within tolerance, update docs";
      EXPECT_GT(p.ttft_ms, c.measured_ms / kOutlierFactor);
    } else {
      EXPECT_LT(std::fabs(e), kTolerance) << c.model << " " << c.gpu << " in " << c.in_len;
    }
  }
}

TEST(Published, SingleStreamDecode) {
  struct Case {
    const char* model;
    const char* gpu;
    const char* weights;
    double measured_tokens_per_s;
    const char* source;
  };
  const Case cases[] = {
      {"llama-3.1-8b", "A100-40G", "bf16", 75.0, "V1"},
      {"llama-3.1-8b", "H100-SXM", "fp16", 1000.0 / 6.48, "V2"},
      {"llama-2-7b", "RTX-4090", "q4_0", 191.0, "M"},
      {"llama-2-13b", "RTX-4090", "q4_0", 108.8, "M"},
  };
  for (const auto& c : cases) {
    Rig s;
    rig(s, c.model, c.gpu, c.weights, 2, 1);
    const double tpot_s = decode_step_s(s.in, 1, 1024);
    const double predicted = 1.0 / tpot_s;
    const double e = rel_err(predicted, c.measured_tokens_per_s);
    std::printf("[%s] %s %s %s batch 1: predicted %.1f tok/s, published %.1f (%+.0f%%)\n", c.source, c.model, c.gpu,
                c.weights, predicted, c.measured_tokens_per_s, e * 100);
    EXPECT_LT(std::fabs(e), kTolerance) << c.model << " " << c.gpu;
  }
}

}  // namespace
}  // namespace parallm::planner
