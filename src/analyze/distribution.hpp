// The summary of one set of durations that every analysis shares: count, total, min,
// mean, exact percentiles, max and standard deviation, the columns of Qualcomm's and the
// Furiosa profiler's latency tables. Per-name statistics (statistics.hpp), per-inference
// breakdowns, operator tables, aggregated call trees and A/B comparisons all summarize
// their durations with summarize_distribution(), so a p99 or a stddev means the same in
// every report. Span metrics (metrics.hpp), whose values may be fractional, use the same
// percentile functions.
//
// Definitions (docs/reports.md repeats them for users):
//   - stddev is the POPULATION standard deviation: sqrt(sum((x - mean)^2) / n), dividing
//     by n (not n - 1): the spread of the calls that were traced, not an estimate for a
//     larger population. numpy.std(values) (ddof=0) gives the same.
//   - the mean is computed from an exact sum, so it stays right where total_ns saturates.
//   - percentiles use linear interpolation between the closest ranks, the same as
//     numpy.percentile(values, q) with its default method='linear': with the values sorted
//     ascending, index = q / 100 * (count - 1); the result is
//     values[floor(index)] + (values[floor(index) + 1] - values[floor(index)]) * fraction.
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
  double stddev_ns = 0.0;  // population standard deviation (divides by count)
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

// The q-th percentile (q in percent, 0..100, clamped) of values sorted ascending, with
// numpy's default linear interpolation. Returns 0 for an empty span.
double percentile_of_sorted(std::span<const int64_t> sorted_values, double q);

// The same percentiles as percentile_of_sorted() would give on the sorted values, computed
// by selection (std::nth_element) instead of a full sort: linear time. `values` is
// reordered; `percents` must be ascending; `results` receives one value per percent
// (results.size() >= percents.size()).
void percentiles_of_unsorted(std::span<int64_t> values, std::span<const double> percents,
                             std::span<double> results);
void percentiles_of_unsorted(std::span<double> values, std::span<const double> percents,
                             std::span<double> results);

// Adds with saturation at the int64 limits (sums of foreign durations near 2^63 ns). The
// branch is never taken on real traces.
inline void add_saturating(int64_t& sum, int64_t value) {
  if (__builtin_add_overflow(sum, value, &sum)) sum = value > 0 ? INT64_MAX : INT64_MIN;
}

}  // namespace opsight::analyze
