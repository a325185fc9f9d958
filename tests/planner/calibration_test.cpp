// Calibration files: round trip, defaults, malformed content, and the
// calibrated CPU device feeding the same equations.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>

#include "planner/calibration.h"
#include "util/check.h"

namespace parallm::planner {
namespace {

TEST(Calibration, RoundTripAndMapping) {
  Calibration c;
  c.threads = 2;
  c.mem_bw_gbps = 12.5;
  c.fma_gflops = 150;
  c.allreduce_latency_us = 7;
  c.allreduce_gbps = 3;
  const std::string path = std::filesystem::temp_directory_path() / "parallm-cal-test/cal.json";
  save_calibration(c, path);
  Calibration back = load_calibration(path);
  EXPECT_DOUBLE_EQ(back.mem_bw_gbps, 12.5);
  EXPECT_DOUBLE_EQ(back.fma_gflops, 150);
  EXPECT_EQ(back.threads, 2);
  GpuSpec g = calibrated_cpu(back, 8e9);
  EXPECT_TRUE(g.is_cpu);
  EXPECT_DOUBLE_EQ(g.mem_bw_gbps, 12.5);
  EXPECT_DOUBLE_EQ(g.fp32_tflops, 0.15);
  EXPECT_DOUBLE_EQ(g.memory_bytes, 8e9);
  std::filesystem::remove_all(std::filesystem::path(path).parent_path());
}

TEST(Calibration, MalformedIsInputError) {
  EXPECT_THROW(calibration_from_json("{", "x"), InputError);
  EXPECT_THROW(calibration_from_json(R"({"mem_bw_gbps": 10})", "x"), InputError);
  EXPECT_THROW(calibration_from_json(R"({"mem_bw_gbps": -1, "fma_gflops": 5})", "x"), InputError);
  EXPECT_THROW(load_calibration("/nonexistent/cal.json"), InputError);
}

}  // namespace
}  // namespace parallm::planner
