// Calibration file I/O and its mapping onto the device model: the CPU is a
// device whose "bandwidth" and "fp32 peak" are the measured figures, so the
// same memory and performance equations predict the local engine.
#include "planner/calibration.h"

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "util/check.h"
#include "util/json_parse.h"

namespace parallm::planner {

std::string calibration_to_json(const Calibration& c) {
  nlohmann::json j = {{"device", c.device},
                      {"threads", c.threads},
                      {"mem_bw_gbps", c.mem_bw_gbps},
                      {"fma_gflops", c.fma_gflops},
                      {"allreduce_latency_us", c.allreduce_latency_us},
                      {"allreduce_gbps", c.allreduce_gbps},
                      {"allreduce_ranks", c.allreduce_ranks},
                      {"bw_eff", c.bw_eff},
                      {"flops_eff", c.flops_eff},
                      {"layer_overhead_us", c.layer_overhead_us},
                      {"attn_bw_eff", c.attn_bw_eff},
                      {"attn_flops_eff", c.attn_flops_eff},
                      {"measured_at", c.measured_at}};
  nlohmann::json kernels = nlohmann::json::object();
  for (const auto& [name, k] : c.kernels)
    kernels[name] = {{"bw_eff", k.bw_eff},
                     {"flops_eff", k.flops_eff},
                     {"decode_gbps", k.decode_gbps},
                     {"prefill_gflops", k.prefill_gflops},
                     {"gflops_by_tokens", k.gflops_by_tokens}};
  j["kernels"] = kernels;
  if (!c.model_profile.model_path.empty()) {
    const ModelProfile& p = c.model_profile;
    j["model_profile"] = {{"model_path", p.model_path},
                          {"file_bytes", p.file_bytes},
                          {"threads", p.threads},
                          {"forward_ms_by_tokens", p.forward_ms_by_tokens},
                          {"logit_row_ms", p.logit_row_ms},
                          {"prefill_pair_ns", p.prefill_pair_ns},
                          {"decode_kv_token_ns", p.decode_kv_token_ns},
                          {"decode_kv_ms_by_ctx", p.decode_kv_ms_by_ctx},
                          {"stream_token_us", p.stream_token_us},
                          {"step_overhead_us", p.step_overhead_us},
                          {"noise_sigma", p.noise_sigma},
                          {"drift_sigma", p.drift_sigma},
                          {"drift_period_s", p.drift_period_s},
                          {"idle_factor", p.idle_factor},
                          {"idle_after_s", p.idle_after_s},
                          {"request_overhead_us", p.request_overhead_us},
                          {"cold_prompt_tokens", p.cold_decode.prompt_tokens},
                          {"cold_decode_extra_ms", p.cold_decode.extra_ms},
                          {"measured_at", p.measured_at}};
  }
  return j.dump(2) + "\n";
}

Calibration calibration_from_json(const std::string& text, const std::string& origin) {
  Calibration c;
  try {
    JsonError error;
    const std::optional<nlohmann::json> parsed =
        try_parse_json<nlohmann::json>(text, JsonLimits{kFileJsonDepth}, &error);
    if (!parsed) throw InputError(origin + ": not a parallm calibration file (" + error.message + ")");
    const nlohmann::json& j = *parsed;
    c.device = j.value("device", c.device);
    c.threads = j.value("threads", 0);
    c.mem_bw_gbps = j.at("mem_bw_gbps").get<double>();
    c.fma_gflops = j.at("fma_gflops").get<double>();
    c.allreduce_latency_us = j.value("allreduce_latency_us", 0.0);
    c.allreduce_gbps = j.value("allreduce_gbps", 0.0);
    c.allreduce_ranks = j.value("allreduce_ranks", 0);
    c.bw_eff = j.value("bw_eff", c.bw_eff);
    c.flops_eff = j.value("flops_eff", c.flops_eff);
    c.layer_overhead_us = j.value("layer_overhead_us", c.layer_overhead_us);
    c.attn_bw_eff = j.value("attn_bw_eff", 0.0);
    c.attn_flops_eff = j.value("attn_flops_eff", 0.0);
    c.measured_at = j.value("measured_at", std::string());
    if (j.contains("kernels")) {
      for (const auto& [name, e] : j.at("kernels").items()) {
        KernelEfficiency k;
        k.bw_eff = e.at("bw_eff").get<double>();
        k.flops_eff = e.at("flops_eff").get<double>();
        k.decode_gbps = e.value("decode_gbps", 0.0);
        k.prefill_gflops = e.value("prefill_gflops", 0.0);
        if (e.contains("gflops_by_tokens")) {
          k.gflops_by_tokens = e.at("gflops_by_tokens").get<std::vector<std::pair<double, double>>>();
          for (size_t i = 0; i < k.gflops_by_tokens.size(); ++i) {
            const auto [n, g] = k.gflops_by_tokens[i];
            if (!(n >= 1) || !(g > 0) || (i > 0 && !(n > k.gflops_by_tokens[i - 1].first)))
              throw InputError(origin + ": kernels." + name +
                               ".gflops_by_tokens needs [tokens, GFLOP/s] pairs, tokens >= 1 and ascending, "
                               "GFLOP/s positive");
          }
        }
        if (!(k.bw_eff > 0) || !(k.flops_eff > 0))
          throw InputError(origin + ": kernels." + name + " needs positive bw_eff and flops_eff");
        std::string format;
        try {
          format = parse_weight_format(name).name;
        } catch (const InputError& e) {
          throw InputError(origin + ": kernels: " + e.what());
        }
        c.kernels[format] = k;
      }
    }
    if (j.contains("model_profile")) {
      const nlohmann::json& e = j.at("model_profile");
      ModelProfile& p = c.model_profile;
      p.model_path = e.at("model_path").get<std::string>();
      p.file_bytes = e.at("file_bytes").get<int64_t>();
      p.threads = e.value("threads", 0);
      p.forward_ms_by_tokens = e.at("forward_ms_by_tokens").get<std::vector<std::pair<double, double>>>();
      p.logit_row_ms = e.at("logit_row_ms").get<double>();
      p.prefill_pair_ns = e.at("prefill_pair_ns").get<double>();
      p.decode_kv_token_ns = e.at("decode_kv_token_ns").get<double>();
      if (e.contains("decode_kv_ms_by_ctx"))
        p.decode_kv_ms_by_ctx = e.at("decode_kv_ms_by_ctx").get<std::vector<std::pair<double, double>>>();
      p.stream_token_us = e.value("stream_token_us", 0.0);
      p.step_overhead_us = e.value("step_overhead_us", 0.0);
      p.noise_sigma = e.value("noise_sigma", 0.0);
      p.drift_sigma = e.value("drift_sigma", 0.0);
      p.drift_period_s = e.value("drift_period_s", 0.0);
      p.idle_factor = e.value("idle_factor", 1.0);
      p.idle_after_s = e.value("idle_after_s", 0.0);
      p.request_overhead_us = e.value("request_overhead_us", -1.0);
      p.cold_decode.prompt_tokens = e.value("cold_prompt_tokens", 0.0);
      if (e.contains("cold_decode_extra_ms"))
        p.cold_decode.extra_ms =
            e.at("cold_decode_extra_ms").get<std::vector<std::pair<double, std::vector<double>>>>();
      p.measured_at = e.value("measured_at", std::string());
      bool ok = !p.model_path.empty() && p.file_bytes > 0 && !p.forward_ms_by_tokens.empty() && p.logit_row_ms >= 0 &&
                p.prefill_pair_ns >= 0 && p.decode_kv_token_ns >= 0 && p.stream_token_us >= 0 &&
                std::isfinite(p.step_overhead_us) && p.noise_sigma >= 0 && p.noise_sigma < 2 && p.drift_sigma >= 0 &&
                p.drift_sigma < 2 && p.drift_period_s >= 0 && (p.drift_sigma == 0 || p.drift_period_s > 0) &&
                p.idle_factor > 0 && p.idle_factor < 10 && p.idle_after_s >= 0 &&
                (p.request_overhead_us == -1 || (p.request_overhead_us >= 0 && p.request_overhead_us < 1e7));
      for (size_t i = 0; ok && i < p.forward_ms_by_tokens.size(); ++i) {
        const auto [n, ms] = p.forward_ms_by_tokens[i];
        ok = n >= 1 && ms > 0 && (i == 0 || n > p.forward_ms_by_tokens[i - 1].first);
      }
      ok = ok && p.step_overhead_us >= -500 * p.forward_ms_by_tokens[0].second;
      for (size_t i = 0; ok && i < p.decode_kv_ms_by_ctx.size(); ++i) {
        const auto [n, ms] = p.decode_kv_ms_by_ctx[i];
        ok = n > 0 && ms >= 0 && ms < 1e6 && (i == 0 || n > p.decode_kv_ms_by_ctx[i - 1].first);
      }
      const ColdDecode& cd = p.cold_decode;
      ok = ok && std::isfinite(cd.prompt_tokens) && cd.prompt_tokens >= 0 && (cd.empty() || cd.prompt_tokens > 0);
      for (size_t i = 0; ok && i < cd.extra_ms.size(); ++i) {
        const auto& [ctx, extra] = cd.extra_ms[i];
        ok = ctx > 0 && (i == 0 || ctx > cd.extra_ms[i - 1].first) && extra.size() <= 1000;
        for (double ms : extra) ok = ok && ms >= 0 && ms < 1e4;
      }
      if (!ok)
        throw InputError(
            origin +
            ": model_profile needs a model_path, file_bytes > 0, [tokens, ms] pairs with tokens >= 1 "
            "ascending and ms > 0, and non-negative costs (noise_sigma and drift_sigma under 2, "
            "step_overhead_us not below half of the first forward, drift_period_s > 0 with a drift, "
            "idle_factor in (0, 10), idle_after_s >= 0, request_overhead_us -1 (not measured) or "
            "0 to 1e7, decode_kv_ms_by_ctx [context tokens, ms] pairs with context > 0 ascending and ms >= 0, "
            "cold_decode_extra_ms [context tokens, [ms, ...]] pairs with context > 0 ascending, ms in "
            "[0, 1e4) and cold_prompt_tokens > 0)");
    }
  } catch (const nlohmann::json::exception& e) {
    throw InputError(origin + ": not a parallm calibration file (" + std::string(e.what()) + ")");
  }
  if (!(c.attn_bw_eff >= 0) || !(c.attn_flops_eff >= 0) || !(c.layer_overhead_us >= 0))
    throw InputError(origin + ": calibration needs attn_bw_eff, attn_flops_eff and layer_overhead_us >= 0");
  if (!(c.mem_bw_gbps > 0) || !(c.fma_gflops > 0))
    throw InputError(origin + ": calibration needs positive mem_bw_gbps and fma_gflops");
  return c;
}

Calibration load_calibration(const std::string& path) {
  std::ifstream f(path);
  if (!f) throw InputError("no calibration at " + path + " (run `parallm plan --calibrate` first)");
  std::stringstream ss;
  ss << f.rdbuf();
  return calibration_from_json(ss.str(), path);
}

void save_calibration(const Calibration& c, const std::string& path) {
  std::error_code ec;
  std::filesystem::path p(path);
  if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path(), ec);
  std::ofstream f(path);
  if (!f) throw InputError("cannot write calibration to " + path);
  f << calibration_to_json(c);
}

