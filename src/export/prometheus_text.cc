#include "export/prometheus_text.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <vector>

namespace opsight::exporting {

namespace {

void append_label_value(std::string& out, std::string_view value) {
  for (char character : value) {
    if (character == '\\')
      out += "\\\\";
    else if (character == '"')
      out += "\\\"";
    else if (character == '\n')
      out += "\\n";
    else
      out += character;
  }
}

void append_number(std::string& out, double value) {
  if (std::isnan(value))
    out += "NaN";
  else if (std::isinf(value))
    out += value > 0 ? "+Inf" : "-Inf";
  else
    fmt::format_to(std::back_inserter(out), "{}", value);
}

void family_header(std::string& out, std::string_view name, std::string_view type,
                   std::string_view help) {
  fmt::format_to(std::back_inserter(out), "# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

}  // namespace

std::string prometheus_name(std::string_view text) {
  std::string name;
  name.reserve(text.size());
  for (char character : text) {
    bool allowed = (character >= 'a' && character <= 'z') ||
                   (character >= 'A' && character <= 'Z') ||
                   (character >= '0' && character <= '9') || character == '_' || character == ':';
    name += allowed ? character : '_';
  }
  if (name.empty() || (name[0] >= '0' && name[0] <= '9')) name.insert(name.begin(), '_');
  return name;
}

std::string prometheus_exposition(const trace::Trace& trace, const PrometheusOptions& options) {
  std::string out;
  constexpr size_t kBuckets = std::size(kDurationBuckets);

  // Durations per span name: bucket counts, sum, count.
  struct Histogram {
    uint64_t buckets[kBuckets] = {};
    uint64_t count = 0;
    double sum = 0;
  };
  std::map<std::string_view, Histogram> by_name;  // sorted: stable output
  std::vector<Histogram*> of_name(trace.strings.size(), nullptr);
  for (size_t row = 0; row < trace.slices.size(); ++row) {
    trace::StringId name = trace.slices.name[row];
    Histogram*& histogram = of_name[name];
    if (histogram == nullptr) histogram = &by_name[trace.str(name)];
    double seconds = static_cast<double>(trace.slices.dur[row]) * 1e-9;
    size_t bucket = static_cast<size_t>(
        std::lower_bound(std::begin(kDurationBuckets), std::end(kDurationBuckets), seconds) -
        std::begin(kDurationBuckets));
    if (bucket < kBuckets) ++histogram->buckets[bucket];
    ++histogram->count;
    histogram->sum += seconds;
  }
  if (!by_name.empty()) {
    family_header(out, "opsight_span_duration_seconds", "histogram",
                  "Duration of the spans opsight recorded, per span name.");
    for (const auto& [name, histogram] : by_name) {
      std::string label;
      append_label_value(label, name);
      uint64_t cumulative = 0;
      for (size_t i = 0; i < kBuckets; ++i) {
        cumulative += histogram.buckets[i];
        fmt::format_to(std::back_inserter(out),
                       "opsight_span_duration_seconds_bucket{{span=\"{}\",le=\"", label);
        append_number(out, kDurationBuckets[i]);
        fmt::format_to(std::back_inserter(out), "\"}} {}\n", cumulative);
      }
      fmt::format_to(std::back_inserter(out),
                     "opsight_span_duration_seconds_bucket{{span=\"{}\",le=\"+Inf\"}} {}\n", label,
                     histogram.count);
      fmt::format_to(std::back_inserter(out), "opsight_span_duration_seconds_sum{{span=\"{}\"}} ",
                     label);
      append_number(out, histogram.sum);
      fmt::format_to(std::back_inserter(out),
                     "\nopsight_span_duration_seconds_count{{span=\"{}\"}} {}\n", label,
                     histogram.count);
    }
  }

  auto counter = [&](std::string_view name, std::string_view help, double value) {
    family_header(out, name, "counter", help);
    out += name;
    out += ' ';
    append_number(out, value);
    out += '\n';
  };
  counter("opsight_tracer_overhead_seconds_total", "Time the tracer spent on itself.",
          static_cast<double>(trace.run.overhead_ns) * 1e-9);
  counter("opsight_traced_seconds_total", "Wall time the tracer recorded.",
          static_cast<double>(trace.run.traced_ns) * 1e-9);
  counter("opsight_events_dropped_total", "Events the tracer dropped at its memory bound.",
          static_cast<double>(trace.run.events_dropped));
  if (options.with_export_drops)
    counter("opsight_export_spans_dropped_total", "Spans an exporter dropped.",
            static_cast<double>(options.export_spans_dropped));

  // The last sample of each counter track, one gauge family per counter name.
  std::vector<int64_t> last_ts(trace.counter_tracks.size(), INT64_MIN);
  std::vector<double> last_value(trace.counter_tracks.size(), 0);
  for (size_t row = 0; row < trace.counters.size(); ++row) {
    uint32_t track = trace.counters.counter_track[row];
    if (trace.counters.ts[row] >= last_ts[track]) {
      last_ts[track] = trace.counters.ts[row];
      last_value[track] = trace.counters.value[row];
    }
  }
  std::map<std::string, std::vector<uint32_t>> tracks_of_family;
  for (uint32_t track = 0; track < trace.counter_tracks.size(); ++track) {
    if (last_ts[track] == INT64_MIN) continue;
    std::string name = prometheus_name(trace.str(trace.counter_tracks[track].name));
    if (name.ends_with("_ns")) name = name.substr(0, name.size() - 3) + "_seconds";
    tracks_of_family["opsight_" + name].push_back(track);
  }
  for (const auto& [family, tracks] : tracks_of_family) {
    family_header(out, family, "gauge", "Last sample of the counter opsight recorded.");
    bool seconds = family.ends_with("_seconds");
    for (uint32_t track : tracks) {
      fmt::format_to(std::back_inserter(out), "{}{{pid=\"{}\"}} ", family,
                     trace.counter_tracks[track].pid);
      append_number(out, seconds ? last_value[track] * 1e-9 : last_value[track]);
      out += '\n';
    }
  }
  return out;
}

}  // namespace opsight::exporting
