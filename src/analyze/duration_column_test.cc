// DurationColumn: values come back in order, 4 bytes each while they fit in 32 bits and 8
// in a block that holds a longer one; and summarize_distribution gives the same figures to
// the last bit whatever the order of its values (what the streaming summary relies on).
#include "analyze/duration_column.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "analyze/distribution.hpp"

namespace {

using opsight::analyze::DurationColumn;

TEST(DurationColumn, GivesBackEveryValueInOrder) {
  DurationColumn column;
  std::vector<int64_t> expected;
  for (int64_t i = 0; i < 200'000; ++i) {
    const int64_t value = i % 1000 == 999 ? (int64_t{5} << 32) + i : i * 37 % 100'003;
    column.append(value);
    expected.push_back(value);
  }
  std::vector<int64_t> values;
  column.copy_to(values);
  EXPECT_EQ(values, expected);
  EXPECT_EQ(column.size(), expected.size());
}

TEST(DurationColumn, HoldsFourBytesAValueWhileValuesFitIn32Bits) {
  DurationColumn narrow;
  for (int64_t i = 0; i < 1'000'000; ++i) narrow.append(4'000'000'000 - i);
  EXPECT_LE(narrow.bytes(), 1'000'000u * 4 + DurationColumn::kLargestBlock * 4);
  DurationColumn wide;
  for (int64_t i = 0; i < 1'000'000; ++i) wide.append(i == 10 ? -1 : i);  // one block widens
  EXPECT_LE(wide.bytes(), 1'000'000u * 4 + DurationColumn::kLargestBlock * 8);
  EXPECT_GT(wide.bytes(), narrow.bytes() - DurationColumn::kLargestBlock * 4);
  std::vector<int64_t> values;
  wide.copy_to(values);
  EXPECT_EQ(values[10], -1);
  EXPECT_EQ(values[11], 11);
  DurationColumn small;
  small.append(7);
  EXPECT_EQ(small.bytes(), DurationColumn::kFirstBlock * 4);
}

TEST(DurationColumn, TheDistributionDoesNotDependOnTheValuesOrder) {
  std::mt19937_64 random(42);
  std::vector<int64_t> values(100'001);
  for (int64_t& value : values) value = static_cast<int64_t>(random() % 50'000'000) + 3;
  std::vector<int64_t> shuffled = values;
  std::shuffle(shuffled.begin(), shuffled.end(), random);
  auto a = opsight::analyze::summarize_distribution(values);
  auto b = opsight::analyze::summarize_distribution(shuffled);
  EXPECT_EQ(a.stddev_ns, b.stddev_ns);  // bit for bit, not near
  EXPECT_EQ(a.mean_ns, b.mean_ns);
  EXPECT_EQ(a.p99_ns, b.p99_ns);
  EXPECT_EQ(a.total_ns, b.total_ns);
  // And it is the population standard deviation of the values.
  long double sum = 0, squares = 0;
  for (int64_t value : values) sum += value;
  const long double mean = sum / values.size();
  for (int64_t value : values) squares += (value - mean) * (value - mean);
  EXPECT_NEAR(a.stddev_ns, static_cast<double>(std::sqrt(squares / values.size())), 1e-6);
}

}  // namespace
