// Per-name statistics over a trace's slices, and the tracer's own overhead.
//
// compute_name_statistics() groups every slice by its interned name (a vector indexed by
// StringId, never a hash of strings) and gives, per distinct name: count, inclusive total,
// self time, min, max, mean, population standard deviation, exact percentiles p50, p90,
// p95, p97, p99 and p99.9, the most common category, and the share of traced time.
//
// Definitions (docs/reports.md repeats them for users):
//   - self time of a slice = its duration minus the durations of its direct children (the
//     slices whose `parent` is that slice). After Trace::finalize() children nest inside
//     their parent and do not overlap each other, so this is the time not covered by them.
//   - stddev is the POPULATION standard deviation: sqrt(sum((x - mean)^2) / count).
//   - percentiles use linear interpolation between the closest ranks, the same as
//     numpy.percentile(values, q) with its default method='linear': with the values sorted
//     ascending, index = q / 100 * (count - 1); the result is
//     values[floor(index)] + (values[floor(index) + 1] - values[floor(index)]) * fraction.
//   - share of traced time = total_ns / traced_time_ns(trace). Nested names each count
//     their inclusive time, so shares of different names can add up to more than 1.
//
// Thread-safety: every function here is pure: it reads the trace (which must not be
// modified meanwhile) and returns a new value; concurrent calls are safe.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "analyze/metrics.hpp"
#include "trace/trace.hpp"

namespace opsight::analyze {

// The percentiles every summary reports, in percent, ascending.
inline constexpr std::array<double, 6> kSummaryPercentiles = {50.0, 90.0, 95.0, 97.0, 99.0, 99.9};

// The q-th percentile (q in percent, 0..100, clamped) of values sorted ascending, with
// numpy's default linear interpolation. Returns 0 for an empty span.
double percentile_of_sorted(std::span<const int64_t> sorted_values, double q);

// The same percentiles as percentile_of_sorted() would give on the sorted values, computed
// by selection (std::nth_element) instead of a full sort: linear time, the hot path of
// compute_name_statistics(). `values` is reordered; `percents` must be ascending;
// `results` receives one value per percent (results.size() >= percents.size()).
void percentiles_of_unsorted(std::span<int64_t> values, std::span<const double> percents,
                             std::span<double> results);
void percentiles_of_unsorted(std::span<double> values, std::span<const double> percents,
                             std::span<double> results);

// Statistics of every slice that carries one name.
struct NameStatistics {
  trace::StringId name = 0;
  trace::StringId category = 0;  // the most common category among its slices
  uint64_t count = 0;
  int64_t total_ns = 0;  // inclusive: sum of durations
  int64_t self_ns = 0;   // sum of self times (see the definitions above)
  int64_t min_ns = 0;
  int64_t max_ns = 0;
  double mean_ns = 0.0;
  double stddev_ns = 0.0;  // population standard deviation
  double p50_ns = 0.0;
  double p90_ns = 0.0;
  double p95_ns = 0.0;
  double p97_ns = 0.0;
  double p99_ns = 0.0;
  double p999_ns = 0.0;
  double share_of_traced = 0.0;  // total_ns / traced time, a fraction (0.25 = 25%)
};

struct TraceStatistics {
  // One entry per distinct slice name, ordered by StringId (the order names were first
  // interned); reports sort them as they need.
  std::vector<NameStatistics> names;
  uint64_t slice_count = 0;
  int64_t traced_ns = 0;  // the denominator of share_of_traced (see traced_time_ns)
};

// Per-name statistics of all slices of a finalized trace. Linear time in the number of
// slices plus a selection per name; one temporary array of durations (8 bytes a slice).
TraceStatistics compute_name_statistics(const trace::Trace& trace);

// Self time of every slice, indexed by row: duration minus the durations of its direct
// children, never negative.
std::vector<int64_t> compute_self_times(const trace::Trace& trace);

// The traced time of a trace: run.traced_ns when the recorder wrote it, otherwise the
// span of Trace::time_bounds() (last end minus first start).
int64_t traced_time_ns(const trace::Trace& trace);

// What the tracer cost, as every report shows it (HiQ's "transparent" tracing).
struct OverheadSummary {
  // run.overhead_ns, or the sum of the tracks' overhead_ns when the run total is 0.
  int64_t overhead_ns = 0;
  // Whether the trace says anything about overhead at all: false for foreign traces
  // (Chrome JSON, PyTorch profiler...) that recorded no overhead, where 0 would mislead.
  bool overhead_known = false;
  int64_t traced_ns = 0;        // traced_time_ns(trace)
  double share = 0.0;           // overhead_ns / traced_ns as a fraction; 0 when traced_ns is 0
  uint64_t events_dropped = 0;  // run.events_dropped, or the sum over tracks if it is 0
  // What metrics cost (RunInfo::extra "metric_cost.*"); empty when the trace has no such
  // figures. The per-span groups are part of overhead_ns; the sampler is not.
  MetricCost metric_cost;
};

OverheadSummary summarize_overhead(const trace::Trace& trace);

}  // namespace opsight::analyze
