// Calibration files: round trip, defaults, malformed content, files from
// before per-dtype factors, and the calibrated CPU device feeding the same
// equations with the factor of the model's weight dtype (exact formulas of
// perf_model.cpp, no timing).
#include "planner/calibration.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "planner/model_catalog.h"
#include "util/check.h"

namespace parallm::planner {
namespace {

TEST(Calibration, RoundTripAndMapping) {
  Calibration c;
  c.threads = 2;
  c.mem_bw_gbps = 12.5;
  c.fma_gflops = 150;
  c.allreduce_latency_us = 7;
  c.allreduce_gbps = 3;
  const std::string path = std::filesystem::temp_directory_path() / "parallm-cal-test/cal.json";
  save_calibration(c, path);
  Calibration back = load_calibration(path);
  EXPECT_DOUBLE_EQ(back.mem_bw_gbps, 12.5);
  EXPECT_DOUBLE_EQ(back.fma_gflops, 150);
  EXPECT_EQ(back.threads, 2);
  GpuSpec g = calibrated_cpu(back, 8e9);
  EXPECT_TRUE(g.is_cpu);
  EXPECT_DOUBLE_EQ(g.mem_bw_gbps, 12.5);
  EXPECT_DOUBLE_EQ(g.fp32_tflops, 0.15);
  EXPECT_DOUBLE_EQ(g.memory_bytes, 8e9);
  std::filesystem::remove_all(std::filesystem::path(path).parent_path());
}

TEST(Calibration, MalformedIsInputError) {
  EXPECT_THROW(calibration_from_json("{", "x"), InputError);
  EXPECT_THROW(calibration_from_json(R"({"mem_bw_gbps": 10})", "x"), InputError);
  EXPECT_THROW(calibration_from_json(R"({"mem_bw_gbps": -1, "fma_gflops": 5})", "x"), InputError);
  EXPECT_THROW(load_calibration("/nonexistent/cal.json"), InputError);
}

Calibration sample_with_kernels() {
  Calibration c;
  c.threads = 2;
  c.mem_bw_gbps = 40;
  c.fma_gflops = 400;
  c.layer_overhead_us = 3;
  c.attn_bw_eff = 0.05;
  c.attn_flops_eff = 0.02;
  c.kernels["fp16"] = {0.9, 0.7, 36, 280, {}};
  c.kernels["q8_0"] = {0.75, 0.72, 30, 288, {}};
  c.kernels["q4_0"] = {0.5, 0.65, 20, 260, {}};
  return c;
}

TEST(Calibration, PerDtypeRoundTrip) {
  const Calibration c = sample_with_kernels();
  const Calibration back = calibration_from_json(calibration_to_json(c), "x");
  ASSERT_EQ(back.kernels.size(), 3u);
  EXPECT_DOUBLE_EQ(back.kernels.at("q4_0").bw_eff, 0.5);
  EXPECT_DOUBLE_EQ(back.kernels.at("q4_0").flops_eff, 0.65);
  EXPECT_DOUBLE_EQ(back.kernels.at("q4_0").decode_gbps, 20);
  EXPECT_DOUBLE_EQ(back.kernels.at("q8_0").prefill_gflops, 288);
  EXPECT_DOUBLE_EQ(back.attn_bw_eff, 0.05);
  EXPECT_DOUBLE_EQ(back.attn_flops_eff, 0.02);
  EXPECT_DOUBLE_EQ(back.layer_overhead_us, 3);
}

TEST(Calibration, OldFileFallsBackToScalarFactors) {
  // A file written before per-dtype factors: no "kernels", no attention factors.
  const Calibration c = calibration_from_json(
      R"({"device": "cpu", "threads": 2, "mem_bw_gbps": 20, "fma_gflops": 100, "bw_eff": 0.7,
          "flops_eff": 0.6, "layer_overhead_us": 15})",
      "old");
  EXPECT_TRUE(c.kernels.empty());
  EXPECT_EQ(kernel_efficiency(c, parse_weight_format("q4_0")), nullptr);
  const PerfConstants k = calibrated_constants(c, parse_weight_format("q4_0"));
  EXPECT_DOUBLE_EQ(k.bw_eff, 0.7);
  EXPECT_DOUBLE_EQ(k.flops_eff, 0.6);
  EXPECT_DOUBLE_EQ(k.layer_overhead_us, 15);
  EXPECT_DOUBLE_EQ(k.attn_bw_eff, 0);  // 0: attention at bw_eff / flops_eff
  EXPECT_DOUBLE_EQ(k.attn_flops_eff, 0);
}

