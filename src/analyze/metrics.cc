#include "analyze/metrics.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <map>
#include <tuple>
#include <utility>

#include "analyze/distribution.hpp"
#include "analyze/statistics.hpp"
#include "schema/metric_names.hpp"

namespace opsight::analyze {

namespace {

// The display order of the metrics opsight records: by group, a change before the levels
// it is computed from. Other names follow, alphabetically.
constexpr std::array<std::string_view, 17> kKnownMetricOrder = {
    schema::kMetricCpuNs,          schema::kMetricRssDelta,       schema::kMetricRssPeak,
    schema::kMetricRssStart,       schema::kMetricRssEnd,         schema::kMetricHeapDelta,
    schema::kMetricHeapPeak,       schema::kMetricIoRead,         schema::kMetricIoWrite,
    schema::kMetricStorageRead,    schema::kMetricStorageWrite,   schema::kMetricNetSent,
    schema::kMetricNetReceived,    schema::kMetricGpuMemoryDelta, schema::kMetricGpuMemoryUsed,
    schema::kMetricGpuUtilization, schema::kMetricGpuPower};

size_t display_rank(std::string_view metric_name) {
  auto known = std::find(kKnownMetricOrder.begin(), kKnownMetricOrder.end(), metric_name);
  return static_cast<size_t>(known - kKnownMetricOrder.begin());  // unknown: size()
}

bool has_metric_prefix(std::string_view key) {
  return key.size() > schema::kMetricArgPrefix.size() &&
         key.substr(0, schema::kMetricArgPrefix.size()) == schema::kMetricArgPrefix;
}

// The percentiles a SpanMetricStatistics carries, in percent, ascending.
constexpr std::array<double, 3> kMetricPercentiles = {50.0, 90.0, 99.0};

// Summarizes the values of one (span name, metric) group; `values` is not empty.
void summarize_metric_values(std::span<const double> values, SpanMetricStatistics& entry) {
  entry.count = values.size();
  entry.min = values[0];
  entry.max = values[0];
  long double sum = 0;
  for (double value : values) {
    sum += value;
    entry.min = std::min(entry.min, value);
    entry.max = std::max(entry.max, value);
    if (value != std::floor(value)) entry.integral = false;
  }
  entry.total = static_cast<double>(sum);
  entry.mean = static_cast<double>(sum / static_cast<long double>(values.size()));
  std::vector<double> unsorted(values.begin(), values.end());
  std::array<double, kMetricPercentiles.size()> percentiles{};
  percentiles_of_unsorted(std::span<double>(unsorted), kMetricPercentiles, percentiles);
  entry.p50 = percentiles[0];
  entry.p90 = percentiles[1];
  entry.p99 = percentiles[2];
}

// Step-function mean of samples ordered by time (see the header).
double time_weighted_mean(std::span<const std::pair<int64_t, double>> samples) {
  const int64_t span_ns = samples.back().first - samples.front().first;
  long double sum = 0;
  if (span_ns <= 0) {
    for (const auto& sample : samples) sum += sample.second;
    return static_cast<double>(sum / static_cast<long double>(samples.size()));
  }
  for (size_t i = 0; i + 1 < samples.size(); ++i)
    sum += static_cast<long double>(samples[i].second) *
           static_cast<long double>(samples[i + 1].first - samples[i].first);
  return static_cast<double>(sum / static_cast<long double>(span_ns));
}

// "<readings> <total_ns>", or nullopt.
std::optional<std::pair<uint64_t, int64_t>> parse_cost_value(std::string_view text) {
  uint64_t readings = 0;
  int64_t total_ns = 0;
  const char* end = text.data() + text.size();
  auto [after_readings, readings_error] = std::from_chars(text.data(), end, readings);
  if (readings_error != std::errc() || after_readings == end || *after_readings != ' ')
    return std::nullopt;
  const char* total_begin = after_readings;
  while (total_begin != end && *total_begin == ' ') ++total_begin;
  auto [after_total, total_error] = std::from_chars(total_begin, end, total_ns);
  if (total_error != std::errc() || after_total != end || total_ns < 0) return std::nullopt;
  return std::pair{readings, total_ns};
}

}  // namespace

std::optional<double> numeric_arg_value(const trace::ArgValue& value) {
  double number = 0.0;
  if (value.type == trace::ArgType::kInt)
    number = static_cast<double>(value.int_value);
  else if (value.type == trace::ArgType::kDouble)
    number = value.double_value;
  else
    return std::nullopt;
  if (!std::isfinite(number)) return std::nullopt;
  return number;
}

SliceMetricIndex::SliceMetricIndex(const trace::Trace& trace)
    : trace_(&trace), metric_of_key_(trace.strings.size(), kNotAMetric) {
  // Per key id: not looked at yet, has the prefix (but no numeric value so far), a metric,
  // or something else. Each distinct key's text is compared once.
  enum class KeyState : uint8_t { kUnseen, kPrefixed, kMetric, kOther };
  std::vector<KeyState> states(trace.strings.size(), KeyState::kUnseen);
  std::vector<trace::StringId> metric_keys;
  const trace::ArgTable& args = trace.slice_args;
  for (size_t arg = 0; arg < args.size(); ++arg) {
    const trace::StringId key = args.key[arg];
    if (key >= states.size()) continue;
    KeyState& state = states[key];
    if (state == KeyState::kMetric || state == KeyState::kOther) continue;
    if (state == KeyState::kUnseen) {
      state = has_metric_prefix(trace.str(key)) ? KeyState::kPrefixed : KeyState::kOther;
      if (state == KeyState::kOther) continue;
    }
    if (numeric_arg_value(args.value[arg])) {
      state = KeyState::kMetric;
      metric_keys.push_back(key);
    }
  }
  auto metric_name = [&trace](trace::StringId key) {
    return trace.str(key).substr(schema::kMetricArgPrefix.size());
  };
  std::sort(metric_keys.begin(), metric_keys.end(),
            [&metric_name](trace::StringId a, trace::StringId b) {
              return std::tuple(display_rank(metric_name(a)), metric_name(a)) <
                     std::tuple(display_rank(metric_name(b)), metric_name(b));
            });
  for (trace::StringId key : metric_keys) {
    metric_of_key_[key] = static_cast<uint32_t>(names_.size());
    names_.emplace_back(metric_name(key));
  }
}

std::vector<MetricReading> SliceMetricIndex::readings_of(trace::RowIndex row) const {
  std::vector<MetricReading> readings;
  const trace::Trace& trace = *trace_;
  if (names_.empty() || static_cast<size_t>(row) + 1 >= trace.slices.args_begin.size())
    return readings;
  for (trace::RowIndex arg = trace.slices.args_begin[row]; arg < trace.slices.args_begin[row + 1];
       ++arg) {
    uint32_t metric = metric_of_key(trace.slice_args.key[arg]);
    if (metric == kNotAMetric) continue;
    const trace::ArgValue& value = trace.slice_args.value[arg];
    if (auto number = numeric_arg_value(value))
      readings.push_back({metric, *number, value.type == trace::ArgType::kInt});
  }
  // Ordered by metric; of a repeated key the last value stays.
  std::stable_sort(
      readings.begin(), readings.end(),
      [](const MetricReading& a, const MetricReading& b) { return a.metric < b.metric; });
  auto same_metric = [](const MetricReading& a, const MetricReading& b) {
    return a.metric == b.metric;
  };
  std::reverse(readings.begin(), readings.end());
  readings.erase(std::unique(readings.begin(), readings.end(), same_metric), readings.end());
  std::reverse(readings.begin(), readings.end());
  return readings;
}

std::vector<SpanMetricStatistics> compute_span_metric_statistics(const trace::Trace& trace,
                                                                 const SliceMetricIndex& index) {
  std::vector<SpanMetricStatistics> statistics;
  if (index.empty()) return statistics;
  // (span name << 32 | metric, value) of every metric argument, grouped by a sort.
  std::vector<std::pair<uint64_t, double>> readings;
  const trace::ArgTable& args = trace.slice_args;
  for (size_t arg = 0; arg < args.size(); ++arg) {
    uint32_t metric = index.metric_of_key(args.key[arg]);
    if (metric == SliceMetricIndex::kNotAMetric || args.owner[arg] >= trace.slices.size()) continue;
    std::optional<double> value = numeric_arg_value(args.value[arg]);
    if (!value) continue;
    uint64_t group = (static_cast<uint64_t>(trace.slices.name[args.owner[arg]]) << 32) | metric;
    readings.emplace_back(group, *value);
  }
  std::sort(readings.begin(), readings.end());
  std::vector<double> values;
  for (size_t begin = 0; begin < readings.size();) {
    const uint64_t group = readings[begin].first;
    values.clear();
    size_t end = begin;
    for (; end < readings.size() && readings[end].first == group; ++end)
      values.push_back(readings[end].second);
    SpanMetricStatistics entry;
    entry.span_name = static_cast<trace::StringId>(group >> 32);
    entry.metric = static_cast<uint32_t>(group & 0xFFFFFFFFu);
    entry.metric_name = index.names()[entry.metric];
    entry.unit = schema::metric_unit(entry.metric_name);
    summarize_metric_values(values, entry);
    statistics.push_back(std::move(entry));
    begin = end;
  }
  return statistics;
}

std::vector<CounterStatistics> compute_counter_statistics(const trace::Trace& trace) {
  const trace::CounterTable& counters = trace.counters;
  // Samples grouped by track, in time order within a track (ties: row order).
  std::vector<std::vector<std::pair<int64_t, double>>> samples_by_track(
      trace.counter_tracks.size());
  for (size_t row = 0; row < counters.size(); ++row) {
    uint32_t track = counters.counter_track[row];
    if (track >= samples_by_track.size() || !std::isfinite(counters.value[row])) continue;
    samples_by_track[track].emplace_back(counters.ts[row], counters.value[row]);
  }
  std::vector<CounterStatistics> statistics;
  for (uint32_t track = 0; track < samples_by_track.size(); ++track) {
    auto& samples = samples_by_track[track];
    if (samples.empty()) continue;
    std::stable_sort(samples.begin(), samples.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    const trace::CounterTrack& counter_track = trace.counter_tracks[track];
    CounterStatistics entry;
    entry.counter_track = track;
    entry.pid = counter_track.pid;
    entry.name = trace.str(counter_track.name);
    std::string_view unit = trace.str(counter_track.unit);
    entry.unit = unit.empty() ? schema::metric_unit(entry.name) : unit;
    entry.samples = samples.size();
    entry.min = samples[0].second;
    entry.max = samples[0].second;
    for (const auto& sample : samples) {
      entry.min = std::min(entry.min, sample.second);
      entry.max = std::max(entry.max, sample.second);
    }
    entry.mean = time_weighted_mean(samples);
    entry.last = samples.back().second;
    entry.first_ts_ns = samples.front().first;
    entry.last_ts_ns = samples.back().first;
    statistics.push_back(std::move(entry));
  }
  std::sort(statistics.begin(), statistics.end(),
            [](const CounterStatistics& a, const CounterStatistics& b) {
              return std::tie(a.name, a.pid, a.counter_track) <
                     std::tie(b.name, b.pid, b.counter_track);
            });
  return statistics;
}

MetricCost parse_metric_cost(const trace::RunInfo& run) {
  MetricCost cost;
  std::map<std::string, MetricCostEntry, std::less<>> groups;
  for (const auto& [key, value] : run.extra) {
    std::string_view name(key);
    if (name.size() <= schema::kMetricCostPrefix.size() ||
        name.substr(0, schema::kMetricCostPrefix.size()) != schema::kMetricCostPrefix)
      continue;
    std::optional<std::pair<uint64_t, int64_t>> parsed = parse_cost_value(value);
    if (!parsed) continue;
    std::string group(name.substr(schema::kMetricCostPrefix.size()));
    MetricCostEntry& entry = groups[group];
    entry.group = group;
    entry.readings += parsed->first;
    add_saturating(entry.total_ns, parsed->second);
  }
  for (auto& [group, entry] : groups) {
    if (group == schema::kMetricCostSampler) {
      cost.sampler = std::move(entry);
      continue;
    }
    add_saturating(cost.span_total_ns, entry.total_ns);
    cost.span_groups.push_back(std::move(entry));
  }
  std::stable_sort(
      cost.span_groups.begin(), cost.span_groups.end(),
      [](const MetricCostEntry& a, const MetricCostEntry& b) { return a.total_ns > b.total_ns; });
  return cost;
}

std::optional<std::string_view> run_extra_value(const trace::RunInfo& run, std::string_view key) {
  for (auto entry = run.extra.rbegin(); entry != run.extra.rend(); ++entry)
    if (entry->first == key) return std::string_view(entry->second);
  return std::nullopt;
}

}  // namespace opsight::analyze
