#include "analyze/distribution.hpp"

#include <algorithm>
#include <cmath>

#include "analyze/statistics.hpp"

namespace opsight::analyze {

Distribution summarize_distribution(std::span<int64_t> values) {
  Distribution result;
  if (values.empty()) return result;
  result.count = values.size();
  result.min_ns = values[0];
  result.max_ns = values[0];
  // The mean from an exact sum: total_ns saturates on absurd inputs, the mean must not.
  long double exact_sum = 0;
  for (int64_t value : values) {
    add_saturating(result.total_ns, value);
    exact_sum += static_cast<long double>(value);
    result.min_ns = std::min(result.min_ns, value);
    result.max_ns = std::max(result.max_ns, value);
  }
  result.mean_ns = static_cast<double>(exact_sum / static_cast<long double>(result.count));
  double squared_deviations = 0.0;
  for (int64_t value : values) {
    double deviation = static_cast<double>(value) - result.mean_ns;
    squared_deviations += deviation * deviation;
  }
  result.stddev_ns = std::sqrt(squared_deviations / static_cast<double>(result.count));
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
