// ZeroedMemory: zero-filled on first touch, writable, moves ownership, and an
// impossible size is a CapacityError rather than a crash.
#include "util/zeroed_memory.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <utility>

#include "util/check.h"

namespace parallm {
namespace {

TEST(ZeroedMemory, ZeroFilledWritableAndMovable) {
  const size_t bytes = size_t{64} << 20;
  ZeroedMemory m(bytes);
  ASSERT_NE(m.data(), nullptr);
  EXPECT_EQ(m.size(), bytes);
  auto* p = static_cast<uint8_t*>(m.data());
  for (size_t i = 0; i < bytes; i += 4096 + 7) ASSERT_EQ(p[i], 0) << i;
  p[0] = 1;
  p[bytes - 1] = 2;
  ZeroedMemory moved(std::move(m));
  EXPECT_EQ(m.data(), nullptr);
  EXPECT_EQ(m.size(), 0u);
  auto* q = static_cast<uint8_t*>(moved.data());
  EXPECT_EQ(q[0], 1);
  EXPECT_EQ(q[bytes - 1], 2);
  ZeroedMemory other(4096);
  other = std::move(moved);
  EXPECT_EQ(static_cast<uint8_t*>(other.data())[bytes - 1], 2);
}

TEST(ZeroedMemory, ImpossibleSizeIsACapacityError) {
  EXPECT_THROW(ZeroedMemory(size_t{1} << 62), CapacityError);
  EXPECT_EQ(ZeroedMemory(0).data(), nullptr);
}

}  // namespace
}  // namespace parallm
