// Metrics beyond latency: what spans measured besides their duration, the counters a
// sampler recorded over time, and what measuring them cost (names: schema/metric_names.hpp).
//
//   SliceMetricIndex            which argument keys of a trace are metrics, and one slice's
//                               metric values (the tree report, DataFrames).
//   compute_span_metric_statistics  per span name and metric: count, total, mean, min,
//                               p50, p90, p99, max.
//   compute_counter_statistics  per counter track: samples, min, time-weighted mean, max,
//                               first and last sample.
//   parse_metric_cost           RunInfo::extra "metric_cost.<group>" as numbers.
//
// Definitions (docs/metrics-reports.md repeats them for users):
//   - a span metric is a slice argument whose key starts with "metric." and whose value is
//     an integer or a floating-point number (strings and booleans under the prefix are
//     ignored); its name is the key without the prefix, its unit the name's suffix
//     (schema::metric_unit).
//   - percentiles use the same method and code as every other analysis (numpy's 'linear',
//     percentiles_of_unsorted in distribution.hpp), on the values as recorded, fractional
//     ones (watts, percent) included.
//   - the mean of a counter is time-weighted: each sample holds until the next one (a step
//     function, as counter tracks are drawn), averaged over first to last sample; with one
//     sample, or all samples at one instant, it is their plain mean.
//
// Thread-safety: every function is pure and a built SliceMetricIndex is read-only;
// concurrent use on an unchanged trace is safe.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "trace/trace.hpp"

namespace opsight::analyze {

// One metric value of one slice.
struct MetricReading {
  uint32_t metric = 0;    // index into SliceMetricIndex::names()
  double value = 0.0;     // the argument's value
  bool integral = false;  // the argument was an integer (JSON writes it as one)
};

// Indexes the metric arguments of a finalized trace: the metric names present, in display
// order (the metrics of schema/metric_names.hpp first, by group, a change before the levels
// it comes from: rss_delta_bytes, rss_peak_bytes, rss_start_bytes, rss_end_bytes; then any
// other name alphabetically), and a lookup from argument key to metric.
class SliceMetricIndex {
 public:
  static constexpr uint32_t kNotAMetric = std::numeric_limits<uint32_t>::max();

  // One pass over the trace's slice arguments. The index refers to `trace`, which must
  // outlive it unchanged.
  explicit SliceMetricIndex(const trace::Trace& trace);

  // Metric names without the prefix ("cpu_ns", "rss_delta_bytes", ...).
  std::span<const std::string> names() const { return names_; }
  bool empty() const { return names_.empty(); }

  // The metric an argument key stands for, or kNotAMetric.
  uint32_t metric_of_key(trace::StringId key) const {
    return key < metric_of_key_.size() ? metric_of_key_[key] : kNotAMetric;
  }

  // The metric values of slice `row`, ordered by metric index; when a slice carries a key
  // twice, the last value counts.
  std::vector<MetricReading> readings_of(trace::RowIndex row) const;

 private:
  const trace::Trace* trace_;
  std::vector<uint32_t> metric_of_key_;  // by StringId
  std::vector<std::string> names_;
};

// The numeric value of an argument (int or double), or nullopt (string, bool, NaN, ±inf).
std::optional<double> numeric_arg_value(const trace::ArgValue& value);

// Statistics of one metric over the slices of one name that carry it.
struct SpanMetricStatistics {
  trace::StringId span_name = 0;
  uint32_t metric = 0;      // index into the SliceMetricIndex the statistics came from
  std::string metric_name;  // without the prefix
  std::string_view unit;    // schema::metric_unit(metric_name)
  bool integral = true;     // every value was a whole number
  uint64_t count = 0;       // slices that carry the metric
  double total = 0.0;
  double mean = 0.0;
  double min = 0.0;
  double p50 = 0.0;
  double p90 = 0.0;
  double p99 = 0.0;
  double max = 0.0;
};

// Per span name and metric, ordered by span name id, then metric index. Linear in the
// number of slice arguments plus a sort of the metric values.
std::vector<SpanMetricStatistics> compute_span_metric_statistics(const trace::Trace& trace,
                                                                 const SliceMetricIndex& index);

// Statistics of one counter track's samples.
struct CounterStatistics {
  uint32_t counter_track = 0;  // index into Trace::counter_tracks
  int64_t pid = 0;
  std::string name;
  std::string unit;  // the track's own unit, else schema::metric_unit(name)
  uint64_t samples = 0;
  double min = 0.0;
  double mean = 0.0;  // time-weighted (see above)
  double max = 0.0;
  double last = 0.0;  // the value of the last sample
  int64_t first_ts_ns = 0;
  int64_t last_ts_ns = 0;
};

// Every counter track with at least one finite sample, ordered by name, then pid.
std::vector<CounterStatistics> compute_counter_statistics(const trace::Trace& trace);

// What one group of metrics cost: the readings taken and the time spent taking them.
struct MetricCostEntry {
  std::string group;  // "cpu", "memory", ..., or "sampler"
  uint64_t readings = 0;
  int64_t total_ns = 0;
};

// The measured cost of metrics, from RunInfo::extra (schema/metric_names.hpp).
struct MetricCost {
  // Per-span metric groups, costliest first (ties: by name). Their cost is part of the
  // tracer overhead already.
  std::vector<MetricCostEntry> span_groups;
  int64_t span_total_ns = 0;  // the sum over span_groups
  // The background sampler, on its own thread: not part of the tracer overhead.
  std::optional<MetricCostEntry> sampler;

  bool empty() const { return span_groups.empty() && !sampler; }
};

// Reads every "metric_cost.<group>" = "<readings> <total_ns>" of `run.extra`; malformed
// values are skipped, a group named twice (merged traces) adds up.
MetricCost parse_metric_cost(const trace::RunInfo& run);

// The value of RunInfo::extra `key` (the last one when there are several), or nullopt.
std::optional<std::string_view> run_extra_value(const trace::RunInfo& run, std::string_view key);

}  // namespace opsight::analyze
