// Device catalog and number formats.
//
// GpuSpec holds the vendor datasheet figures the models need: memory, memory
// bandwidth, dense (non-sparse) tensor throughput per compute type, the
// device-to-device link, and a rough on-demand price. WeightFormat says how
// many bits a weight takes in memory and which compute type multiplies it.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace parallm::planner {

enum class ComputeType { kFp32, kFp16, kFp8, kInt8 };

struct GpuSpec {
  std::string name;  // catalog name, e.g. "H100-SXM"
  double memory_bytes = 0;
  double mem_bw_gbps = 0;     // GB/s (1e9 bytes/s)
  double fp32_tflops = 0;     // dense, no tensor cores (fp32 compute type)
  double fp16_tflops = 0;     // dense fp16/bf16 tensor throughput
  double fp8_tflops = 0;      // 0: not supported (weights are upcast, fp16 math)
  double int8_tops = 0;       // 0: not supported
  double nvlink_gbps = 0;     // per-GPU NVLink/xGMI bandwidth, one direction; 0 = none
  int nvlink_links = 0;       // links behind nvlink_gbps (to read "NV#" cells)
  int nvlink_group = 0;       // GPUs one NVLink domain joins (8 = NVSwitch board, 2 = bridge)
  int pcie_gen = 4;           // host link generation (x16)
  double price_per_hour = 0;  // USD, rough on-demand cloud price; --gpu-hour-price overrides
  double watts = 0;           // board power (TDP) of the datasheet; --gpu-watts overrides
  bool is_cpu = false;        // the host CPU as the device (memory = RAM)
};

// Case-insensitive; throws InputError listing the known names.
GpuSpec catalog_gpu(const std::string& name);
std::vector<std::string> catalog_gpu_names();
// Best match of an NVML device name ("NVIDIA H100 80GB HBM3") in the catalog;
// returns false when nothing matches.
bool match_gpu_name(const std::string& device_name, double memory_bytes, GpuSpec* out);

// Peak dense throughput (FLOP/s) of a compute type, falling back to fp16 math
// when the device lacks the type (weight-only quantization).
double peak_flops(const GpuSpec& gpu, ComputeType t);
// Effective unidirectional bandwidth of a PCIe x16 link of generation gen (GB/s).
double pcie_gbps(int gen);

struct WeightFormat {
  std::string name;             // "fp16", "int4", "q4_k", ...
  double bits_per_weight = 16;  // including block scales
  ComputeType compute = ComputeType::kFp16;
  std::string vllm_quant;  // vLLM --quantization of the format ("fp8", "compressed-tensors", "awq", "" = none)
};

// fp32|bf16|fp16|fp8|int8|int4 or a GGUF type (q8_0, q6_k, q5_k, q4_k, q4_0, ...).
// Throws InputError naming the accepted values.
WeightFormat parse_weight_format(const std::string& name);
// Bytes per KV element: fp32|bf16|fp16|fp8|int8|q8_0|q4_0.
double parse_kv_dtype_bytes(const std::string& name);

}  // namespace parallm::planner
