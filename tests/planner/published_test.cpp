// Predictions against published measurements. Every case cites its source;
// the efficiency constants are the global defaults of PerfConstants, never
// set per case, and the tolerance is the one stated in docs/plan.md:
// kTolerance (40%) on every figure, except the three known outliers marked
// below, where the model is optimistic (it predicts faster than measured) by
// up to kOutlierFactor; docs/plan.md lists every figure and explains them.
//
// Sources:
//  [T] NVIDIA TensorRT-LLM, docs/source/performance.md ("Performance of
//      TensorRT-LLM", data for v0.6.1, tables "Peak Throughput" H100 FP8 and
//      A100 FP16; "Low Latency" v0.5 first-token latency at batch 1),
//      https://github.com/NVIDIA/TensorRT-LLM/blob/release/0.6.1/docs/source/performance.md
//      Static batches of the listed size: exactly the closed-loop model.
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

// Outliers: asserted to be optimistic and within kOutlierFactor, not within kTolerance.
void expect_close(double predicted, double measured, bool outlier, const std::string& what) {
  const double e = (predicted - measured) / measured;
  if (outlier) {
    EXPECT_GT(predicted, measured * (1 + kTolerance)) << what << ": outlier now within tolerance, update docs";
    EXPECT_LT(predicted, measured * kOutlierFactor) << what;
  } else {
    EXPECT_LT(std::fabs(e), kTolerance) << what;
  }
}

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
  double kv_bytes;
  int tp, batch, in_len, out_len;
  double measured;  // output tokens/s (per GPU when per_gpu)
  bool per_gpu;
  const char* source;
  bool outlier = false;
};

TEST(Published, ThroughputTables) {
  const Throughput cases[] = {
      // [T] H100 FP8 (weights and KV in fp8), out tok/s/GPU.
      {"llama-2-7b", "H100-SXM", "fp8", 1, 1, 768, 128, 128, 19694, true, "T H100"},
      {"llama-2-7b", "H100-SXM", "fp8", 1, 1, 112, 128, 2048, 6818, true, "T H100"},
      {"llama-2-7b", "H100-SXM", "fp8", 1, 1, 80, 2048, 128, 2244, true, "T H100"},
      {"llama-2-7b", "H100-SXM", "fp8", 1, 1, 48, 2048, 2048, 2740, true, "T H100"},
      {"llama-2-70b", "H100-SXM", "fp8", 1, 2, 1024, 128, 128, 2657, true, "T H100"},
      // Outlier: long outputs at tp=4 with GQA; the v0.6 engine's decode attention
      // and batch scheduling sit far below the bandwidth roofline the model assumes.
      {"llama-2-70b", "H100-SXM", "fp8", 1, 4, 480, 128, 2048, 1486, true, "T H100", true},
      {"llama-2-70b", "H100-SXM", "fp8", 1, 2, 96, 2048, 128, 306, true, "T H100"},
      {"llama-2-70b", "H100-SXM", "fp8", 1, 2, 64, 2048, 2048, 547, true, "T H100", true},  // outlier, as above
      // [T] A100 FP16, single-GPU rows (out tok/s).
      {"llama-2-7b", "A100-80G", "fp16", 2, 1, 384, 128, 128, 5586, false, "T A100"},
      {"llama-2-7b", "A100-80G", "fp16", 2, 1, 60, 128, 2048, 1928, false, "T A100"},
      {"llama-2-7b", "A100-80G", "fp16", 2, 1, 52, 2048, 128, 591, false, "T A100"},
  };
  std::vector<double> abs_err;
  for (const auto& c : cases) {
    Rig s;
    rig(s, c.model, c.gpu, c.weights, c.kv_bytes, c.tp);
    LoadPoint p = predict_load(s.in, c.batch, c.in_len, c.out_len);
    const double predicted = c.per_gpu ? p.output_tokens_per_s / c.tp : p.output_tokens_per_s;
    const double e = rel_err(predicted, c.measured);
    std::printf("[%s] %s tp=%d bs=%d %d/%d: predicted %.0f, published %.0f (%+.0f%%)\n", c.source, c.model, c.tp,
                c.batch, c.in_len, c.out_len, predicted, c.measured, e * 100);
    expect_close(predicted, c.measured, c.outlier, std::string(c.model) + " " + c.gpu + " bs " + std::to_string(c.batch));
    abs_err.push_back(std::fabs(e));
  }
  // The summary issue #27 asks for (target: median <= 12%, >= 85% within 25%).
  std::sort(abs_err.begin(), abs_err.end());
  const double median = abs_err.size() % 2 ? abs_err[abs_err.size() / 2]
                                           : 0.5 * (abs_err[abs_err.size() / 2 - 1] + abs_err[abs_err.size() / 2]);
  const double within = static_cast<double>(std::count_if(abs_err.begin(), abs_err.end(), [](double x) { return x <= 0.25; })) /
                        static_cast<double>(abs_err.size());
  std::printf("offline throughput: %zu points, median |error| %.0f%%, %.0f%% within 25%%\n", abs_err.size(),
              median * 100, within * 100);
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
      {"llama-2-7b", "H100-SXM", "fp8", 1, 128, 7},     {"llama-2-7b", "H100-SXM", "fp8", 1, 2048, 36},
      {"llama-2-70b", "H100-SXM", "fp8", 4, 128, 26, true},  // outlier: fixed costs of a 128-token tp=4 pass   {"llama-2-70b", "H100-SXM", "fp8", 4, 2048, 109},
      {"llama-2-7b", "A100-80G", "fp16", 1, 128, 16},   {"llama-2-7b", "A100-80G", "fp16", 1, 2048, 133},
      {"llama-2-70b", "A100-80G", "fp16", 4, 128, 47},  {"llama-2-70b", "A100-80G", "fp16", 4, 2048, 377},
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
