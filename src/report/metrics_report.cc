// Metrics beyond latency (opsight report --metrics): counter tracks, per span name and
// metric, and what the metrics cost. Also the span-metric pieces the tree and the summary
// share: a slice's metrics in a few words, their JSON and CSV values, and the "metrics per
// span" table.
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <map>

#include "analyze/metrics.hpp"
#include "analyze/statistics.hpp"
#include "report/report.hpp"
#include "report/report_internal.hpp"
#include "schema/metric_names.hpp"

namespace opsight::report {

namespace internal {

namespace {

// How the compact form names the metrics opsight records; others go by their stem.
struct MetricLabel {
  std::string_view metric, label;
};
constexpr MetricLabel kMetricLabels[] = {{schema::kMetricCpuNs, "cpu"},
                                         {schema::kMetricRssDelta, "rss"},
                                         {schema::kMetricRssPeak, "rss peak"},
                                         {schema::kMetricRssStart, "rss start"},
                                         {schema::kMetricRssEnd, "rss end"},
                                         {schema::kMetricHeapDelta, "heap"},
                                         {schema::kMetricHeapPeak, "heap peak"},
                                         {schema::kMetricIoRead, "read"},
                                         {schema::kMetricIoWrite, "written"},
                                         {schema::kMetricStorageRead, "storage read"},
                                         {schema::kMetricStorageWrite, "storage written"},
                                         {schema::kMetricNetSent, "sent"},
                                         {schema::kMetricNetReceived, "received"},
                                         {schema::kMetricGpuMemoryDelta, "gpu memory"},
                                         {schema::kMetricGpuMemoryUsed, "gpu memory"},
                                         {schema::kMetricGpuUtilization, "gpu"},
                                         {schema::kMetricGpuPower, "gpu power"}};

// A level that belongs to a change: shown in parentheses after it ("rss +12.0 MiB (peak
// 1.2 GiB)"), or, with an empty label, left out beside it (the change says it).
struct LevelOfChange {
  std::string_view change, level, label;
};
constexpr LevelOfChange kLevelsOfChanges[] = {
    {schema::kMetricRssDelta, schema::kMetricRssPeak, "peak"},
    {schema::kMetricRssDelta, schema::kMetricRssStart, ""},
    {schema::kMetricRssDelta, schema::kMetricRssEnd, ""},
    {schema::kMetricHeapDelta, schema::kMetricHeapPeak, "peak"},
    {schema::kMetricGpuMemoryDelta, schema::kMetricGpuMemoryUsed, "used"}};

bool ends_with(std::string_view text, std::string_view suffix) {
  return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}

// A metric's name without its unit suffix: "queue_wait_ns" -> "queue_wait".
std::string_view metric_stem(std::string_view name) {
  if (schema::metric_unit(name).empty()) return name;
  constexpr std::string_view kRate = "_per_s";
  if (ends_with(name, kRate)) name.remove_suffix(kRate.size());
  if (schema::metric_unit(name).empty()) return name;
  return name.substr(0, name.rfind('_'));
}

std::string_view metric_label(std::string_view name) {
  for (const MetricLabel& entry : kMetricLabels)
    if (entry.metric == name) return entry.label;
  return metric_stem(name);
}

std::string format_reading(std::string_view name, double value) {
  return format_metric_value(value, schema::metric_unit(name), is_change_metric(name));
}

}  // namespace

bool is_change_metric(std::string_view metric_name) {
  return metric_name.find("delta") != std::string_view::npos;
}

std::string compact_metrics(const analyze::SliceMetricIndex& index,
                            std::span<const analyze::MetricReading> readings) {
  auto name_of = [&index](const analyze::MetricReading& reading) -> std::string_view {
    return index.names()[reading.metric];
  };
  auto find = [&](std::string_view name) -> const analyze::MetricReading* {
    for (const analyze::MetricReading& reading : readings)
      if (name_of(reading) == name) return &reading;
    return nullptr;
  };
  std::string text;
  for (const analyze::MetricReading& reading : readings) {
    std::string_view name = name_of(reading);
    bool shown_with_its_change = std::any_of(
        std::begin(kLevelsOfChanges), std::end(kLevelsOfChanges),
        [&](const LevelOfChange& entry) { return entry.level == name && find(entry.change); });
    if (shown_with_its_change) continue;
    if (!text.empty()) text += " · ";
    text += fmt::format("{} {}", metric_label(name), format_reading(name, reading.value));
    for (const LevelOfChange& entry : kLevelsOfChanges) {
      if (entry.change != name || entry.label.empty()) continue;
      if (const analyze::MetricReading* level = find(entry.level))
        text += fmt::format(" ({} {})", entry.label, format_reading(entry.level, level->value));
    }
  }
  return text;
}

Json metric_json_value(const analyze::MetricReading& reading) {
  if (reading.integral) return static_cast<int64_t>(reading.value);
  return reading.value;
}

std::string metric_csv_value(const analyze::MetricReading& reading) {
  if (reading.integral) return fmt::format("{}", static_cast<int64_t>(reading.value));
  return csv_double(reading.value);
}

std::vector<analyze::SpanMetricStatistics> span_metrics_of_names(
    std::span<const analyze::SpanMetricStatistics> statistics,
    std::span<const trace::StringId> names) {
  std::vector<analyze::SpanMetricStatistics> ordered;
  auto by_name = [](const analyze::SpanMetricStatistics& entry, trace::StringId name) {
    return entry.span_name < name;
  };
  for (trace::StringId name : names) {
    auto first = std::lower_bound(statistics.begin(), statistics.end(), name, by_name);
    for (auto entry = first; entry != statistics.end() && entry->span_name == name; ++entry)
      ordered.push_back(*entry);
  }
  return ordered;
}

void render_span_metric_table(const trace::Trace& trace,
                              std::span<const analyze::SpanMetricStatistics> rows,
                              std::string& out) {
  using Align = TextTable::Align;
  TextTable table({Align::kLeft, Align::kLeft, Align::kRight, Align::kRight, Align::kRight,
                   Align::kRight, Align::kRight});
  table.add_row({"name", "metric", "count", "mean", "p50", "p99", "max"});
  for (size_t i = 0; i < rows.size(); ++i) {
    const analyze::SpanMetricStatistics& row = rows[i];
    bool first_of_name = i == 0 || rows[i - 1].span_name != row.span_name;
    bool with_sign = is_change_metric(row.metric_name);
    auto value = [&](double number) { return format_metric_value(number, row.unit, with_sign); };
    table.add_row(
        {first_of_name ? truncate_to_width(trace.str(row.span_name), kMaxNameWidth) : std::string(),
         truncate_to_width(row.metric_name, kMaxNameWidth), fmt::format("{}", row.count),
         value(row.mean), value(row.p50), value(row.p99), value(row.max)});
  }
  table.render(out);
}

}  // namespace internal

namespace {

using internal::Json;

// A statistic of a metric for JSON and CSV: like durations (one decimal) when every value
// was whole, in full otherwise.
Json statistic_json(double value, bool integral) {
  if (integral) return internal::json_number(value);
  if (!std::isfinite(value)) return nullptr;
  return value;
}

std::string statistic_csv(double value, bool integral) {
  return integral ? internal::csv_number(value) : internal::csv_double(value);
}

// Everything the metrics view shows, in the order it shows it.
struct MetricsView {
  std::vector<analyze::CounterStatistics> counters;
  std::vector<analyze::SpanMetricStatistics> span_metrics;  // by span name in report order
  size_t names_omitted = 0;  // span names with metrics beyond options.limit
  analyze::OverheadSummary overhead;
  std::optional<int64_t> sampler_interval_ns;
  std::optional<std::string_view> gpu_unavailable;
  int64_t trace_start_ns = 0;

