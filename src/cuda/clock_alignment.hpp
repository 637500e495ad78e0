// Bringing GPU timestamps onto the recorder's clock (CLOCK_MONOTONIC ns).
//
// The exact way is CUPTI's timestamp callback (cuptiActivityRegisterTimestampCallback):
// CUPTI then takes every CPU timestamp from our clock and converts the GPU's own
// timestamps to it, so a kernel's start and the operator that launched it are on one clock
// with no offset to estimate. Where the callback cannot be registered (an older CUPTI),
// CUPTI keeps its own clock (CLOCK_REALTIME on Linux) and the offset between the two is
// measured: read ours, read CUPTI's, read ours again, many times, and keep the sample with
// the shortest bracket; its midpoint against CUPTI's reading is the offset, and half the
// bracket bounds the error. The error is stated in the run's metadata either way.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

namespace opsight::cuda {

// One read of the other clock bracketed by two reads of ours.
struct ClockSample {
  int64_t local_before_ns = 0;
  int64_t other_ns = 0;
  int64_t local_after_ns = 0;
};

struct ClockOffset {
  int64_t other_minus_local_ns = 0;  // subtract from the other clock's time to get ours
  int64_t uncertainty_ns = 0;        // half the shortest bracket
  int64_t to_local(int64_t other_ns) const { return other_ns - other_minus_local_ns; }
};

// The offset from the sample with the shortest bracket; none if no sample is usable (a
// bracket that runs backwards).
std::optional<ClockOffset> estimate_clock_offset(std::span<const ClockSample> samples);

// Measures the offset of `read_other` (ns) against CLOCK_MONOTONIC with `samples` reads.
std::optional<ClockOffset> measure_clock_offset(int64_t (*read_other)(), int samples = 64);

// CLOCK_MONOTONIC in ns: what CUPTI's timestamp callback returns.
uint64_t monotonic_clock_ns();

}  // namespace opsight::cuda
