// GPU metrics through NVML, opened with dlopen at run time (as `parallm topo`
// does, src/topo/nvml_probe.cpp), so the build needs no nvml.h and machines
// without a driver simply have no GPU series. Every entry point but
// init/count/handle is optional: a symbol the driver lacks, or a call the
// device does not support, leaves that one metric out.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace parallm::hwmetrics {

struct GpuSample {
  int index = 0;     // NVML device index
  std::string uuid;  // "GPU-..." ("" when NVML does not say)
  std::optional<uint64_t> memory_used_bytes, memory_total_bytes;
  std::optional<double> utilization_ratio;  // 0..1, busy share of the last sample period
  std::optional<double> temperature_celsius;
  std::optional<double> power_watts;
  std::optional<double> sm_clock_hertz;
  std::optional<double> pcie_rx_bytes_per_second, pcie_tx_bytes_per_second;
  // From NVML's cumulative NVLink data counters, between two sample() calls.
  std::optional<double> nvlink_rx_bytes_per_second, nvlink_tx_bytes_per_second;
  std::optional<uint64_t> ecc_corrected_total,
      ecc_uncorrected_total;  // volatile (since driver load)
};

// One process with a context on one GPU (nvmlDeviceGetCompute/GraphicsRunningProcesses).
struct GpuProcess {
  int gpu = 0;       // NVML device index
  std::string uuid;  // the device's "GPU-..."
  unsigned int pid = 0;
  std::string name;                        // nvmlSystemGetProcessName ("" when NVML does not say)
  std::optional<uint64_t> used_bytes;      // device memory it holds; none when NVML cannot say
  bool compute = false, graphics = false;  // which lists it is in (a process can be in both)
};

// The library NvmlReader opens by default: $PARALLM_NVML_LIBRARY when set
// (a path; tests point it at a stand-in), else "libnvidia-ml.so.1".
std::string default_nvml_library();

class NvmlReader {
 public:
  // Opens `library` (a name for the loader's search, or a path) and
  // initializes NVML; available() is false when either fails.
  explicit NvmlReader(const std::string& library = default_nvml_library());
  ~NvmlReader();
  NvmlReader(const NvmlReader&) = delete;
  NvmlReader& operator=(const NvmlReader&) = delete;

  bool available() const;
  // Why not available ("" when it is).
  const std::string& status() const { return status_; }
  // One reading of every device. Not thread-safe (one caller at a time);
  // PCIe throughput makes NVML sample for ~20 ms per counter and device.
  std::vector<GpuSample> sample();
  // Every process holding a context on any device, by device then pid. Empty
  // when NVML is absent or the driver lacks both process queries.
  std::vector<GpuProcess> processes();

 private:
  struct Api;
  std::unique_ptr<Api> api_;
  std::string status_;
};

}  // namespace parallm::hwmetrics