TEST(Calibration, PicksTheWeightDtypesFactor) {
  const Calibration c = sample_with_kernels();
  // GGUF type names map onto the planner's format names (f16 -> fp16).
  PerfConstants k = calibrated_constants(c, parse_weight_format("f16"));
  EXPECT_DOUBLE_EQ(k.bw_eff, 0.9);
  EXPECT_DOUBLE_EQ(k.flops_eff, 0.7);
  k = calibrated_constants(c, parse_weight_format("q4_0"));
  EXPECT_DOUBLE_EQ(k.bw_eff, 0.5);
  EXPECT_DOUBLE_EQ(k.flops_eff, 0.65);
  EXPECT_DOUBLE_EQ(k.attn_bw_eff, 0.05);
  // Not measured: the scalar fallbacks.
  k = calibrated_constants(c, parse_weight_format("q6_k"));
  EXPECT_DOUBLE_EQ(k.bw_eff, c.bw_eff);
  EXPECT_DOUBLE_EQ(k.flops_eff, c.flops_eff);
}

TEST(Calibration, MalformedKernelsAreInputErrors) {
  const std::string head = R"({"mem_bw_gbps": 10, "fma_gflops": 50, "kernels": )";
  EXPECT_THROW(calibration_from_json(head + R"({"q4_0": {"bw_eff": -1, "flops_eff": 0.5}}})", "x"), InputError);
  EXPECT_THROW(calibration_from_json(head + R"({"q4_0": {"flops_eff": 0.5}}})", "x"), InputError);
  EXPECT_THROW(calibration_from_json(head + R"({"q9_9": {"bw_eff": 0.5, "flops_eff": 0.5}}})", "x"), InputError);
  EXPECT_THROW(calibration_from_json(head + R"([1, 2]})", "x"), InputError);
  EXPECT_THROW(calibration_from_json(R"({"mem_bw_gbps": 10, "fma_gflops": 50, "attn_bw_eff": -0.1})", "x"), InputError);
}

// The CPU device of a calibration, llama-2-7b on one "device" (no file bytes:
// bits per weight of the format).
PerfInputs cpu_inputs(const ModelSpec& m, const Calibration& c, const char* weights) {
  PerfInputs in;
  in.model = &m;
  in.params = count_params(m);
  in.weights = parse_weight_format(weights);
  in.gpu = calibrated_cpu(c, 1e12);
  in.k = calibrated_constants(c, in.weights);
  in.layout = Layout{1, 1, 1, 1};
  in.memory = device_memory(m, in.params, in.weights, 2, in.gpu, in.layout, MemoryOptions{}, 4096);
  return in;
}

TEST(Calibration, DecodeUsesTheDtypesBandwidthFactor) {
  const ModelSpec m = catalog_model("llama-2-7b");
  const Calibration c = sample_with_kernels();
  const ParamCounts p = count_params(m);
  // Weights read per token: everything but the input embedding and the final
  // norm (perf_model.cpp stage_work); at batch 1 the bytes bound the step.
  const double read_params = static_cast<double>(p.total - p.embedding - p.final_norm);
  const double overhead_s = static_cast<double>(m.config.n_layer) * 3e-6;
  for (const auto& [name, bpw, eff] :
       {std::tuple{"fp16", 16.0, 0.9}, std::tuple{"q8_0", 8.5, 0.75}, std::tuple{"q4_0", 4.5, 0.5}}) {
    const PerfInputs in = cpu_inputs(m, c, name);
    const double expected = read_params * bpw / 8 / (40e9 * eff) + overhead_s;
    EXPECT_NEAR(decode_step_s(in, 1, 0), expected, expected * 1e-12) << name;
  }
  // Attention: each context token adds its KV bytes at attn_bw_eff.
  const PerfInputs in = cpu_inputs(m, c, "q4_0");
  const double kv_per_token = 2.0 * 32 * 4096 * 2;  // K and V, 32 layers, fp16
  EXPECT_NEAR(decode_step_s(in, 1, 100) - decode_step_s(in, 1, 0), 100 * kv_per_token / (40e9 * 0.05), 1e-12);
}

