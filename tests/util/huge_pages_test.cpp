// HugeVector: large buffers are 2 MiB-aligned mappings that keep their
// contents across growth, small ones come from operator new, and the
// mappings go back to the kernel (no address-space leak over many grows).
#include "util/huge_pages.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <string>

namespace parallm {
namespace {

bool aligned_2m(const void* p) { return reinterpret_cast<uintptr_t>(p) % (size_t{2} << 20) == 0; }

// The process's virtual size in KiB (VmSize in /proc/self/status).
int64_t virtual_kib() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmSize:", 0) == 0) return std::stoll(line.substr(7));
  }
  return -1;
}

TEST(HugePages, LargeBuffersAreAlignedAndKeepTheirContentsWhenGrown) {
  HugeVector<float> v;
  float* p = grown(v, 100'000);  // 400 KB: one 2 MiB page
  ASSERT_TRUE(aligned_2m(p));
  for (size_t i = 0; i < v.size(); ++i) p[i] = static_cast<float>(i);
  p = grown(v, 50'000);  // no shrink
  EXPECT_EQ(v.size(), 100'000u);
  p = grown(v, 3'000'000);  // 12 MB: a new mapping, contents copied, tail zeroed
  ASSERT_TRUE(aligned_2m(p));
  for (size_t i = 0; i < 100'000; ++i) ASSERT_EQ(p[i], static_cast<float>(i)) << i;
  for (size_t i = 100'000; i < v.size(); i += 4099) ASSERT_EQ(p[i], 0.0f) << i;
  p[v.size() - 1] = 1.0f;  // the last element is inside the mapping
}

TEST(HugePages, SmallBuffersUseTheHeap) {
  HugeVector<uint8_t> v(kHugePageMinBytes - 1, 7);
  EXPECT_EQ(v[kHugePageMinBytes - 2], 7);
  HugeVector<uint8_t> big(kHugePageMinBytes, 9);
  EXPECT_TRUE(aligned_2m(big.data()));
  EXPECT_EQ(big.back(), 9);
}

TEST(HugePages, MappingsAreReturned) {
  { HugeVector<float> warm(1 << 20); }
  const int64_t before = virtual_kib();
  ASSERT_GT(before, 0);
  for (int i = 0; i < 200; ++i) {  // 1-7 MiB each, 800 MiB in all
    HugeVector<float> v(static_cast<size_t>(1 << 18) * (1 + i % 7));
    v.back() = 1.0f;
  }
  EXPECT_LT(virtual_kib() - before, 16 << 10);
}

}  // namespace
}  // namespace parallm
