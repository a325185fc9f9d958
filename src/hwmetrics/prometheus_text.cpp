// render_prometheus (see prometheus_text.h). Families are written whole, in
// a fixed order; integers print exactly, ratios and rates with %.6g.
#include "hwmetrics/prometheus_text.h"

#include <cinttypes>
#include <cstdio>
#include <functional>
#include <optional>

namespace parallm::hwmetrics {

namespace {

std::string number(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.10g", v);
  return buf;
}
std::string number(uint64_t v) { return std::to_string(v); }
std::string number(int64_t v) { return std::to_string(v); }

void header(std::string* out, const char* name, const char* type, const char* help) {
  *out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

std::string gpu_labels(const GpuSample& g, const std::string& extra = "") {
  std::string l = "{gpu=\"" + std::to_string(g.index) + "\",uuid=\"" + escape_label_value(g.uuid) + "\"";
  if (!extra.empty()) l += "," + extra;
  return l + "}";
}

// One GPU family: written only when some GPU has the value.
template <typename T>
void gpu_family(std::string* out, const std::vector<GpuSample>& gpus, const char* name, const char* type,
                const char* help, std::optional<T> GpuSample::*field) {
  bool any = false;
  for (const GpuSample& g : gpus) any = any || (g.*field).has_value();
  if (!any) return;
  header(out, name, type, help);
  for (const GpuSample& g : gpus)
    if ((g.*field).has_value()) *out += std::string(name) + gpu_labels(g) + " " + number(*(g.*field)) + "\n";
}

}  // namespace

std::string escape_label_value(const std::string& v) {
  std::string o;
  for (char c : v) {
    if (c == '\\')
      o += "\\\\";
    else if (c == '"')
      o += "\\\"";
    else if (c == '\n')
      o += "\\n";
    else
      o += c;
  }
  return o;
}

std::string render_prometheus(const HostSample& host, bool gpu_metrics_available, const std::vector<GpuSample>& gpus) {
  std::string out;
  header(&out, "parallm:gpu_metrics_available", "gauge", "1 when NVML was loaded (GPU series follow), 0 without it.");
  out += std::string("parallm:gpu_metrics_available ") + (gpu_metrics_available ? "1" : "0") + "\n";
  gpu_family(&out, gpus, "parallm:gpu_memory_used_bytes", "gauge", "GPU memory in use (NVML), by every process.",
             &GpuSample::memory_used_bytes);
  gpu_family(&out, gpus, "parallm:gpu_memory_total_bytes", "gauge", "GPU memory installed (NVML).",
             &GpuSample::memory_total_bytes);
  gpu_family(&out, gpus, "parallm:gpu_utilization_ratio", "gauge",
             "Share of the last sample period in which a kernel ran on the GPU, 0..1.", &GpuSample::utilization_ratio);
  gpu_family(&out, gpus, "parallm:gpu_temperature_celsius", "gauge", "GPU core temperature.",
             &GpuSample::temperature_celsius);
  gpu_family(&out, gpus, "parallm:gpu_power_watts", "gauge", "GPU board power draw.", &GpuSample::power_watts);
  gpu_family(&out, gpus, "parallm:gpu_sm_clock_hertz", "gauge", "SM clock.", &GpuSample::sm_clock_hertz);
  gpu_family(&out, gpus, "parallm:gpu_pcie_rx_bytes_per_second", "gauge",
             "PCIe bytes received by the GPU (NVML, 20 ms sample).", &GpuSample::pcie_rx_bytes_per_second);
  gpu_family(&out, gpus, "parallm:gpu_pcie_tx_bytes_per_second", "gauge",
             "PCIe bytes sent by the GPU (NVML, 20 ms sample).", &GpuSample::pcie_tx_bytes_per_second);
  gpu_family(&out, gpus, "parallm:gpu_nvlink_rx_bytes_per_second", "gauge",
             "NVLink data bytes received, all links, between the last two samples.",
             &GpuSample::nvlink_rx_bytes_per_second);
  gpu_family(&out, gpus, "parallm:gpu_nvlink_tx_bytes_per_second", "gauge",
             "NVLink data bytes sent, all links, between the last two samples.",
             &GpuSample::nvlink_tx_bytes_per_second);
  bool any_ecc = false;
  for (const GpuSample& g : gpus) any_ecc = any_ecc || g.ecc_corrected_total || g.ecc_uncorrected_total;
  if (any_ecc) {
    header(&out, "parallm:gpu_ecc_errors_total", "counter",
           "GPU memory ECC errors since the driver loaded (volatile count).");
    for (const GpuSample& g : gpus) {
      if (g.ecc_corrected_total)
        out += "parallm:gpu_ecc_errors_total" + gpu_labels(g, "type=\"corrected\"") + " " +
               number(*g.ecc_corrected_total) + "\n";
      if (g.ecc_uncorrected_total)
        out += "parallm:gpu_ecc_errors_total" + gpu_labels(g, "type=\"uncorrected\"") + " " +
               number(*g.ecc_uncorrected_total) + "\n";
    }
  }
  if (host.cpu_utilization_ratio) {
    header(&out, "parallm:host_cpu_utilization_ratio", "gauge",
           "Busy share of all CPU cores since the previous scrape (/proc/stat), 0..1.");
    out += "parallm:host_cpu_utilization_ratio " + number(*host.cpu_utilization_ratio) + "\n";
  }
  if (!host.memory.empty()) {
    header(&out, "parallm:host_memory_used_bytes", "gauge",
           "Host memory in use per NUMA node (total - free, page cache included).");
    for (const NodeMemory& m : host.memory)
      out += "parallm:host_memory_used_bytes{numa_node=\"" + std::to_string(m.numa_node) + "\"} " +
             number(m.used_bytes) + "\n";
    header(&out, "parallm:host_memory_total_bytes", "gauge", "Host memory installed per NUMA node.");
    for (const NodeMemory& m : host.memory)
      out += "parallm:host_memory_total_bytes{numa_node=\"" + std::to_string(m.numa_node) + "\"} " +
             number(m.total_bytes) + "\n";
  }
  if (host.process_resident_bytes) {
    header(&out, "process_resident_memory_bytes", "gauge", "Resident memory size in bytes.");
    out += "process_resident_memory_bytes " + number(*host.process_resident_bytes) + "\n";
  }
  if (host.process_cpu_seconds) {
    header(&out, "process_cpu_seconds_total", "counter", "Total user and system CPU time spent in seconds.");
    out += "process_cpu_seconds_total " + number(*host.process_cpu_seconds) + "\n";
  }
  if (host.process_open_fds) {
    header(&out, "process_open_fds", "gauge", "Number of open file descriptors.");
    out += "process_open_fds " + number(*host.process_open_fds) + "\n";
  }
  return out;
}

}  // namespace parallm::hwmetrics
