#include "analyze/distribution.hpp"

#include <algorithm>
#include <cmath>

namespace opsight::analyze {

namespace {

// numpy's _lerp: the two halves interpolate from opposite ends so that fraction 1 gives
// exactly `upper`; mirroring it keeps our results bit-identical to numpy.percentile.
double interpolate(double lower, double upper, double fraction) {
  double difference = upper - lower;
  if (fraction >= 0.5) return upper - difference * (1.0 - fraction);
  return lower + difference * fraction;
}

// Where percentile q (in percent) falls among `count` sorted values: the lower rank and
// the fraction of the way to the next one, as numpy computes them for method='linear'.
struct Rank {
  size_t lower = 0;
  double fraction = 0.0;
};

Rank rank_of_percentile(size_t count, double q) {
  if (count <= 1 || !(q > 0.0)) return {};  // also catches NaN
  if (q >= 100.0) return {count - 1, 0.0};
  double quantile = q / 100.0;
  // numpy's 'linear' method: the virtual index is quantile * (n - 1), computed in that
  // form (the algebraically equal n * q + 1 - q - 1 rounds differently).
  double index = static_cast<double>(count - 1) * quantile;
  double floor_index = std::floor(index);
  if (floor_index < 0.0) return {};
  auto lower = static_cast<size_t>(floor_index);
  if (lower >= count - 1) return {count - 1, 0.0};
  return {lower, index - floor_index};
}

// Integer (durations, bytes) and floating-point (watts, percent) values share one
// implementation.
template <typename Value>
double percentile_of_sorted_values(std::span<const Value> sorted_values, double q) {
  if (sorted_values.empty()) return 0.0;
  Rank rank = rank_of_percentile(sorted_values.size(), q);
  auto lower = static_cast<double>(sorted_values[rank.lower]);
  if (rank.fraction == 0.0) return lower;
  auto upper = static_cast<double>(sorted_values[rank.lower + 1]);
  return interpolate(lower, upper, rank.fraction);
}

template <typename Value>
void select_percentiles(std::span<Value> values, std::span<const double> percents,
                        std::span<double> results) {
  const size_t count = values.size();
  if (count == 0) {
    for (size_t i = 0; i < percents.size() && i < results.size(); ++i) results[i] = 0.0;
    return;
  }
  // Small groups: a sort is cheaper than repeated selection.
  if (count <= 32) {
    std::sort(values.begin(), values.end());
    for (size_t i = 0; i < percents.size() && i < results.size(); ++i)
      results[i] = percentile_of_sorted_values(std::span<const Value>(values), percents[i]);
    return;
  }
  // Invariant: values[0, placed) are all <= values[placed, count), and the last position
  // placed (placed - 1) holds the value a full sort would put there. Percents ascend, so
  // each needed rank is either already placed or lies in [placed, count).
  size_t placed = 0;
  for (size_t i = 0; i < percents.size() && i < results.size(); ++i) {
    Rank rank = rank_of_percentile(count, percents[i]);
    if (rank.lower >= placed) {
      std::nth_element(values.begin() + static_cast<ptrdiff_t>(placed),
                       values.begin() + static_cast<ptrdiff_t>(rank.lower), values.end());
      placed = rank.lower + 1;
    }
    auto lower = static_cast<double>(values[rank.lower]);
    if (rank.fraction == 0.0) {
      results[i] = lower;
      continue;
    }
    size_t upper_rank = rank.lower + 1;
    if (upper_rank >= placed) {
      // The next rank in sorted order is the smallest of what lies above.
      auto smallest =
          std::min_element(values.begin() + static_cast<ptrdiff_t>(upper_rank), values.end());
      std::iter_swap(smallest, values.begin() + static_cast<ptrdiff_t>(upper_rank));
      placed = upper_rank + 1;
    }
    results[i] = interpolate(lower, static_cast<double>(values[upper_rank]), rank.fraction);
  }
}

}  // namespace

double percentile_of_sorted(std::span<const int64_t> sorted_values, double q) {
  return percentile_of_sorted_values(sorted_values, q);
}

void percentiles_of_unsorted(std::span<int64_t> values, std::span<const double> percents,
                             std::span<double> results) {
  select_percentiles(values, percents, results);
}
void percentiles_of_unsorted(std::span<double> values, std::span<const double> percents,
                             std::span<double> results) {
  select_percentiles(values, percents, results);
}

Distribution summarize_distribution(std::span<int64_t> values) {
  Distribution result;
  if (values.empty()) return result;
  result.count = values.size();
  result.min_ns = values[0];
  result.max_ns = values[0];
  // The mean from an exact sum: total_ns saturates on absurd inputs, the mean must not.
  // On every real trace no partial sum overflows: the int64 sum is then exact, and so is
  // its long double copy. Only otherwise are the values summed again in long double.
  // The squares are summed exactly too (in 128 bits), so that the standard deviation does
  // not depend on the order of the values: a streaming report, which sees them in the order
  // spans end, gives the whole-trace report's figures to the last bit.
  __extension__ using Wide = __int128;
  int64_t sum = 0;
  Wide sum_of_squares = 0;
  bool overflowed = false;
  bool squares_overflowed = false;
  for (int64_t value : values) {
    overflowed |= __builtin_add_overflow(sum, value, &sum);
    squares_overflowed |=
        __builtin_add_overflow(sum_of_squares, Wide{value} * value, &sum_of_squares);
    result.min_ns = std::min(result.min_ns, value);
    result.max_ns = std::max(result.max_ns, value);
  }
  long double exact_sum = static_cast<long double>(sum);
  if (overflowed) {
    exact_sum = 0;
    for (int64_t value : values) {
      add_saturating(result.total_ns, value);
      exact_sum += static_cast<long double>(value);
    }
  } else {
    result.total_ns = sum;
  }
  result.mean_ns = static_cast<double>(exact_sum / static_cast<long double>(result.count));
  // n * sum(x^2) - sum(x)^2 = n^2 * variance, exact in 128 bits on every real trace.
  Wide scaled = 0;
  if (!overflowed && !squares_overflowed &&
      !__builtin_mul_overflow(sum_of_squares, static_cast<Wide>(result.count), &scaled)) {
    Wide variance_numerator = scaled - Wide{sum} * sum;
    long double count = static_cast<long double>(result.count);
    result.stddev_ns = static_cast<double>(
        std::sqrt(static_cast<long double>(variance_numerator) / (count * count)));
  } else {  // absurd values: the two-pass sum in doubles (then order-dependent)
    double squared_deviations = 0.0;
    for (int64_t value : values) {
      double deviation = static_cast<double>(value) - result.mean_ns;
      squared_deviations += deviation * deviation;
    }
    result.stddev_ns = std::sqrt(squared_deviations / static_cast<double>(result.count));
  }
  std::array<double, kDistributionPercentiles.size()> percentiles{};
  percentiles_of_unsorted(values, kDistributionPercentiles, percentiles);
  result.p50_ns = percentiles[0];
  result.p75_ns = percentiles[1];
  result.p90_ns = percentiles[2];
  result.p95_ns = percentiles[3];
  result.p97_ns = percentiles[4];
  result.p99_ns = percentiles[5];
  result.p999_ns = percentiles[6];
  return result;
}

}  // namespace opsight::analyze
