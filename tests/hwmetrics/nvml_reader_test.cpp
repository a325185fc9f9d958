// The NVML-present path against tests/hwmetrics/fake_nvml.cpp: every family
// a device reports, labelled gpu and uuid; a missing symbol (SM clock) or an
// unsupported query (GPU 1's temperature and ECC) leaves only that out.
#include <gtest/gtest.h>

#include <cstdlib>

#include "hwmetrics/hardware_metrics.h"
#include "hwmetrics/nvml_metrics.h"

namespace parallm::hwmetrics {
namespace {

TEST(NvmlReader, FakeDriverTwoGpus) {
  NvmlReader r(FAKE_NVML);
  ASSERT_TRUE(r.available()) << r.status();
  std::vector<GpuSample> g = r.sample();
  ASSERT_EQ(g.size(), 2u);
  EXPECT_EQ(g[0].index, 0);
  EXPECT_EQ(g[0].uuid, "GPU-00000000-aaaa");
  EXPECT_EQ(*g[0].memory_used_bytes, 10ull << 30);
  EXPECT_EQ(*g[0].memory_total_bytes, 80ull << 30);
  EXPECT_DOUBLE_EQ(*g[0].utilization_ratio, 0.75);
  EXPECT_DOUBLE_EQ(*g[0].temperature_celsius, 61);
  EXPECT_DOUBLE_EQ(*g[0].power_watts, 312.5);
  EXPECT_FALSE(g[0].sm_clock_hertz);  // the fake has no nvmlDeviceGetClockInfo
  EXPECT_DOUBLE_EQ(*g[0].pcie_rx_bytes_per_second, 2000 * 1024.0);
  EXPECT_DOUBLE_EQ(*g[0].pcie_tx_bytes_per_second, 1000 * 1024.0);
  EXPECT_EQ(*g[0].ecc_corrected_total, 5u);
  EXPECT_EQ(*g[0].ecc_uncorrected_total, 1u);
  EXPECT_FALSE(g[0].nvlink_tx_bytes_per_second);  // a rate needs two samples
  EXPECT_FALSE(g[1].temperature_celsius);
  EXPECT_FALSE(g[1].ecc_corrected_total);
  EXPECT_EQ(g[1].uuid, "GPU-11111111-bbbb");
  std::vector<GpuSample> again = r.sample();
  ASSERT_EQ(again.size(), 2u);
  ASSERT_TRUE(again[0].nvlink_tx_bytes_per_second);
  EXPECT_GT(*again[0].nvlink_tx_bytes_per_second, 0);
  EXPECT_GT(*again[0].nvlink_rx_bytes_per_second, 0);
}

TEST(NvmlReader, FakeDriverProcesses) {
  NvmlReader r(FAKE_NVML);
  ASSERT_TRUE(r.available()) << r.status();
  const std::vector<GpuProcess> p = r.processes();
  ASSERT_EQ(p.size(), 3u);
  // By device, then pid; 4343 is in both lists and counted once.
  EXPECT_EQ(p[0].gpu, 0);
  EXPECT_EQ(p[0].pid, 4242u);
  EXPECT_EQ(p[0].name, "python3");
  EXPECT_EQ(*p[0].used_bytes, 6ull << 30);
  EXPECT_TRUE(p[0].compute);
  EXPECT_FALSE(p[0].graphics);
  EXPECT_EQ(p[1].pid, 4343u);
  EXPECT_EQ(*p[1].used_bytes, 2ull << 30);
  EXPECT_TRUE(p[1].compute && p[1].graphics);
  EXPECT_EQ(p[1].uuid, "GPU-00000000-aaaa");
  EXPECT_EQ(p[2].gpu, 1);
  EXPECT_EQ(p[2].pid, 5151u);
  EXPECT_FALSE(p[2].used_bytes);  // NVML_VALUE_NOT_AVAILABLE
  EXPECT_EQ(p[2].name, "");
}

TEST(NvmlReader, AbsentLibraryHasNoProcesses) {
  NvmlReader r("/nonexistent/libnvidia-ml.so.1");
  EXPECT_FALSE(r.available());
  EXPECT_TRUE(r.processes().empty());
}

TEST(NvmlReader, LibraryFromEnvironment) {
  setenv("PARALLM_NVML_LIBRARY", FAKE_NVML, 1);
  EXPECT_EQ(default_nvml_library(), FAKE_NVML);
  EXPECT_TRUE(NvmlReader().available());
  unsetenv("PARALLM_NVML_LIBRARY");
  EXPECT_EQ(default_nvml_library(), "libnvidia-ml.so.1");
}

TEST(HardwareMetrics, FakeDriverRendersGpuSeries) {
  HardwareMetricsOptions o;
  o.nvml_library = FAKE_NVML;
  o.gpu_poll_s = 0.05;
  HardwareMetrics hw(o);
  ASSERT_TRUE(hw.gpu_metrics_available());
  const std::string t = hw.render();
  EXPECT_NE(t.find("\nparallm:gpu_metrics_available 1\n"), std::string::npos) << t;
  EXPECT_NE(t.find("parallm:gpu_memory_used_bytes{gpu=\"1\",uuid=\"GPU-11111111-bbbb\"} 1073741824\n"),
            std::string::npos)
      << t;
  EXPECT_NE(t.find("parallm:gpu_utilization_ratio{gpu=\"0\",uuid=\"GPU-00000000-aaaa\"} 0.75\n"), std::string::npos)
      << t;
  EXPECT_NE(t.find("parallm:gpu_temperature_celsius{gpu=\"0\","), std::string::npos) << t;
  EXPECT_EQ(t.find("parallm:gpu_temperature_celsius{gpu=\"1\","), std::string::npos) << t;
  EXPECT_EQ(t.find("parallm:gpu_sm_clock_hertz"), std::string::npos) << t;
  EXPECT_NE(t.find("parallm:gpu_pcie_rx_bytes_per_second{gpu=\"0\",uuid=\"GPU-00000000-aaaa\"} 2048000\n"),
            std::string::npos)
      << t;
  EXPECT_NE(t.find("parallm:gpu_ecc_errors_total{gpu=\"0\",uuid=\"GPU-00000000-aaaa\",type="
                   "\"uncorrected\"} 1\n"),
            std::string::npos)
      << t;
}

}  // namespace
}  // namespace parallm::hwmetrics