TEST(Calibration, PrefillUsesTheDtypesFlopsAndAttentionFactors) {
  const ModelSpec m = catalog_model("llama-2-7b");
  Calibration c = sample_with_kernels();
  const ParamCounts p = count_params(m);
  const double L = 512, layers = 32, width = 2 * 4096;
  // Every prompt token through the layers; only the last one through lm_head.
  const double gemm_flops = 2 * L * static_cast<double>(p.total - p.embedding - p.final_norm - p.lm_head) +
                            2 * static_cast<double>(p.lm_head);
  const double attn_flops = L * L * layers * width;  // causal half of QK^T and PV, 2 FLOPs each
  const PerfInputs in = cpu_inputs(m, c, "q8_0");
  const double expected = gemm_flops / (400e9 * 0.72) + attn_flops / (400e9 * 0.02) + layers * 3e-6;
  EXPECT_NEAR(prefill_s(in, 1, L), expected, expected * 1e-12);
  // Without measured attention factors, attention runs at the GEMM's factor.
  c.attn_flops_eff = 0;
  const PerfInputs old = cpu_inputs(m, c, "q8_0");
  const double expected_old = (gemm_flops + attn_flops) / (400e9 * 0.72) + layers * 3e-6;
  EXPECT_NEAR(prefill_s(old, 1, L), expected_old, expected_old * 1e-12);
}

// The GEMM rate by batch size: the time per token-row is linear between
// measured points, the first and last rates hold outside them.
TEST(Calibration, GemmRateByTokensInterpolatesTimePerRow) {
  const ModelSpec m = catalog_model("llama-2-7b");
  Calibration c = sample_with_kernels();
  c.kernels["q8_0"].gflops_by_tokens = {{1, 20}, {4, 80}, {8, 100}, {128, 300}};
  const Calibration back = calibration_from_json(calibration_to_json(c), "x");
  ASSERT_EQ(back.kernels.at("q8_0").gflops_by_tokens.size(), 4u);
  EXPECT_DOUBLE_EQ(back.kernels.at("q8_0").gflops_by_tokens[2].second, 100);
  const PerfInputs in = cpu_inputs(m, back, "q8_0");
  ASSERT_EQ(in.k.gemm_gflops_by_tokens.size(), 4u);
  const ParamCounts p = count_params(m);
  const double dense = static_cast<double>(p.total - p.embedding - p.final_norm - p.lm_head);
  const double head = static_cast<double>(p.lm_head);
  const double overhead_s = 32 * 3e-6;
  const double bytes = (dense + head) * 8.5 / 8;
  const double bw = 40e9 * 0.75;
  // A decode step at batch b (no context): every row through the layers and the head.
  auto decode_expected = [&](double b, double rate_gflops) {
    return std::max(bytes / bw, 2 * b * (dense + head) / (rate_gflops * 1e9)) + overhead_s;
  };
  EXPECT_NEAR(decode_step_s(in, 4, 0), decode_expected(4, 80), 1e-12);
  // 6 rows: between 4 (4/80 s-per-GFLOP-row units) and 8 (8/100): 0.05 + 0.5 x 0.03 = 0.065 -> 6 / 0.065.
  EXPECT_NEAR(decode_step_s(in, 6, 0), decode_expected(6, 6 / 0.065), 1e-12);
  EXPECT_NEAR(decode_step_s(in, 512, 0), decode_expected(512, 300), 1e-12);  // past the last point
  // A lone prompt: its tokens through the layers at the rate of its length, one head row.
  const double L = 128, attn_flops = L * L * 32 * 2 * 4096;
  const double expected = (2 * L * dense + 2 * head) / 300e9 + attn_flops / (400e9 * 0.02) + overhead_s;
  EXPECT_NEAR(prefill_s(in, 1, L), expected, expected * 1e-12);
}

