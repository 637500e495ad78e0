#include "cuda/clock_alignment.hpp"

#include <time.h>

#include <vector>

namespace opsight::cuda {

std::optional<ClockOffset> estimate_clock_offset(std::span<const ClockSample> samples) {
  const ClockSample* best = nullptr;
  for (const ClockSample& sample : samples) {
    if (sample.local_after_ns < sample.local_before_ns) continue;
    if (best == nullptr || sample.local_after_ns - sample.local_before_ns <
                               best->local_after_ns - best->local_before_ns)
      best = &sample;
  }
  if (best == nullptr) return std::nullopt;
  int64_t bracket = best->local_after_ns - best->local_before_ns;
  int64_t midpoint = best->local_before_ns + bracket / 2;
  return ClockOffset{best->other_ns - midpoint, (bracket + 1) / 2};
}

uint64_t monotonic_clock_ns() {
  timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<uint64_t>(now.tv_sec) * 1'000'000'000u + static_cast<uint64_t>(now.tv_nsec);
}

std::optional<ClockOffset> measure_clock_offset(int64_t (*read_other)(), int samples) {
  std::vector<ClockSample> readings;
  readings.reserve(static_cast<size_t>(samples));
  for (int i = 0; i < samples; ++i) {
    ClockSample sample;
    sample.local_before_ns = static_cast<int64_t>(monotonic_clock_ns());
    sample.other_ns = read_other();
    sample.local_after_ns = static_cast<int64_t>(monotonic_clock_ns());
    readings.push_back(sample);
  }
  return estimate_clock_offset(readings);
}

}  // namespace opsight::cuda
