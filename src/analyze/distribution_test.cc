// The one summary of durations every analysis shares.
#include "analyze/distribution.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace opsight::analyze {
namespace {

TEST(Distribution, MomentsPercentilesAndPopulationStddev) {
  // Sorted 2 4 4 4 5 5 7 9: mean 5; squared deviations sum to 32, / n = 4: stddev 2 (the
  // sample standard deviation, / (n - 1), would be 2.138).
  std::vector<int64_t> values = {4, 2, 9, 4, 5, 7, 4, 5};
  Distribution distribution = summarize_distribution(values);
  EXPECT_EQ(distribution.count, 8u);
  EXPECT_EQ(distribution.total_ns, 40);
  EXPECT_EQ(distribution.min_ns, 2);
  EXPECT_EQ(distribution.max_ns, 9);
  EXPECT_DOUBLE_EQ(distribution.mean_ns, 5.0);
  EXPECT_DOUBLE_EQ(distribution.stddev_ns, 2.0);
  // index = q / 100 * 7
  EXPECT_DOUBLE_EQ(distribution.p50_ns, 4.5);
  EXPECT_DOUBLE_EQ(distribution.p75_ns, 5.5);  // 5 + 0.25 * 2
  EXPECT_DOUBLE_EQ(distribution.p90_ns, 7.6);
  EXPECT_DOUBLE_EQ(distribution.p999_ns, 8.986);
}

TEST(Distribution, EmptyIsAllZeroAndTheMeanSurvivesASaturatedTotal) {
  std::vector<int64_t> none;
  EXPECT_EQ(summarize_distribution(none).count, 0u);
  EXPECT_EQ(summarize_distribution(none).stddev_ns, 0.0);
  std::vector<int64_t> huge = {INT64_MAX, INT64_MAX};
  Distribution distribution = summarize_distribution(huge);
  EXPECT_EQ(distribution.total_ns, INT64_MAX);
  EXPECT_DOUBLE_EQ(distribution.mean_ns, static_cast<double>(INT64_MAX));
  EXPECT_DOUBLE_EQ(distribution.stddev_ns, 0.0);
}

}  // namespace
}  // namespace opsight::analyze