TEST(Calibration, MalformedGemmCurveIsInputError) {
  const std::string head = R"({"mem_bw_gbps": 10, "fma_gflops": 50, "kernels": {"q4_0": {"bw_eff": 0.5, )"
                           R"("flops_eff": 0.5, "gflops_by_tokens": )";
  EXPECT_NO_THROW(calibration_from_json(head + "[[1, 5], [2, 9]]}}}", "x"));
  EXPECT_THROW(calibration_from_json(head + "[[2, 5], [1, 9]]}}}", "x"), InputError);  // not ascending
  EXPECT_THROW(calibration_from_json(head + "[[0, 5]]}}}", "x"), InputError);          // under one token
  EXPECT_THROW(calibration_from_json(head + "[[1, -5]]}}}", "x"), InputError);
  EXPECT_THROW(calibration_from_json(head + "[[1]]}}}", "x"), InputError);
}

ModelProfile sample_profile(const std::string& path) {
  ModelProfile p;
  p.model_path = path;
  p.file_bytes = static_cast<int64_t>(std::filesystem::file_size(path));
  p.threads = 2;
  p.forward_ms_by_tokens = {{1, 2}, {4, 3}, {16, 6}, {128, 40}};
  p.logit_row_ms = 0.05;
  p.prefill_pair_ns = 400;
  p.decode_kv_token_ns = 1500;
  p.stream_token_us = 120;
  p.step_overhead_us = -40;
  p.noise_sigma = 0.05;
  p.drift_sigma = 0.08;
  p.drift_period_s = 0.35;
  p.idle_factor = 1.06;
  p.idle_after_s = 0.3;
  p.request_overhead_us = 1850;
  p.decode_kv_ms_by_ctx = {{132, 0.02}, {772, 0.7}, {2056, 2.7}};
  p.cold_decode.prompt_tokens = 186;
  p.cold_decode.extra_ms = {{187, {1.7, 1.6, 0.9}}, {748, {2.2, 2.1}}};
  p.measured_at = "2026-12-03T00:00:00Z";
  return p;
}

TEST(Calibration, ModelProfileRoundTripAndFileMatch) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "parallm-profile-test";
  std::filesystem::create_directories(dir);
  const std::string model = (dir / "m.gguf").string();
  {
    std::FILE* f = std::fopen(model.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    std::fputs("not a model, 28 bytes long\n", f);
    std::fclose(f);
  }
  Calibration c = sample_with_kernels();
  c.model_profile = sample_profile(std::filesystem::absolute(model).lexically_normal().string());
  const Calibration back = calibration_from_json(calibration_to_json(c), "x");
  const ModelProfile* p = profile_for(back, model);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->forward_ms_by_tokens, c.model_profile.forward_ms_by_tokens);
  EXPECT_DOUBLE_EQ(p->prefill_pair_ns, 400);
  EXPECT_DOUBLE_EQ(p->decode_kv_token_ns, 1500);
  EXPECT_DOUBLE_EQ(p->stream_token_us, 120);
  EXPECT_DOUBLE_EQ(p->step_overhead_us, -40);
  EXPECT_DOUBLE_EQ(p->noise_sigma, 0.05);
  EXPECT_DOUBLE_EQ(p->drift_sigma, 0.08);
  EXPECT_DOUBLE_EQ(p->drift_period_s, 0.35);
  EXPECT_DOUBLE_EQ(p->idle_factor, 1.06);
  EXPECT_DOUBLE_EQ(p->idle_after_s, 0.3);
  EXPECT_DOUBLE_EQ(p->request_overhead_us, 1850);
  EXPECT_EQ(p->decode_kv_ms_by_ctx, c.model_profile.decode_kv_ms_by_ctx);
  EXPECT_DOUBLE_EQ(p->cold_decode.prompt_tokens, 186);
  EXPECT_EQ(p->cold_decode.extra_ms, c.model_profile.cold_decode.extra_ms);
  EXPECT_EQ(p->measured_at, "2026-12-03T00:00:00Z");
  // Another file, or the same file changed, is not this profile.
  EXPECT_EQ(profile_for(back, (dir / "other.gguf").string()), nullptr);
  {
    std::FILE* f = std::fopen(model.c_str(), "ab");
    std::fputs("grown", f);
    std::fclose(f);
  }
  EXPECT_EQ(profile_for(back, model), nullptr);
  EXPECT_EQ(profile_for(sample_with_kernels(), model), nullptr);  // none profiled
  std::filesystem::remove_all(dir);
}