  bool empty() const { return counters.empty() && span_metrics.empty(); }
};

MetricsView collect_metrics_view(const trace::Trace& trace, const ReportOptions& options) {
  MetricsView view;
  view.counters = analyze::compute_counter_statistics(trace);
  analyze::SliceMetricIndex index(trace);
  std::vector<analyze::SpanMetricStatistics> statistics =
      analyze::compute_span_metric_statistics(trace, index);
  if (!statistics.empty()) {
    // Span names in the order of the summary (options.sort), those with metrics only.
    std::vector<analyze::NameStatistics> names = analyze::compute_name_statistics(trace).names;
    internal::sort_name_statistics(names, trace, options.sort);
    std::vector<trace::StringId> names_with_metrics;
    for (const analyze::SpanMetricStatistics& entry : statistics)
      if (names_with_metrics.empty() || names_with_metrics.back() != entry.span_name)
        names_with_metrics.push_back(entry.span_name);
    std::vector<trace::StringId> ordered_names;
    for (const analyze::NameStatistics& name : names)
      if (std::binary_search(names_with_metrics.begin(), names_with_metrics.end(), name.name))
        ordered_names.push_back(name.name);
    if (options.limit > 0 && ordered_names.size() > options.limit) {
      view.names_omitted = ordered_names.size() - options.limit;
      ordered_names.resize(options.limit);
    }
    view.span_metrics = internal::span_metrics_of_names(statistics, ordered_names);
  }
  view.overhead = analyze::summarize_overhead(trace);
  if (auto interval = analyze::run_extra_value(trace.run, schema::kSamplerIntervalKey)) {
    int64_t nanoseconds = 0;
    auto [end, error] =
        std::from_chars(interval->data(), interval->data() + interval->size(), nanoseconds);
    if (error == std::errc() && end == interval->data() + interval->size() && nanoseconds > 0)
      view.sampler_interval_ns = nanoseconds;
  }
  view.gpu_unavailable = analyze::run_extra_value(trace.run, schema::kGpuUnavailableKey);
  view.trace_start_ns = trace.time_bounds().first;
  return view;
}

// Counter names, with " [pid N]" where one name is counted in several processes.
std::vector<std::string> counter_labels(const std::vector<analyze::CounterStatistics>& counters) {
  std::map<std::string_view, size_t> tracks_per_name;
  for (const analyze::CounterStatistics& counter : counters) ++tracks_per_name[counter.name];
  std::vector<std::string> labels;
  for (const analyze::CounterStatistics& counter : counters) {
    labels.push_back(tracks_per_name[counter.name] > 1
                         ? fmt::format("{} [pid {}]", counter.name, counter.pid)
                         : counter.name);
  }
  return labels;
}

// "2000 readings in 5.12 ms (2.56 µs each)".
std::string cost_entry_text(const analyze::MetricCostEntry& entry, std::string_view readings) {
  std::string text = fmt::format("{} {} in {}", entry.readings, readings,
                                 format_duration(static_cast<double>(entry.total_ns)));
  if (entry.readings > 0)
    text += fmt::format(" ({} each)", format_duration(static_cast<double>(entry.total_ns) /
                                                      static_cast<double>(entry.readings)));
  return text;
}

std::string metrics_text(const trace::Trace& trace, const ReportOptions& options,
                         const MetricsView& view) {
  std::string out = format_header_line("metrics", trace, options) + "\n";
  if (view.empty())
    out +=
        "no counter tracks or span metrics in this trace (record with metrics: see "
        "docs/metrics.md)\n";
  if (!view.counters.empty()) {
    out += "counters (mean: time-weighted";
    if (view.sampler_interval_ns)
      out += fmt::format("; sampled every {}",
                         format_duration(static_cast<double>(*view.sampler_interval_ns)));
    out += ")\n";
    using Align = internal::TextTable::Align;
    internal::TextTable table(
        {Align::kLeft, Align::kLeft, Align::kRight, Align::kRight, Align::kRight, Align::kRight});
    table.add_row({"name", "unit", "samples", "min", "mean", "max"});
    std::vector<std::string> labels = counter_labels(view.counters);
    for (size_t i = 0; i < view.counters.size(); ++i) {
      const analyze::CounterStatistics& counter = view.counters[i];
      table.add_row({internal::truncate_to_width(labels[i], internal::kMaxNameWidth), counter.unit,
                     fmt::format("{}", counter.samples),
                     format_metric_value(counter.min, counter.unit),
                     format_metric_value(counter.mean, counter.unit),
                     format_metric_value(counter.max, counter.unit)});
    }
    table.render(out);
  }
  if (!view.span_metrics.empty()) {
    out += "metrics per span\n";
    internal::render_span_metric_table(trace, view.span_metrics, out);
    if (view.names_omitted > 0)
      out +=
          fmt::format("… {} more name{}\n", view.names_omitted, view.names_omitted == 1 ? "" : "s");
  }
  const analyze::MetricCost& cost = view.overhead.metric_cost;
  if (!cost.span_groups.empty()) {
    out += "metric cost (part of the tracer overhead): ";
    for (size_t i = 0; i < cost.span_groups.size(); ++i)
      out += fmt::format("{}{} {}", i > 0 ? ", " : "", cost.span_groups[i].group,
                         cost_entry_text(cost.span_groups[i], "readings"));
    out += "\n";
  }
  if (cost.sampler)
    out += "sampler cost (on its own thread): " + cost_entry_text(*cost.sampler, "samples") + "\n";
  if (view.gpu_unavailable) out += fmt::format("gpu metrics: none ({})\n", *view.gpu_unavailable);
  out += format_overhead_line(view.overhead) + "\n";
  return out;
}

std::string metrics_json(const trace::Trace& trace, const ReportOptions& options,
                         const MetricsView& view) {
  Json document = Json::object();
  document["source"] = options.source_name;
  document["slice_count"] = trace.slices.size();
  document["trace_start_ns"] = view.trace_start_ns;
  Json counters = Json::array();
  for (const analyze::CounterStatistics& counter : view.counters) {
    Json entry = Json::object();
    entry["name"] = counter.name;
    entry["pid"] = counter.pid;
    entry["unit"] = counter.unit;
    entry["samples"] = counter.samples;
    entry["min"] = counter.min;
    entry["mean"] = counter.mean;
    entry["max"] = counter.max;
    entry["last"] = counter.last;
    entry["first_ns"] = counter.first_ts_ns - view.trace_start_ns;
    entry["last_ns"] = counter.last_ts_ns - view.trace_start_ns;
    counters.push_back(std::move(entry));
  }
  document["counters"] = std::move(counters);
  Json span_metrics = Json::array();
  for (const analyze::SpanMetricStatistics& row : view.span_metrics) {
    Json entry = Json::object();
    entry["name"] = std::string(trace.str(row.span_name));
    entry["metric"] = row.metric_name;
    entry["unit"] = std::string(row.unit);
    entry["count"] = row.count;
    entry["total"] = statistic_json(row.total, row.integral);
    entry["mean"] = statistic_json(row.mean, row.integral);
    entry["min"] = statistic_json(row.min, row.integral);
    entry["p50"] = statistic_json(row.p50, row.integral);
    entry["p90"] = statistic_json(row.p90, row.integral);
    entry["p99"] = statistic_json(row.p99, row.integral);
    entry["max"] = statistic_json(row.max, row.integral);
    span_metrics.push_back(std::move(entry));
  }
  document["span_metrics"] = std::move(span_metrics);
  document["names_omitted"] = view.names_omitted;
  document["sampler_interval_ns"] =
      view.sampler_interval_ns ? Json(*view.sampler_interval_ns) : Json(nullptr);
  document["gpu_unavailable"] =
      view.gpu_unavailable ? Json(std::string(*view.gpu_unavailable)) : Json(nullptr);
  internal::add_overhead_fields(document, view.overhead);
  return internal::dump_json(document);
}

// One table in long form: a row per counter, per span name and metric, per cost group.
std::string metrics_csv(const trace::Trace& trace, const MetricsView& view) {
  std::string out = "kind,name,pid,metric,unit,count,total,mean,min,p50,p90,p99,max\r\n";
  for (const analyze::CounterStatistics& counter : view.counters) {
    out +=
        fmt::format("counter,{},{},,{},{},,{},{},,,,{}\r\n", csv_field(counter.name), counter.pid,
                    csv_field(counter.unit), counter.samples, internal::csv_double(counter.mean),
                    internal::csv_double(counter.min), internal::csv_double(counter.max));
  }
  for (const analyze::SpanMetricStatistics& row : view.span_metrics) {
    auto value = [&row](double number) { return statistic_csv(number, row.integral); };
    out += fmt::format("span,{},,{},{},{},{},{},{},{},{},{},{}\r\n",
                       csv_field(trace.str(row.span_name)), csv_field(row.metric_name), row.unit,
                       row.count, value(row.total), value(row.mean), value(row.min), value(row.p50),
                       value(row.p90), value(row.p99), value(row.max));
  }
  const analyze::MetricCost& cost = view.overhead.metric_cost;
  std::vector<analyze::MetricCostEntry> entries = cost.span_groups;
  if (cost.sampler) entries.push_back(*cost.sampler);
  for (const analyze::MetricCostEntry& entry : entries) {
    double mean = entry.readings > 0
                      ? static_cast<double>(entry.total_ns) / static_cast<double>(entry.readings)
                      : 0.0;
    out += fmt::format("cost,{},,,ns,{},{},{},,,,,\r\n", csv_field(entry.group), entry.readings,
                       entry.total_ns, internal::csv_number(mean));
  }
  return out;
}

}  // namespace

std::string render_metrics(const trace::Trace& trace, const ReportOptions& options) {
  return internal::render_guarded([&] {
    MetricsView view = collect_metrics_view(trace, options);
    switch (options.format) {
      case OutputFormat::kJson:
        return metrics_json(trace, options, view);
      case OutputFormat::kCsv:
        return metrics_csv(trace, view);
      case OutputFormat::kText:
        break;
    }
    return metrics_text(trace, options, view);
  });
}

}  // namespace opsight::report