std::string default_calibration_path() {
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  const char* home = std::getenv("HOME");
  std::string base = xdg != nullptr && *xdg ? xdg : std::string(home != nullptr ? home : ".") + "/.cache";
  return base + "/parallm/calibration.json";
}

GpuSpec calibrated_cpu(const Calibration& c, double memory_bytes) {
  GpuSpec g = catalog_gpu("cpu");
  g.mem_bw_gbps = c.mem_bw_gbps;
  g.fp32_tflops = c.fma_gflops / 1e3;
  g.fp16_tflops = c.fma_gflops / 1e3;  // the CPU engine computes in fp32 whatever the weights
  g.fp8_tflops = 0;
  g.int8_tops = 0;
  if (memory_bytes > 0) g.memory_bytes = memory_bytes;
  return g;
}

const KernelEfficiency* kernel_efficiency(const Calibration& c, const WeightFormat& weights) {
  auto it = c.kernels.find(weights.name);
  return it == c.kernels.end() ? nullptr : &it->second;
}

const ModelProfile* profile_for(const Calibration& c, const std::string& path) {
  const ModelProfile& p = c.model_profile;
  if (p.model_path.empty()) return nullptr;
  std::error_code ec;
  const std::filesystem::path abs = std::filesystem::absolute(path, ec);
  if (ec || abs.lexically_normal().string() != p.model_path) return nullptr;
  const auto size = std::filesystem::file_size(abs, ec);
  return !ec && static_cast<int64_t>(size) == p.file_bytes ? &p : nullptr;
}

PerfConstants calibrated_constants(const Calibration& c, const WeightFormat& weights) {
  PerfConstants k;
  const KernelEfficiency* e = kernel_efficiency(c, weights);
  k.bw_eff = e != nullptr ? e->bw_eff : c.bw_eff;
  k.flops_eff = e != nullptr ? e->flops_eff : c.flops_eff;
  if (e != nullptr) k.gemm_gflops_by_tokens = e->gflops_by_tokens;
  k.layer_overhead_us = c.layer_overhead_us;
  k.attn_bw_eff = c.attn_bw_eff;
  k.attn_flops_eff = c.attn_flops_eff;
  // The CPU engine runs the experts with the matmul kernels measured above;
  // the default moe_gemm_eff is a GPU MoE-kernel figure (docs/plan.md).
  k.moe_gemm_eff = 1.0;
  k.request_overhead_ms = 0.5;
  return k;
}

}  // namespace parallm::planner