TEST(Calibration, MalformedModelProfileIsInputError) {
  const std::string head = R"({"mem_bw_gbps": 10, "fma_gflops": 50, "model_profile": {"model_path": "/m", )"
                           R"("file_bytes": 10, "logit_row_ms": 0.1, "prefill_pair_ns": 1, "decode_kv_token_ns": 1, )";
  EXPECT_NO_THROW(calibration_from_json(head + R"("forward_ms_by_tokens": [[1, 2], [8, 3]]}})", "x"));
  EXPECT_THROW(calibration_from_json(head + R"("forward_ms_by_tokens": []}})", "x"), InputError);
  EXPECT_THROW(calibration_from_json(head + R"("forward_ms_by_tokens": [[8, 2], [1, 3]]}})", "x"), InputError);
  EXPECT_THROW(calibration_from_json(head + R"("forward_ms_by_tokens": [[1, 0]]}})", "x"), InputError);
  EXPECT_THROW(calibration_from_json(head + R"("forward_ms_by_tokens": [[1, 2]], "noise_sigma": -1}})", "x"),
               InputError);
  EXPECT_THROW(calibration_from_json(head + R"("forward_ms_by_tokens": [[1, 2]], "drift_sigma": -0.1}})", "x"),
               InputError);
  // A drift needs the period it is measured over.
  EXPECT_THROW(calibration_from_json(head + R"("forward_ms_by_tokens": [[1, 2]], "drift_sigma": 0.1}})", "x"),
               InputError);
  EXPECT_NO_THROW(calibration_from_json(
      head + R"("forward_ms_by_tokens": [[1, 2]], "drift_sigma": 0.1, "drift_period_s": 0.3}})", "x"));
  // Older files have no idle factor: none.
  EXPECT_EQ(calibration_from_json(head + R"("forward_ms_by_tokens": [[1, 2]]}})", "x").model_profile.idle_factor, 1.0);
  EXPECT_THROW(calibration_from_json(head + R"("forward_ms_by_tokens": [[1, 2]], "idle_factor": 0}})", "x"),
               InputError);
  EXPECT_THROW(calibration_from_json(head + R"("forward_ms_by_tokens": [[1, 2]], "idle_after_s": -1}})", "x"),
               InputError);
  // Older files have no front-end timing (-1: the planner's constant); a
  // measured one is a time, never negative.
  EXPECT_EQ(
      calibration_from_json(head + R"("forward_ms_by_tokens": [[1, 2]]}})", "x").model_profile.request_overhead_us,
      -1.0);
  EXPECT_DOUBLE_EQ(calibration_from_json(head + R"("forward_ms_by_tokens": [[1, 2]], "request_overhead_us": 0}})", "x")
                       .model_profile.request_overhead_us,
                   0.0);
  EXPECT_THROW(calibration_from_json(head + R"("forward_ms_by_tokens": [[1, 2]], "request_overhead_us": -0.5}})", "x"),
               InputError);
  EXPECT_THROW(calibration_from_json(head + R"("forward_ms_by_tokens": [[1, 2]], "request_overhead_us": 1e9}})", "x"),
               InputError);
  // Decode attention by context: contexts above 0 ascending, times not negative.
  EXPECT_TRUE(calibration_from_json(head + R"("forward_ms_by_tokens": [[1, 2]]}})", "x")
                  .model_profile.decode_kv_ms_by_ctx.empty());
  EXPECT_NO_THROW(calibration_from_json(
      head + R"("forward_ms_by_tokens": [[1, 2]], "decode_kv_ms_by_ctx": [[100, 0], [400, 0.5]]}})", "x"));
  EXPECT_THROW(
      calibration_from_json(
          head + R"("forward_ms_by_tokens": [[1, 2]], "decode_kv_ms_by_ctx": [[400, 0.5], [100, 0.6]]}})", "x"),
      InputError);
  EXPECT_THROW(
      calibration_from_json(head + R"("forward_ms_by_tokens": [[1, 2]], "decode_kv_ms_by_ctx": [[100, -0.1]]}})", "x"),
      InputError);
  EXPECT_THROW(
      calibration_from_json(head + R"("forward_ms_by_tokens": [[1, 2]], "decode_kv_ms_by_ctx": [[0, 1]]}})", "x"),
      InputError);
  // Older files have no cold decode steps: none. Curves need the prompt they
  // were measured after, contexts above 0 ascending, and extras that are times.
  EXPECT_TRUE(
      calibration_from_json(head + R"("forward_ms_by_tokens": [[1, 2]]}})", "x").model_profile.cold_decode.empty());
  const std::string table = head + R"("forward_ms_by_tokens": [[1, 2]], )";
  EXPECT_EQ(
      calibration_from_json(table + R"("cold_prompt_tokens": 180, "cold_decode_extra_ms": [[181, [1.5, 0.5]]]}})", "x")
          .model_profile.cold_decode.extra_ms.at(0)
          .second,
      (std::vector<double>{1.5, 0.5}));
  EXPECT_THROW(calibration_from_json(table + R"("cold_decode_extra_ms": [[181, [1.5]]]}})", "x"), InputError);
  EXPECT_THROW(
      calibration_from_json(table + R"("cold_prompt_tokens": 180, "cold_decode_extra_ms": [[181, [-1]]]}})", "x"),
      InputError);
  EXPECT_THROW(calibration_from_json(
                   table + R"("cold_prompt_tokens": 180, "cold_decode_extra_ms": [[700, [1]], [181, [1]]]}})", "x"),
               InputError);
  EXPECT_THROW(calibration_from_json(table + R"("cold_prompt_tokens": 180, "cold_decode_extra_ms": [[0, [1]]]}})", "x"),
               InputError);
  EXPECT_THROW(calibration_from_json(table + R"("cold_prompt_tokens": -5}})", "x"), InputError);
  EXPECT_THROW(calibration_from_json(table + R"("cold_prompt_tokens": 180, "cold_decode_extra_ms": [[181, 2]]}})", "x"),
               InputError);
  // The step term may be negative, down to half of the 1-token forward (2 ms here).
  EXPECT_DOUBLE_EQ(calibration_from_json(head + R"("forward_ms_by_tokens": [[1, 2]], "step_overhead_us": -1000}})", "x")
                       .model_profile.step_overhead_us,
                   -1000);
  EXPECT_THROW(calibration_from_json(head + R"("forward_ms_by_tokens": [[1, 2]], "step_overhead_us": -1001}})", "x"),
               InputError);
  EXPECT_THROW(calibration_from_json(head + R"("forward_ms_by_tokens": [[1, 2]], "stream_token_us": -1}})", "x"),
               InputError);
  EXPECT_THROW(calibration_from_json(R"({"mem_bw_gbps": 10, "fma_gflops": 50, "model_profile": {}})", "x"), InputError);
}

