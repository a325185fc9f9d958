// The one capacity rule (core/capacity.h) with exact numbers, and the
// engine's capacity error with its advice.
#include "core/capacity.h"

#include <gtest/gtest.h>

#include "util/check.h"

namespace parallm {
namespace {

TEST(Capacity, FitIsBudgetTimesUtilizationLessWhatIsHeld) {
  // usable 90, left 90 - 30 - 10 - 5 = 45: four units of 10.
  const DeviceFit f = fit_device(100, 0.9, 30, 10, 5, 10, 4);
  EXPECT_DOUBLE_EQ(f.usable, 90);
  EXPECT_DOUBLE_EQ(f.left, 45);
  EXPECT_DOUBLE_EQ(f.kv_bytes, 45);
  EXPECT_EQ(f.kv_units, 4);
  EXPECT_TRUE(f.weights_fit);
  EXPECT_TRUE(f.fits);
  EXPECT_FALSE(fit_device(100, 0.9, 30, 10, 5, 10, 5).fits);  // a fifth unit does not fit
  // Weights over the usable part: nothing left, not even the weights fit.
  const DeviceFit over = fit_device(100, 0.5, 60, 0, 0, 1, 1);
  EXPECT_DOUBLE_EQ(over.left, -10);
  EXPECT_DOUBLE_EQ(over.kv_bytes, 0);
  EXPECT_EQ(over.kv_units, 0);
  EXPECT_FALSE(over.weights_fit);
  EXPECT_FALSE(over.fits);
  // At least one unit is always asked for; a unit of 0 bytes holds nothing.
  EXPECT_FALSE(fit_device(100, 1, 95, 0, 0, 10, 0).fits);
  EXPECT_FALSE(fit_device(100, 1, 10, 0, 0, 0, 1).fits);
  // Exactly full fits.
  EXPECT_TRUE(fit_device(100, 1, 60, 0, 0, 40, 1).fits);
}

TEST(Capacity, RankThatDoesNotFitSaysWhatWould) {
  EXPECT_NO_THROW(check_rank_fits("cuda:0", RankNeed{600, 400, 100}, 1000, LayoutAdvice{}));
  try {
    check_rank_fits("cuda:1", RankNeed{3u << 30, 1u << 30, 8192}, 2ull << 30, LayoutAdvice{1, 1, std::nullopt});
    FAIL() << "accepted";
  } catch (const CapacityError& e) {
    EXPECT_STREQ(e.what(),
                 "needs 4.00 GiB per device at tp=1, pp=1 (weights 3.00 GiB + KV cache 1.00 GiB for 8192 tokens), "
                 "cuda:1 has 2.00 GiB: try --tp 2, --pp 2 or --dtype q8_0");
  }
  // Already at q4_0 and beyond any split: a smaller context.
  EXPECT_EQ(capacity_advice(size_t{1} << 40, 1 << 20, LayoutAdvice{1, 1, DType::kQ4_0}),
            "use a smaller --ctx-size or more devices");
}

}  // namespace
}  // namespace parallm
