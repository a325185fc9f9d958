// Calibration file I/O and its mapping onto the device model: the CPU is a
// device whose "bandwidth" and "fp32 peak" are the measured figures, so the
// same memory and performance equations predict the local engine.
#include "planner/calibration.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "util/check.h"

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
                      {"measured_at", c.measured_at}};
  return j.dump(2) + "\n";
}

Calibration calibration_from_json(const std::string& text, const std::string& origin) {
  Calibration c;
  try {
    nlohmann::json j = nlohmann::json::parse(text);
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
    c.measured_at = j.value("measured_at", std::string());
  } catch (const nlohmann::json::exception& e) {
    throw InputError(origin + ": not a parallm calibration file (" + std::string(e.what()) + ")");
  }
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

PerfConstants calibrated_constants(const Calibration& c) {
  PerfConstants k;
  k.bw_eff = c.bw_eff;
  k.flops_eff = c.flops_eff;
  k.layer_overhead_us = c.layer_overhead_us;
  k.request_overhead_ms = 0.5;
  return k;
}

}  // namespace parallm::planner
