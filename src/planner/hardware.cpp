// Datasheet figures of the device catalog (vendor spec sheets: dense tensor
// throughput without sparsity, HBM/GDDR bandwidth, NVLink per-GPU bandwidth in
// one direction). Prices are rough 2024-25 on-demand cloud rates and only rank
// layouts when no --gpu-hour-price is given.
#include "planner/hardware.h"

#include <cctype>

#include "util/check.h"

namespace parallm::planner {

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

std::vector<GpuSpec> build_gpus() {
  // name, memory GiB, bw GB/s, fp32, fp16, fp8, int8, nvlink GB/s, links, group, pcie, $/h, W
  // Memory: the "80 GB" of an A100/H100 is 80 GiB (nvidia-smi: 81920 MiB), so
  // the table is in GiB (2^30 bytes); the H200 and B200 are sold in GB (below).
  struct Row {
    const char* name;
    double mem_gib, bw, fp32, fp16, fp8, int8, nvlink;
    int links, group, pcie;
    double price, watts;
  };
  const Row rows[] = {
      {"A100-40G", 40, 1555, 19.5, 312, 0, 624, 300, 12, 8, 4, 1.3, 400},
      {"A100-80G", 80, 2039, 19.5, 312, 0, 624, 300, 12, 8, 4, 1.8, 400},
      {"H100-SXM", 80, 3350, 67, 989, 1979, 1979, 450, 18, 8, 5, 2.9, 700},
      {"H100-PCIe", 80, 2000, 51, 756, 1513, 1513, 300, 12, 2, 5, 2.3, 350},
      {"H200", 141, 4800, 67, 989, 1979, 1979, 450, 18, 8, 5, 3.5, 700},
      {"B200", 180, 8000, 75, 2250, 4500, 4500, 900, 18, 8, 6, 5.5, 1000},
      {"L40S", 48, 864, 91.6, 362, 733, 733, 0, 0, 0, 4, 1.0, 350},
      {"L4", 24, 300, 30.3, 121, 242, 242, 0, 0, 0, 4, 0.8, 72},
      {"A10", 24, 600, 31.2, 125, 0, 250, 0, 0, 0, 4, 0.75, 150},
      {"RTX-4090", 24, 1008, 82.6, 165, 330, 330, 0, 0, 0, 4, 0.4, 450},
      {"RTX-3090", 24, 936, 35.6, 71, 0, 142, 56.25, 4, 2, 4, 0.25, 350},
      {"RTX-PRO-6000", 96, 1792, 126, 500, 1000, 1000, 0, 0, 0, 5, 1.8, 600},
      {"V100", 32, 900, 15.7, 125, 0, 0, 150, 6, 8, 3, 0.9, 300},
      {"MI300X", 192, 5300, 163, 1307, 2615, 2615, 448, 7, 8, 5, 3.0, 750},
      // The host CPU: placeholders for a generic server; --local replaces them
      // with the machine's RAM and the calibrated bandwidth and FMA peak.
      {"cpu", 64, 50, 1.0, 1.0, 0, 0, 0, 0, 0, 4, 0.1, 200},
  };
  std::vector<GpuSpec> out;
  for (const Row& r : rows) {
    GpuSpec g;
    g.name = r.name;
    g.memory_bytes = r.mem_gib * kGiB;
    g.mem_bw_gbps = r.bw;
    g.fp32_tflops = r.fp32;
    g.fp16_tflops = r.fp16;
    g.fp8_tflops = r.fp8;
    g.int8_tops = r.int8;
    g.nvlink_gbps = r.nvlink;
    g.nvlink_links = r.links;
    g.nvlink_group = r.group;
    g.pcie_gen = r.pcie;
    g.price_per_hour = r.price;
    g.watts = r.watts;
    g.is_cpu = g.name == "cpu";
    out.push_back(g);
  }
  // The H200 is sold with 141 GB (not GiB) of HBM3e; B200 with 180 GB.
  out[4].memory_bytes = 141e9;
  out[5].memory_bytes = 180e9;
  return out;
}

const std::vector<GpuSpec>& gpus() {
  static const std::vector<GpuSpec> g = build_gpus();
  return g;
}

std::string lower(std::string s) {
  for (char& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

std::string alnum_lower(const std::string& s) {
  std::string out;
  for (char ch : s)
    if (std::isalnum(static_cast<unsigned char>(ch)))
      out += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return out;
}

}  // namespace

GpuSpec catalog_gpu(const std::string& name) {
  for (const auto& g : gpus())
    if (lower(g.name) == lower(name) || alnum_lower(g.name) == alnum_lower(name)) return g;
  std::string known;
  for (const auto& g : gpus()) known += (known.empty() ? "" : ", ") + g.name;
  throw InputError("unknown GPU '" + name + "' (known: " + known + ")");
}

std::vector<std::string> catalog_gpu_names() {
  std::vector<std::string> out;
  for (const auto& g : gpus()) out.push_back(g.name);
  return out;
}

bool match_gpu_name(const std::string& device_name, double memory_bytes, GpuSpec* out) {
  const std::string d = alnum_lower(device_name);
  auto has = [&](const char* s) { return d.find(s) != std::string::npos; };
  std::string pick;
  if (has("h200"))
    pick = "H200";
  else if (has("b200"))
    pick = "B200";
  else if (has("h100"))
    pick = has("pcie") ? "H100-PCIe" : "H100-SXM";
  else if (has("a100"))
    pick = memory_bytes > 50 * kGiB ? "A100-80G" : "A100-40G";
  else if (has("l40s"))
    pick = "L40S";
  else if (has("4090"))
    pick = "RTX-4090";
  else if (has("3090"))
    pick = "RTX-3090";
  else if (has("rtxpro6000") || has("pro6000"))
    pick = "RTX-PRO-6000";
  else if (has("v100"))
    pick = "V100";
  else if (has("mi300x"))
    pick = "MI300X";
  else if (has("a10") && !has("a100"))
    pick = "A10";
  else if (has("l4"))
    pick = "L4";
  if (pick.empty()) return false;
  *out = catalog_gpu(pick);
  if (memory_bytes > 0) out->memory_bytes = memory_bytes;  // the device knows best
  return true;
}

double peak_flops(const GpuSpec& gpu, ComputeType t) {
  switch (t) {
    case ComputeType::kFp32:
      return gpu.fp32_tflops * 1e12;
    case ComputeType::kFp16:
      return gpu.fp16_tflops * 1e12;
    case ComputeType::kFp8:
      return (gpu.fp8_tflops > 0 ? gpu.fp8_tflops : gpu.fp16_tflops) * 1e12;
    case ComputeType::kInt8:
      return (gpu.int8_tops > 0 ? gpu.int8_tops : gpu.fp16_tflops) * 1e12;
  }
  return gpu.fp16_tflops * 1e12;
}

double pcie_gbps(int gen) {
  // x16, one direction, theoretical: gen3 16, gen4 32, gen5 64, gen6 128 GB/s.
  if (gen <= 3) return 16;
  if (gen == 4) return 32;
  if (gen == 5) return 64;
  return 128;
}

WeightFormat parse_weight_format(const std::string& raw) {
  const std::string n = lower(raw);
  WeightFormat f;
  f.name = n;
  if (n == "fp32" || n == "f32") {
    f.bits_per_weight = 32;
    f.compute = ComputeType::kFp32;
    f.name = "fp32";
  } else if (n == "fp16" || n == "f16") {
    f.bits_per_weight = 16;
    f.name = "fp16";
  } else if (n == "bf16") {
    f.bits_per_weight = 16;
  } else if (n == "fp8") {
    f.bits_per_weight = 8;
    f.compute = ComputeType::kFp8;
    f.vllm_quant = "fp8";
  }
  // int8: W8A8 checkpoints, which vLLM loads as compressed-tensors ("int8" is no vLLM method).
  else if (n == "int8") {
    f.bits_per_weight = 8;
    f.compute = ComputeType::kInt8;
    f.vllm_quant = "compressed-tensors";
  }
  // int4 (AWQ/GPTQ): 4-bit weights plus an fp16 scale and zero per group of 128.
  else if (n == "int4") {
    f.bits_per_weight = 4.25;
    f.vllm_quant = "awq";
  }
  // GGUF block types: bits include the per-block scales (ggml block sizes).
  else if (n == "q8_0") {
    f.bits_per_weight = 8.5;
  } else if (n == "q6_k") {
    f.bits_per_weight = 6.5625;
  } else if (n == "q5_k" || n == "q5_k_m" || n == "q5_k_s") {
    f.bits_per_weight = 5.5;
    f.name = "q5_k";
  } else if (n == "q5_0") {
    f.bits_per_weight = 5.5;
  } else if (n == "q4_k" || n == "q4_k_m" || n == "q4_k_s") {
    f.bits_per_weight = 4.5;
    f.name = "q4_k";
  } else if (n == "q4_0") {
    f.bits_per_weight = 4.5;
  } else if (n == "q3_k" || n == "q3_k_m" || n == "q3_k_s") {
    f.bits_per_weight = 3.4375;
    f.name = "q3_k";
  } else if (n == "q2_k") {
    f.bits_per_weight = 2.625;
  } else
    throw InputError(
        "unknown weight format '" + raw +
        "' (use fp32, bf16, fp16, fp8, int8, int4 or a GGUF type: q8_0, q6_k, q5_k, q4_k, q4_0, q3_k, q2_k)");
  return f;
}

double parse_kv_dtype_bytes(const std::string& raw) {
  const std::string n = lower(raw);
  if (n == "fp32" || n == "f32") return 4;
  if (n == "fp16" || n == "f16" || n == "bf16" || n == "auto") return 2;
  if (n == "fp8" || n == "int8" || n == "fp8_e4m3" || n == "fp8_e5m2") return 1;
  if (n == "q8_0") return 34.0 / 32.0;
  if (n == "q4_0") return 18.0 / 32.0;
  throw InputError("unknown --kv-dtype '" + raw + "' (use fp32, bf16, fp16, fp8, int8, q8_0 or q4_0)");
}

}  // namespace parallm::planner
