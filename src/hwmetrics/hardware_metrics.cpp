// HardwareMetrics (see hardware_metrics.h).
#include "hwmetrics/hardware_metrics.h"

#include <chrono>

#include "hwmetrics/prometheus_text.h"

namespace parallm::hwmetrics {

HardwareMetrics::HardwareMetrics(const HardwareMetricsOptions& options)
    : options_(options), host_(options.proc_root, options.sys_root), nvml_(options.nvml_library) {
  if (!nvml_.available()) return;
  gpus_ = nvml_.sample();  // the first scrape already has GPUs
  poller_ = std::thread([this] { poll_loop(); });
}

HardwareMetrics::~HardwareMetrics() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (poller_.joinable()) poller_.join();
}

void HardwareMetrics::poll_loop() {
  const auto period = std::chrono::duration<double>(options_.gpu_poll_s);
  std::unique_lock<std::mutex> lock(mu_);
  while (!cv_.wait_for(lock, period, [this] { return stop_; })) {
    lock.unlock();
    std::vector<GpuSample> g = nvml_.sample();
    lock.lock();
    gpus_ = std::move(g);
  }
}

std::string HardwareMetrics::render() {
  const HostSample host = host_.sample();
  std::vector<GpuSample> gpus;
  {
    std::lock_guard<std::mutex> lock(mu_);
    gpus = gpus_;
  }
  return render_prometheus(host, nvml_.available(), gpus);
}

void append_hardware_metrics(std::string* out) {
  // NOTE: a function-local static: built on the first scrape, not at startup,
  // and its poller is joined at exit.
  static HardwareMetrics metrics;
  *out += metrics.render();
}

}  // namespace parallm::hwmetrics