TEST(ModelProfile, ForwardTimeIsLinearBetweenPointsAndAlongTheLastSlope) {
  ModelProfile p;
  p.forward_ms_by_tokens = {{1, 2}, {4, 3}, {16, 6}, {128, 40}};
  EXPECT_DOUBLE_EQ(profile_forward_s(p, 1), 2e-3);
  EXPECT_DOUBLE_EQ(profile_forward_s(p, 0.5), 2e-3);  // below the first point: its time
  EXPECT_NEAR(profile_forward_s(p, 2.5), 2.5e-3, 1e-15);
  EXPECT_NEAR(profile_forward_s(p, 10), 4.5e-3, 1e-15);
  EXPECT_NEAR(profile_forward_s(p, 128), 40e-3, 1e-15);
  EXPECT_NEAR(profile_forward_s(p, 240), (40 + 112 * 34.0 / 112) * 1e-3, 1e-15);  // the last slope: 34 ms / 112
  p.forward_ms_by_tokens = {{1, 2}};
  EXPECT_DOUBLE_EQ(profile_forward_s(p, 64), 2e-3);
}

// Decode attention by context: linear from none at no context through the
// points, past the last along the last slope; a constant per token without them.
TEST(ModelProfile, DecodeAttentionFollowsItsTableOrTheConstantPerToken) {
  ModelProfile p;
  p.decode_kv_token_ns = 1000;
  EXPECT_NEAR(profile_decode_kv_s(p, 500), 0.5e-3, 1e-15);
  p.decode_kv_ms_by_ctx = {{100, 0.1}, {300, 0.5}, {500, 1.3}};
  EXPECT_EQ(profile_decode_kv_s(p, 0), 0.0);
  EXPECT_NEAR(profile_decode_kv_s(p, 50), 0.05e-3, 1e-15);  // toward (0, 0)
  EXPECT_NEAR(profile_decode_kv_s(p, 100), 0.1e-3, 1e-15);
  EXPECT_NEAR(profile_decode_kv_s(p, 200), 0.3e-3, 1e-15);  // halfway between 0.1 and 0.5
  EXPECT_NEAR(profile_decode_kv_s(p, 400), 0.9e-3, 1e-15);
  EXPECT_NEAR(profile_decode_kv_s(p, 700), 2.1e-3, 1e-15);  // the last slope, 0.8 ms / 200
  p.decode_kv_ms_by_ctx = {{100, 0.2}};
  EXPECT_NEAR(profile_decode_kv_s(p, 250), 0.5e-3, 1e-15);  // one point: the line through (0, 0)
}

