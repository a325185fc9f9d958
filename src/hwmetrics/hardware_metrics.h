// HardwareMetrics: what `serve`'s /metrics appends and `parallm exporter`
// serves. Host metrics are read on each render (cheap: a few /proc files);
// GPUs are read by a background thread every `gpu_poll_s` (NVML's PCIe
// counters take ~20 ms per device and direction, too slow for a scrape that
// runs on the HTTP loop thread), and render() uses the latest reading.
// Without NVML there is no thread and no GPU series.
#pragma once
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "hwmetrics/host_metrics.h"
#include "hwmetrics/nvml_metrics.h"

namespace parallm::hwmetrics {

struct HardwareMetricsOptions {
  std::string nvml_library = default_nvml_library();
  std::string proc_root = "/proc";
  std::string sys_root = "/sys";
  double gpu_poll_s = 2;
};

class HardwareMetrics {
 public:
  explicit HardwareMetrics(const HardwareMetricsOptions& options = {});
  ~HardwareMetrics();
  HardwareMetrics(const HardwareMetrics&) = delete;
  HardwareMetrics& operator=(const HardwareMetrics&) = delete;

  bool gpu_metrics_available() const { return nvml_.available(); }
  const std::string& gpu_status() const { return nvml_.status(); }
  // Prometheus text of the host and the latest GPU reading. Thread-safe.
  std::string render();

 private:
  void poll_loop();

  HardwareMetricsOptions options_;
  HostCollector host_;
  NvmlReader nvml_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::vector<GpuSample> gpus_;  // guarded by mu_
  std::thread poller_;
};

// Appends the process-wide HardwareMetrics' text (created on first use).
void append_hardware_metrics(std::string* out);

}  // namespace parallm::hwmetrics
