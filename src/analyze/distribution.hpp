// The summary of one set of durations that the analyses share: count, total, min, max,
// mean, population standard deviation and exact percentiles (numpy's linear method, see
// statistics.hpp), the columns of Qualcomm's and the Furiosa profiler's latency tables.
//
// Thread-safety: pure functions.
#pragma once

#include <array>
#include <cstdint>
#include <span>

namespace opsight::analyze {

// The percentiles a Distribution carries, in percent, ascending.
inline constexpr std::array<double, 7> kDistributionPercentiles = {50.0, 75.0, 90.0, 95.0,
                                                                   97.0, 99.0, 99.9};

struct Distribution {
  uint64_t count = 0;
  int64_t total_ns = 0;  // saturating sum
  int64_t min_ns = 0;
  int64_t max_ns = 0;
  double mean_ns = 0.0;
  double stddev_ns = 0.0;  // population
  double p50_ns = 0.0;
  double p75_ns = 0.0;
  double p90_ns = 0.0;
  double p95_ns = 0.0;
  double p97_ns = 0.0;
  double p99_ns = 0.0;
  double p999_ns = 0.0;
};

// Summarizes `values` (reordered in place, by selection: linear time). All zero for an
// empty span.
Distribution summarize_distribution(std::span<int64_t> values);

// Adds with saturation at the int64 limits (sums of foreign durations near 2^63 ns).
inline void add_saturating(int64_t& sum, int64_t value) {
  if (__builtin_add_overflow(sum, value, &sum)) sum = value > 0 ? INT64_MAX : INT64_MIN;
}

}  // namespace opsight::analyze
