#include "analyze/statistics.hpp"

#include <algorithm>
#include <charconv>
#include <limits>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "schema/metric_names.hpp"

namespace opsight::analyze {

namespace {

// Running sums for one name during the first pass over the slices.
struct NameAccumulator {
  uint64_t count = 0;
  int64_t total_ns = 0;
  int64_t self_ns = 0;
  trace::StringId first_category = 0;
  bool mixed_categories = false;
};

// Picks the most common category of every name whose slices carry more than one (rare:
// a second pass over the slices, only over the names that need it). Ties go to the
// category interned first.
void resolve_mixed_categories(const trace::SliceTable& slices,
                              std::vector<NameAccumulator>& accumulators,
                              std::vector<trace::StringId>& category_of_name) {
  std::unordered_map<uint64_t, uint64_t> counts;  // (name << 32 | category) -> slices
  for (size_t row = 0; row < slices.size(); ++row) {
    trace::StringId name = slices.name[row];
    if (!accumulators[name].mixed_categories) continue;
    ++counts[(static_cast<uint64_t>(name) << 32) | slices.category[row]];
  }
  std::vector<uint64_t> best_count(accumulators.size(), 0);
  for (const auto& [key, count] : counts) {
    auto name = static_cast<trace::StringId>(key >> 32);
    auto category = static_cast<trace::StringId>(key & 0xFFFFFFFFu);
    if (count > best_count[name] ||
        (count == best_count[name] && category < category_of_name[name])) {
      best_count[name] = count;
      category_of_name[name] = category;
    }
  }
}

}  // namespace

int64_t traced_time_ns(const trace::Trace& trace) {
  if (trace.run.traced_ns > 0) return trace.run.traced_ns;
  auto [first, last] = trace.time_bounds();
  return last - first;
}

std::vector<int64_t> compute_self_times(const trace::Trace& trace) {
  const trace::SliceTable& slices = trace.slices;
  std::vector<int64_t> self_times(slices.dur.begin(), slices.dur.end());
  for (size_t row = 0; row < slices.size(); ++row) {
    trace::RowIndex parent = slices.parent[row];
    if (parent != trace::kNoRow) self_times[parent] -= slices.dur[row];
  }
  for (int64_t& self_time : self_times) self_time = std::max<int64_t>(self_time, 0);
  return self_times;
}

TraceStatistics compute_name_statistics(const trace::Trace& trace) {
  const trace::SliceTable& slices = trace.slices;
  const size_t slice_count = slices.size();
  TraceStatistics statistics;
  statistics.slice_count = slice_count;
  statistics.traced_ns = traced_time_ns(trace);
  if (slice_count == 0) return statistics;

  // Pass 1: counts, totals, self times and categories per name id.
  size_t name_capacity = trace.strings.size();
  for (trace::StringId name : slices.name)
    name_capacity = std::max<size_t>(name_capacity, name + 1);
  std::vector<NameAccumulator> accumulators(name_capacity);
  bool any_mixed_categories = false;
  for (size_t row = 0; row < slice_count; ++row) {
    NameAccumulator& accumulator = accumulators[slices.name[row]];
    const int64_t duration = slices.dur[row];
    const trace::StringId category = slices.category[row];
    if (accumulator.count == 0) {
      accumulator.first_category = category;
    } else if (category != accumulator.first_category && !accumulator.mixed_categories) {
      accumulator.mixed_categories = true;
      any_mixed_categories = true;
    }
    ++accumulator.count;
    add_saturating(accumulator.total_ns, duration);
    add_saturating(accumulator.self_ns, duration);
    const trace::RowIndex parent = slices.parent[row];
    if (parent != trace::kNoRow)
      add_saturating(accumulators[slices.name[parent]].self_ns, -duration);
  }
  std::vector<trace::StringId> category_of_name(name_capacity);
  for (size_t name = 0; name < name_capacity; ++name)
    category_of_name[name] = accumulators[name].first_category;
  if (any_mixed_categories) resolve_mixed_categories(slices, accumulators, category_of_name);

  // Pass 2: scatter durations into one array grouped by name (a counting sort by name).
  std::vector<size_t> group_begin(name_capacity + 1, 0);
  for (size_t name = 0; name < name_capacity; ++name)
    group_begin[name + 1] = group_begin[name] + accumulators[name].count;
  std::vector<int64_t> grouped_durations(slice_count);
  {
    std::vector<size_t> cursor(group_begin.begin(), group_begin.end() - 1);
    for (size_t row = 0; row < slice_count; ++row)
      grouped_durations[cursor[slices.name[row]]++] = slices.dur[row];
  }

  // Pass 3: per name, the distribution of its durations (the percentiles by selection).
  const double traced = static_cast<double>(statistics.traced_ns);
  for (size_t name = 0; name < name_capacity; ++name) {
    const NameAccumulator& accumulator = accumulators[name];
    if (accumulator.count == 0) continue;
    std::span<int64_t> durations(grouped_durations.data() + group_begin[name],
                                 static_cast<size_t>(accumulator.count));
    NameStatistics entry;
    static_cast<Distribution&>(entry) = summarize_distribution(durations);
    entry.name = static_cast<trace::StringId>(name);
    entry.category = category_of_name[name];
    entry.self_ns = std::max<int64_t>(accumulator.self_ns, 0);
    entry.share_of_traced = traced > 0.0 ? static_cast<double>(entry.total_ns) / traced : 0.0;
    statistics.names.push_back(entry);
  }
  return statistics;
}

OverheadSummary summarize_overhead(const trace::Trace& trace) {
  OverheadSummary summary;
  int64_t track_overhead = 0;
  uint64_t track_drops = 0;
  uint64_t track_events = 0;
  for (const trace::Track& track : trace.tracks) {
    track_overhead += track.overhead_ns;
    track_drops += track.events_dropped;
    track_events += track.events_recorded;
  }
  summary.overhead_ns = trace.run.overhead_ns != 0 ? trace.run.overhead_ns : track_overhead;
  // The run's total counts every thread's drops (the native footer); the tracks break the
  // same drops down, so they are a fallback, never added to it.
  summary.events_dropped = trace.run.events_dropped != 0 ? trace.run.events_dropped : track_drops;
  // A foreign trace (Chrome JSON, PyTorch profiler, ONNX Runtime) says nothing about a
  // tracer's cost, even once converted to .opsight or stored as a run: the native reader
  // then counts the events it read, which must not make a cost of 0 look measured.
  // (the native reader keeps the original format under RunInfo::extra "converted_from").
  bool foreign = !trace.run.source_format.empty() && trace.run.source_format != "opsight";
  for (const auto& [key, value] : trace.run.extra)
    if (key == "converted_from" && !value.empty() && value != "opsight") foreign = true;
  summary.overhead_known = summary.overhead_ns != 0 || summary.events_dropped != 0 ||
                           (!foreign && (track_events != 0 || !trace.run.opsight_version.empty() ||
                                         trace.run.source_format == "opsight"));
  summary.traced_ns = traced_time_ns(trace);
  summary.share = summary.traced_ns > 0 ? static_cast<double>(summary.overhead_ns) /
                                              static_cast<double>(summary.traced_ns)
                                        : 0.0;
  summary.metric_cost = parse_metric_cost(trace.run);
  summary.exports = parse_export_outcomes(trace.run);
  summary.sampling = parse_sampling(trace.run);
  summary.ring = parse_ring(trace.run);
  return summary;
}

RingSummary parse_ring(const trace::RunInfo& run) {
  RingSummary ring;
  auto number = [](const std::string& text) -> uint64_t {
    uint64_t value = 0;
    auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
    return error == std::errc() && end == text.data() + text.size() ? value : 0;
  };
  auto as_signed = [](uint64_t value) {
    return static_cast<int64_t>(std::min<uint64_t>(value, std::numeric_limits<int64_t>::max()));
  };
  // A merged run holds each process's entries: the counts add up, the widest reach wins.
  for (const auto& [key, value] : run.extra) {
    if (key == "ring_max_age_ns")
      ring.max_age_ns = std::max(ring.max_age_ns, as_signed(number(value)));
    else if (key == "ring_max_bytes")
      ring.max_bytes = std::max(ring.max_bytes, number(value));
    else if (key == "ring_held_ns")
      ring.held_ns = std::max(ring.held_ns, as_signed(number(value)));
    else if (key == "ring_dropped_events")
      ring.events_dropped += number(value);
    else if (key == "dump_trigger" && ring.trigger.empty())
      ring.trigger = value;
  }
  return ring;
}

SamplingSummary parse_sampling(const trace::RunInfo& run) {
  SamplingSummary sampling;
  auto count = [](const std::string& text) -> uint64_t {
    uint64_t value = 0;
    auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
    return error == std::errc() && end == text.data() + text.size() ? value : 0;
  };
  for (const auto& [key, value] : run.extra) {
    if (key == "sampling")
      sampling.policy = value;
    else if (key == "sampling_units")
      sampling.units = count(value);
    else if (key == "sampling_units_recorded")
      sampling.recorded = count(value);
  }
  return sampling;
}

std::vector<ExportOutcome> parse_export_outcomes(const trace::RunInfo& run) {
  std::vector<ExportOutcome> outcomes;
  for (const auto& [key, value] : run.extra) {
    if (!key.starts_with(schema::kExportPrefix) || key.size() == schema::kExportPrefix.size())
      continue;
    ExportOutcome outcome;
    outcome.target = key.substr(schema::kExportPrefix.size());
    std::string_view rest = value;
    bool valid = true;
    for (uint64_t* field : {&outcome.spans, &outcome.sent, &outcome.dropped}) {
      size_t start = rest.find_first_not_of(' ');
      if (start == std::string_view::npos) {
        valid = false;
        break;
      }
      rest.remove_prefix(start);
      auto [end, error] = std::from_chars(rest.data(), rest.data() + rest.size(), *field);
      if (error != std::errc{}) {
        valid = false;
        break;
      }
      rest.remove_prefix(static_cast<size_t>(end - rest.data()));
    }
    if (valid && rest.find_first_not_of(' ') == std::string_view::npos)
      outcomes.push_back(std::move(outcome));
  }
  return outcomes;
}

}  // namespace opsight::analyze
