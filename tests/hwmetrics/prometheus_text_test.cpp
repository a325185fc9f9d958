// The renderer's families and labels, and the NVML-absent path: a library
// that does not exist yields no GPU series and gpu_metrics_available 0.
#include "hwmetrics/prometheus_text.h"

#include <gtest/gtest.h>

#include "hwmetrics/hardware_metrics.h"

namespace parallm::hwmetrics {
namespace {

int count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
  return n;
}

TEST(PrometheusText, GpusAndHost) {
  HostSample h;
  h.cpu_utilization_ratio = 0.25;
  h.memory = {{0, 1000, 400}, {1, 2000, 100}};
  h.process_resident_bytes = 4096;
  h.process_cpu_seconds = 1.5;
  h.process_open_fds = 7;
  GpuSample a;
  a.index = 0;
  a.uuid = "GPU-aaaa";
  a.memory_used_bytes = 1ull << 30;
  a.memory_total_bytes = 80ull << 30;
  a.utilization_ratio = 0.5;
  a.power_watts = 312.5;
  a.sm_clock_hertz = 1.98e9;
  a.ecc_corrected_total = 3;
  a.ecc_uncorrected_total = 0;
  GpuSample b;  // a device that reports only its memory
  b.index = 1;
  b.uuid = "GPU-\"b\"";
  b.memory_used_bytes = 0;
  b.memory_total_bytes = 80ull << 30;
  const std::string t = render_prometheus(h, true, {a, b});
  EXPECT_NE(t.find("parallm:gpu_metrics_available 1\n"), std::string::npos) << t;
  EXPECT_NE(t.find("parallm:gpu_memory_used_bytes{gpu=\"0\",uuid=\"GPU-aaaa\"} 1073741824\n"), std::string::npos) << t;
  EXPECT_NE(t.find("parallm:gpu_memory_total_bytes{gpu=\"1\",uuid=\"GPU-\\\"b\\\"\"} 85899345920\n"), std::string::npos)
      << t;
  EXPECT_NE(t.find("parallm:gpu_utilization_ratio{gpu=\"0\",uuid=\"GPU-aaaa\"} 0.5\n"), std::string::npos) << t;
  EXPECT_EQ(count(t, "parallm:gpu_utilization_ratio{"), 1);  // GPU 1 did not report it
  EXPECT_NE(t.find("parallm:gpu_power_watts{gpu=\"0\",uuid=\"GPU-aaaa\"} 312.5\n"), std::string::npos) << t;
  EXPECT_NE(t.find("parallm:gpu_sm_clock_hertz{gpu=\"0\",uuid=\"GPU-aaaa\"} 1980000000\n"), std::string::npos) << t;
  EXPECT_NE(t.find("parallm:gpu_ecc_errors_total{gpu=\"0\",uuid=\"GPU-aaaa\",type=\"corrected\"} 3\n"),
            std::string::npos);
  EXPECT_NE(t.find("parallm:gpu_ecc_errors_total{gpu=\"0\",uuid=\"GPU-aaaa\",type=\"uncorrected\"} 0\n"),
            std::string::npos);
  EXPECT_NE(t.find("# TYPE parallm:gpu_ecc_errors_total counter\n"), std::string::npos);
  // No device reported these: the families are left out entirely.
  EXPECT_EQ(t.find("parallm:gpu_temperature_celsius"), std::string::npos);
  EXPECT_EQ(t.find("parallm:gpu_pcie_rx_bytes_per_second"), std::string::npos);
  EXPECT_EQ(t.find("parallm:gpu_nvlink_tx_bytes_per_second"), std::string::npos);
  EXPECT_NE(t.find("parallm:host_cpu_utilization_ratio 0.25\n"), std::string::npos);
  EXPECT_NE(t.find("parallm:host_memory_used_bytes{numa_node=\"1\"} 100\n"), std::string::npos);
  EXPECT_NE(t.find("parallm:host_memory_total_bytes{numa_node=\"0\"} 1000\n"), std::string::npos);
  EXPECT_NE(t.find("process_resident_memory_bytes 4096\n"), std::string::npos);
  EXPECT_NE(t.find("process_cpu_seconds_total 1.5\n"), std::string::npos);
  EXPECT_NE(t.find("# TYPE process_cpu_seconds_total counter\n"), std::string::npos);
  EXPECT_NE(t.find("process_open_fds 7\n"), std::string::npos);
  // One HELP and one TYPE per family.
  EXPECT_EQ(count(t, "# TYPE parallm:host_memory_used_bytes "), 1);
  EXPECT_EQ(count(t, "# HELP "), count(t, "# TYPE "));
}

TEST(PrometheusText, NoGpuNoHostData) {
  const std::string t = render_prometheus(HostSample{}, false, {});
  EXPECT_EQ(t,
            "# HELP parallm:gpu_metrics_available 1 when NVML was loaded (GPU series follow), 0 "
            "without it.\n"
            "# TYPE parallm:gpu_metrics_available gauge\n"
            "parallm:gpu_metrics_available 0\n");
}

TEST(NvmlAbsent, MissingLibraryMeansNoGpuSeries) {
  NvmlReader r("/nonexistent/libnvidia-ml.so.1");
  EXPECT_FALSE(r.available());
  EXPECT_NE(r.status().find("not found"), std::string::npos) << r.status();
  EXPECT_TRUE(r.sample().empty());

  HardwareMetricsOptions o;
  o.nvml_library = "/nonexistent/libnvidia-ml.so.1";
  HardwareMetrics hw(o);
  EXPECT_FALSE(hw.gpu_metrics_available());
  const std::string t = hw.render();
  EXPECT_NE(t.find("\nparallm:gpu_metrics_available 0\n"), std::string::npos) << t;
  EXPECT_EQ(count(t, "parallm:gpu_"), 3) << t;  // HELP, TYPE and the sample of gpu_metrics_available only
  EXPECT_NE(t.find("parallm:host_cpu_utilization_ratio "), std::string::npos) << t;
  EXPECT_NE(t.find("process_resident_memory_bytes "), std::string::npos) << t;
}

TEST(NvmlAbsent, LibraryWithoutNvmlSymbols) {
  // A real shared library that is not NVML: loads, lacks nvmlInit_v2.
  NvmlReader r("libm.so.6");
  EXPECT_FALSE(r.available());
  EXPECT_NE(r.status().find("could not be initialized"), std::string::npos) << r.status();
  EXPECT_TRUE(r.sample().empty());
}

}  // namespace
}  // namespace parallm::hwmetrics
