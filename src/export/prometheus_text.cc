#include "export/prometheus_text.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

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

void DurationHistogram::add(int64_t duration_ns) {
  double seconds = static_cast<double>(std::max<int64_t>(0, duration_ns)) * 1e-9;
  size_t bucket = static_cast<size_t>(
      std::lower_bound(std::begin(kDurationBuckets), std::end(kDurationBuckets), seconds) -
      std::begin(kDurationBuckets));
  if (bucket < kDurationBucketCount) ++buckets[bucket];
  ++count;
  sum_seconds += seconds;
}

void MetricsSnapshot::add_span(std::string_view name, int64_t duration_ns) {
  auto it = spans.find(name);
  if (it == spans.end()) it = spans.emplace(std::string(name), DurationHistogram{}).first;
  it->second.add(duration_ns);
}

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

MetricsSnapshot metrics_of(const trace::Trace& trace) {
  MetricsSnapshot metrics;
  std::vector<DurationHistogram*> of_name(trace.strings.size(), nullptr);
  for (size_t row = 0; row < trace.slices.size(); ++row) {
    trace::StringId name = trace.slices.name[row];
    DurationHistogram*& histogram = of_name[name];
    if (histogram == nullptr) histogram = &metrics.spans[std::string(trace.str(name))];
    histogram->add(trace.slices.dur[row]);
  }
  metrics.overhead_seconds = static_cast<double>(trace.run.overhead_ns) * 1e-9;
  metrics.traced_seconds = static_cast<double>(trace.run.traced_ns) * 1e-9;
  metrics.events_dropped = trace.run.events_dropped;
  std::vector<int64_t> last_ts(trace.counter_tracks.size(), INT64_MIN);
  for (size_t row = 0; row < trace.counters.size(); ++row) {
    uint32_t track = trace.counters.counter_track[row];
    if (trace.counters.ts[row] < last_ts[track]) continue;
    last_ts[track] = trace.counters.ts[row];
    metrics.set_counter(trace.str(trace.counter_tracks[track].name),
                        trace.counter_tracks[track].pid, trace.counters.value[row]);
  }
  return metrics;
}

std::string prometheus_exposition(const MetricsSnapshot& metrics) {
  std::string out;
  if (!metrics.spans.empty()) {
    family_header(out, "opsight_span_duration_seconds", "histogram",
                  "Duration of the spans opsight recorded, per span name.");
    for (const auto& [name, histogram] : metrics.spans) {
      std::string label;
      append_label_value(label, name);
      uint64_t cumulative = 0;
      for (size_t i = 0; i < kDurationBucketCount; ++i) {
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
      append_number(out, histogram.sum_seconds);
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
  if (metrics.overhead_seconds >= 0)
    counter("opsight_tracer_overhead_seconds_total", "Time the tracer spent on itself.",
            metrics.overhead_seconds);
  if (metrics.traced_seconds >= 0)
    counter("opsight_traced_seconds_total", "Wall time the tracer recorded.",
            metrics.traced_seconds);
  counter("opsight_events_dropped_total", "Events the tracer dropped at its memory bound.",
          static_cast<double>(metrics.events_dropped));

  // One gauge family per counter name, a sample per pid.
  std::map<std::string, std::vector<std::pair<int64_t, double>>> families;
  for (const auto& [key, value] : metrics.counters) {
    std::string name = prometheus_name(key.first);
    bool nanoseconds = name.ends_with("_ns");
    if (nanoseconds) name = name.substr(0, name.size() - 3) + "_seconds";
    families["opsight_" + name].emplace_back(key.second, nanoseconds ? value * 1e-9 : value);
  }
  for (const auto& [family, samples] : families) {
    family_header(out, family, "gauge", "Last sample of the counter opsight recorded.");
    for (const auto& [pid, value] : samples) {
      fmt::format_to(std::back_inserter(out), "{}{{pid=\"{}\"}} ", family, pid);
      append_number(out, value);
      out += '\n';
    }
  }
  return out;
}

std::string prometheus_exposition(std::span<const MetricFamily> families) {
  std::string out;
  for (const MetricFamily& family : families) {
    std::string name = prometheus_name(family.name);
    std::string help;
    for (char character : family.help) help += character == '\n' ? ' ' : character;
    family_header(out, name, family.type.empty() ? "untyped" : family.type, help);
    for (const MetricSample& sample : family.samples) {
      out += name;
      if (!sample.labels.empty()) {
        out += '{';
        bool first = true;
        for (const auto& [label, value] : sample.labels) {
          if (!first) out += ',';
          first = false;
          out += prometheus_name(label);
          out += "=\"";
          append_label_value(out, value);
          out += '"';
        }
        out += '}';
      }
      out += ' ';
      append_number(out, sample.value);
      out += '\n';
    }
  }
  return out;
}

}  // namespace opsight::exporting
