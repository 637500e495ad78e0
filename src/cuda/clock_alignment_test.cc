#include "cuda/clock_alignment.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace opsight::cuda {
namespace {

TEST(ClockAlignment, TheShortestBracketGivesTheOffsetAndItsBound) {
  // The other clock runs 1,000,000 ns ahead; brackets of 400, 40 and 4,000 ns.
  std::vector<ClockSample> samples = {
      {1'000, 1'000'000 + 1'200, 1'400},
      {5'000, 1'000'000 + 5'020, 5'040},
      {9'000, 1'000'000 + 9'100, 13'000},
  };
  auto offset = estimate_clock_offset(samples);
  ASSERT_TRUE(offset);
  EXPECT_EQ(offset->other_minus_local_ns, 1'000'000);
  EXPECT_EQ(offset->uncertainty_ns, 20);
  EXPECT_EQ(offset->to_local(1'000'000 + 7'777), 7'777);
}

TEST(ClockAlignment, BracketsThatRunBackwardsAreNotUsed) {
  std::vector<ClockSample> samples = {{2'000, 50, 1'000}};
  EXPECT_FALSE(estimate_clock_offset(samples));
  samples.push_back({3'000, 3'500, 3'100});
  auto offset = estimate_clock_offset(samples);
  ASSERT_TRUE(offset);
  EXPECT_EQ(offset->other_minus_local_ns, 450);
}

int64_t monotonic_plus_a_second() {
  return static_cast<int64_t>(monotonic_clock_ns()) + 1'000'000'000;
}

TEST(ClockAlignment, MeasuresAKnownOffsetWithinItsStatedBound) {
  auto offset = measure_clock_offset(monotonic_plus_a_second, 32);
  ASSERT_TRUE(offset);
  EXPECT_LE(std::abs(offset->other_minus_local_ns - 1'000'000'000), offset->uncertainty_ns + 1);
  EXPECT_LT(offset->uncertainty_ns, 1'000'000);  // well under a millisecond on any machine
}

}  // namespace
}  // namespace opsight::cuda