// A decode step's cold extra: the k-th value of the curves, linear in context
// between them, from none at no context to the first curve, the last one past
// it; times the prompt's share of the measured one, at most 1.
TEST(ModelProfile, ColdDecodeExtraFollowsItsCurvesInContextAndPromptShare) {
  ColdDecode c;
  EXPECT_EQ(c.extra_s(0, 200, 200), 0.0);  // no curves: no extra
  c.prompt_tokens = 200;
  c.extra_ms = {{100, {2, 1}}, {300, {4}}};
  EXPECT_NEAR(c.extra_s(0, 200, 50), 1e-3, 1e-15);     // half the first curve's context
  EXPECT_NEAR(c.extra_s(0, 200, 100), 2e-3, 1e-15);    // the first curve
  EXPECT_NEAR(c.extra_s(0, 200, 200), 3e-3, 1e-15);    // halfway: (2 + 4) / 2
  EXPECT_NEAR(c.extra_s(1, 200, 200), 0.5e-3, 1e-15);  // the second curve has ended: (1 + 0) / 2
  EXPECT_NEAR(c.extra_s(0, 200, 900), 4e-3, 1e-15);    // past the last curve: it
  EXPECT_NEAR(c.extra_s(0, 100, 300), 2e-3, 1e-15);    // half the prompt: half the extra
  EXPECT_NEAR(c.extra_s(0, 1000, 300), 4e-3, 1e-15);   // a longer prompt: the measured extra
  EXPECT_EQ(c.extra_s(2, 200, 100), 0.0);              // after the curves
  EXPECT_EQ(c.extra_s(0, 0, 100), 0.0);                // no prefill
  EXPECT_EQ(c.extra_s(-1, 200, 100), 0.0);
}

}  // namespace
}  // namespace parallm::planner
