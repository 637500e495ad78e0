#include "report/report.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>

#include "report/report_internal.hpp"

namespace opsight::report {

namespace {

constexpr std::array<std::string_view, 6> kSortKeys = {"total", "self", "count",
                                                       "mean",  "p99",  "name"};

}  // namespace

namespace {

constexpr ReportView kReportViews[] = {
    {"tree", "--tree", "Call tree per root span with start-end, duration, share of parent",
     &render_tree},
    {"merged_tree", "--merged-tree",
     "Aggregated call tree: every invocation of a code path merged into one node with calls, "
     "total, self and percentiles",
     &render_merged_tree},
    {"summary", "--summary",
     "Per span name: count, total, min, mean, p50/90/95/97/99/99.9, max, stddev (default)",
     &render_summary},
    {"table", "--table", "Per span name: count, total, self, mean, p99, share", &render_table},
    {"breakdown", "--breakdown",
     "Per-inference phases of the span named SPAN (its children), with "
     "mean/min/p50/p75/p90/p95/p99/max per phase and inferences/s",
     &render_breakdown, true},
    {"operators", "--ops",
     "Operator table: count, total, self, share, mean, percentiles per operator (torch "
     "aten::*, ONNX Runtime nodes by op_name, GPU kernels)",
     &render_operators},
    {"kernels", "--kernels",
     "GPU kernels: count, total, share, mean, p50/p99, grid/block and the operators that launch "
     "them; copies by kind; GPU busy time, utilisation and CUDA API time (docs/gpu.md)",
     &render_kernels},
    {"critical_path", "--critical-path",
     "The chain of spans that sets the end-to-end time, by span name", &render_critical_path},
    {"metrics", "--metrics",
     "Counter tracks (samples, min, time-weighted mean, max), per span name and metric "
     "(count, mean, p50, p99, max), and their cost",
     &render_metrics},
};

}  // namespace

std::span<const ReportView> report_views() { return kReportViews; }

const ReportView* find_report_view(std::string_view name) {
  for (const ReportView& view : kReportViews)
    if (view.name == name) return &view;
  return nullptr;
}

std::string report_view_names() {
  std::string names;
  for (size_t i = 0; i < std::size(kReportViews); ++i) {
    if (i > 0) names += i + 1 == std::size(kReportViews) ? " or " : ", ";
    names += kReportViews[i].name;
  }
  return names;
}

namespace {
// Indexed by OutputFormat.
constexpr std::array<std::string_view, 3> kOutputFormatNames = {"text", "json", "csv"};
}  // namespace

std::vector<std::string> output_format_names() {
  return {kOutputFormatNames.begin(), kOutputFormatNames.end()};
}

std::optional<OutputFormat> parse_output_format(std::string_view name, std::string* error) {
  for (size_t index = 0; index < kOutputFormatNames.size(); ++index)
    if (kOutputFormatNames[index] == name) return static_cast<OutputFormat>(index);
  *error = fmt::format("unknown report format '{}' (expected {})", name,
                       fmt::join(kOutputFormatNames, ", "));
  return std::nullopt;
}

std::optional<std::string> validate_sort_key(std::string_view key) {
  if (std::find(kSortKeys.begin(), kSortKeys.end(), key) != kSortKeys.end()) return std::nullopt;
  return fmt::format("unknown sort key '{}'; valid keys: {}", key, fmt::join(kSortKeys, ", "));
}

std::string format_duration(double nanoseconds) {
  if (!std::isfinite(nanoseconds)) return "n/a";
  if (nanoseconds < 0) return "-" + format_duration(-nanoseconds);
  if (nanoseconds < 999.5) {
    // Percentiles may be fractional: one decimal, none when it rounds to a whole number.
    double tenths = std::round(nanoseconds * 10.0) / 10.0;
    if (tenths == std::floor(tenths)) return fmt::format("{:.0f} ns", tenths);
    return fmt::format("{:.1f} ns", tenths);
  }
  // µs and ms: three significant digits; the thresholds account for rounding so that
  // 999.7 µs becomes "1.00 ms", not "1000 µs".
  auto three_digits = [](double value, std::string_view unit) {
    if (value < 9.995) return fmt::format("{:.2f} {}", value, unit);
    if (value < 99.95) return fmt::format("{:.1f} {}", value, unit);
    return fmt::format("{:.0f} {}", value, unit);
  };
  if (nanoseconds < 999.5e3) return three_digits(nanoseconds / 1e3, "µs");
  if (nanoseconds < 999.5e6) return three_digits(nanoseconds / 1e6, "ms");
  return fmt::format("{:.3f} s", nanoseconds / 1e9);
}

std::string format_bytes(double bytes) {
  if (!std::isfinite(bytes)) return "n/a";
  std::string_view sign = bytes < 0 ? "-" : "";
  double magnitude = std::fabs(bytes);
  if (magnitude < 1023.5) return fmt::format("{}{:.0f} B", sign, magnitude);
  constexpr std::array<std::string_view, 5> kUnits = {"KiB", "MiB", "GiB", "TiB", "PiB"};
  double value = magnitude / 1024.0;
  size_t unit = 0;
  // Moved up when one decimal would print 1024.0.
  while (value >= 1023.95 && unit + 1 < kUnits.size()) {
    value /= 1024.0;
    ++unit;
  }
  return fmt::format("{}{:.1f} {}", sign, value, kUnits[unit]);
}

namespace {

// A number with three significant digits ("2.50", "12.5", "512"), whole numbers as such.
std::string format_plain_number(double value) {
  if (value == std::floor(value) && std::fabs(value) < 1e15) return fmt::format("{:.0f}", value);
  double magnitude = std::fabs(value);
  if (magnitude < 9.995) return fmt::format("{:.2f}", value);
  if (magnitude < 99.95) return fmt::format("{:.1f}", value);
  return fmt::format("{:.0f}", value);
}

}  // namespace

std::string format_metric_value(double value, std::string_view unit, bool with_sign) {
  if (!std::isfinite(value)) return "n/a";
  std::string_view sign = with_sign && value > 0 ? "+" : "";
  constexpr std::string_view kRate = "/s";
  if (unit.size() >= kRate.size() && unit.substr(unit.size() - kRate.size()) == kRate) {
    std::string_view base = unit.substr(0, unit.size() - kRate.size());
    if (base.empty()) return fmt::format("{}{}/s", sign, format_plain_number(value));
    return fmt::format("{}/s", format_metric_value(value, base, with_sign));
  }
  if (unit == "ns") return fmt::format("{}{}", sign, format_duration(value));
  if (unit == "bytes") return fmt::format("{}{}", sign, format_bytes(value));
  if (unit == "percent") return fmt::format("{}{:.1f}%", sign, value);
  if (unit == "watts") return fmt::format("{}{:.1f} W", sign, value);
  if (unit == "celsius") return fmt::format("{}{:.1f} °C", sign, value);
  if (unit.empty()) return fmt::format("{}{}", sign, format_plain_number(value));
  return fmt::format("{}{} {}", sign, format_plain_number(value), unit);
}

std::string format_share(double fraction) {
  double percent = fraction * 100.0;
  if (percent > 0.0 && percent < 0.05) return "<0.1%";
  return fmt::format("{:.1f}%", percent);
}

std::string format_small_percent(double fraction) {
  double percent = fraction * 100.0;
  if (!(percent > 0.0)) return "0%";
  if (percent >= 1.0) return fmt::format("{:.2f}%", percent);
  // Two significant digits: 0.000307 -> 0.00031.
  int decimals = std::clamp(1 - static_cast<int>(std::floor(std::log10(percent))), 2, 12);
  return fmt::format("{:.{}f}%", percent, decimals);
}

namespace {

// What the metrics cost, as the overhead line's parentheses continue: "; metrics 1.00 ms
// of it: memory 700 µs, cpu 300 µs; sampler 90.0 µs on its own thread", or "".
std::string metric_cost_clause(const analyze::MetricCost& cost) {
  std::string clause;
  if (!cost.span_groups.empty()) {
    clause += fmt::format("; metrics {} of it: ",
                          format_duration(static_cast<double>(cost.span_total_ns)));
    for (size_t i = 0; i < cost.span_groups.size(); ++i) {
      if (i > 0) clause += ", ";
      clause += fmt::format("{} {}", cost.span_groups[i].group,
                            format_duration(static_cast<double>(cost.span_groups[i].total_ns)));
    }
  }
  if (cost.sampler)
    clause += fmt::format("; sampler {} on its own thread",
                          format_duration(static_cast<double>(cost.sampler->total_ns)));
  return clause;
}

std::string export_clause(const std::vector<analyze::ExportOutcome>& exports) {
  std::string clause;
  for (const analyze::ExportOutcome& outcome : exports) {
    clause += fmt::format("; exported {} of {} span{} to {}", outcome.sent, outcome.spans,
                          outcome.spans == 1 ? "" : "s", outcome.target);
    if (outcome.dropped > 0) clause += fmt::format(", {} dropped", outcome.dropped);
  }
  return clause;
}

}  // namespace

std::string format_overhead_line(const analyze::OverheadSummary& overhead) {
  std::string drops =
      fmt::format("{} event{} dropped{}", overhead.events_dropped,
                  overhead.events_dropped == 1 ? "" : "s", export_clause(overhead.exports));
  if (overhead.sampling.sampled()) {
    bool operators_only = overhead.sampling.policy.starts_with("operators in ");
    drops += fmt::format("; sampled {}: {} of {} units recorded ({})", overhead.sampling.policy,
                         overhead.sampling.recorded, overhead.sampling.units,
                         operators_only ? "operator counts are of these; other spans are totals"
                                        : "counts are of these, not totals");
  }
  if (overhead.ring.present()) {
    const analyze::RingSummary& ring = overhead.ring;
    std::string limit = ring.max_age_ns > 0
                            ? format_duration(static_cast<double>(ring.max_age_ns)) + ", "
                            : std::string();
    drops += fmt::format(
        "; flight recorder (ring {}{} MiB): kept the last {}, {} older event{} dropped{}", limit,
        ring.max_bytes >> 20, format_duration(static_cast<double>(ring.held_ns)),
        ring.events_dropped, ring.events_dropped == 1 ? "" : "s",
        ring.trigger.empty() ? "" : ", dumped on " + ring.trigger);
  }
  if (!overhead.overhead_known)
    return fmt::format("tracer overhead: not recorded in this trace, {}", drops);
  std::string cost = format_duration(static_cast<double>(overhead.overhead_ns));
  std::string metrics = metric_cost_clause(overhead.metric_cost);
  if (overhead.traced_ns <= 0)
    return fmt::format("tracer overhead: {} (no traced time{}), {}", cost, metrics, drops);
  return fmt::format("tracer overhead: {} ({} of {} traced{}), {}", cost,
                     format_small_percent(overhead.share),
                     format_duration(static_cast<double>(overhead.traced_ns)), metrics, drops);
}

std::string format_header_line(std::string_view report_name, const trace::Trace& trace,
                               const ReportOptions& options) {
  return internal::format_header_line(report_name, options, internal::TraceExtent::of(trace));
}

std::string internal::format_header_line(std::string_view report_name, const ReportOptions& options,
                                         const TraceExtent& extent) {
  const size_t slice_count = extent.slice_count;
  return fmt::format("opsight {}: {}, {} slice{}, {}", report_name,
                     options.source_name.empty() ? std::string_view("trace")
                                                 : std::string_view(options.source_name),
                     slice_count, slice_count == 1 ? "" : "s",
                     format_duration(static_cast<double>(extent.last_ns - extent.first_ns)));
}

std::string csv_field(std::string_view text) {
  if (text.find_first_of(",\"\r\n") == std::string_view::npos) return std::string(text);
  std::string quoted = "\"";
  for (char character : text) {
    if (character == '"') quoted.push_back('"');
    quoted.push_back(character);
  }
  quoted.push_back('"');
  return quoted;
}

namespace internal {

size_t display_width(std::string_view text) {
  size_t width = 0;
  for (char character : text)
    if ((static_cast<unsigned char>(character) & 0xC0) != 0x80) ++width;
  return width;
}

std::string truncate_to_width(std::string_view text, size_t width) {
  if (display_width(text) <= width || width == 0) return std::string(text);
  // Keep width - 1 code points, then the ellipsis.
  size_t kept = 0;
  size_t byte = 0;
  while (byte < text.size()) {
    bool starts_code_point = (static_cast<unsigned char>(text[byte]) & 0xC0) != 0x80;
    if (starts_code_point) {
      if (kept == width - 1) break;
      ++kept;
    }
    ++byte;
  }
  return std::string(text.substr(0, byte)) + "…";
}

void TextTable::render(std::string& out) const {
  std::vector<size_t> widths(alignments_.size(), 0);
  for (const auto& row : rows_)
    for (size_t column = 0; column < row.size() && column < widths.size(); ++column)
      widths[column] = std::max(widths[column], display_width(row[column]));
  for (const auto& row : rows_) {
    std::string line;
    for (size_t column = 0; column < row.size() && column < widths.size(); ++column) {
      if (column > 0) line += "  ";
      size_t padding = widths[column] - display_width(row[column]);
      if (alignments_[column] == Align::kRight) line.append(padding, ' ');
      line += row[column];
      if (alignments_[column] == Align::kLeft) line.append(padding, ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line;
    out += '\n';
  }
}

namespace {
double round_to_tenth(double value) { return std::round(value * 10.0) / 10.0; }
bool is_whole_int64(double value) {
  return value == std::floor(value) && std::fabs(value) < 9.0e18;
}
}  // namespace

Json json_number(double value) {
  if (!std::isfinite(value)) return nullptr;
  double rounded = round_to_tenth(value);
  if (is_whole_int64(rounded)) return static_cast<int64_t>(rounded);
  return rounded;
}

std::string csv_number(double value) {
  if (!std::isfinite(value)) return {};
  double rounded = round_to_tenth(value);
  if (is_whole_int64(rounded)) return fmt::format("{}", static_cast<int64_t>(rounded));
  return fmt::format("{}", rounded);
}

std::string csv_double(double value) {
  if (!std::isfinite(value)) return {};
  return fmt::format("{}", value);
}

void add_distribution_fields(Json& object, const analyze::Distribution& distribution) {
  object["count"] = distribution.count;
  object["total_ns"] = distribution.total_ns;
  object["min_ns"] = distribution.min_ns;
  object["mean_ns"] = json_number(distribution.mean_ns);
  object["p50_ns"] = json_number(distribution.p50_ns);
  object["p75_ns"] = json_number(distribution.p75_ns);
  object["p90_ns"] = json_number(distribution.p90_ns);
  object["p95_ns"] = json_number(distribution.p95_ns);
  object["p97_ns"] = json_number(distribution.p97_ns);
  object["p99_ns"] = json_number(distribution.p99_ns);
  object["p999_ns"] = json_number(distribution.p999_ns);
  object["max_ns"] = distribution.max_ns;
  object["stddev_ns"] = json_number(distribution.stddev_ns);
}

std::string TreePrefixes::next(size_t depth, uint32_t child_count) {
  std::string prefix;
  if (depth > 0 && depth <= remaining_children_.size()) {
    uint32_t& siblings_left = remaining_children_[depth - 1];
    if (siblings_left > 0) --siblings_left;
    for (size_t level = 1; level < std::min(depth, kMaxDrawnDepth); ++level)
      prefix += remaining_children_[level - 1] > 0 ? "│  " : "   ";
    if (depth >= kMaxDrawnDepth) prefix += fmt::format("⋯ (depth {}) ", depth);
    prefix += siblings_left == 0 ? "└─ " : "├─ ";
  }
  remaining_children_.resize(depth + 1);
  remaining_children_[depth] = child_count;
  return prefix;
}

void add_overhead_fields(Json& object, const analyze::OverheadSummary& overhead) {
  object["traced_ns"] = overhead.traced_ns;
  object["overhead_ns"] = overhead.overhead_ns;
  object["overhead_known"] = overhead.overhead_known;
  object["overhead_share"] = overhead.share;
  object["events_dropped"] = overhead.events_dropped;
  if (!overhead.metric_cost.empty()) add_metric_cost_field(object, overhead.metric_cost);
  if (!overhead.exports.empty()) {
    Json exports = Json::array();
    for (const analyze::ExportOutcome& outcome : overhead.exports)
      exports.push_back({{"target", outcome.target},
                         {"spans", outcome.spans},
                         {"sent", outcome.sent},
                         {"dropped", outcome.dropped}});
    object["export"] = std::move(exports);
  }
  if (overhead.ring.present())
    object["flight_recorder"] = {{"max_age_ns", overhead.ring.max_age_ns},
                                 {"max_bytes", overhead.ring.max_bytes},
                                 {"held_ns", overhead.ring.held_ns},
                                 {"events_dropped", overhead.ring.events_dropped},
                                 {"trigger", overhead.ring.trigger}};
  if (overhead.sampling.sampled())
    object["sampling"] = {{"policy", overhead.sampling.policy},
                          {"units", overhead.sampling.units},
                          {"units_recorded", overhead.sampling.recorded}};
}

void add_metric_cost_field(Json& object, const analyze::MetricCost& cost) {
  Json fields = Json::object();
  fields["span_metrics_ns"] = cost.span_total_ns;
  Json groups = Json::object();
  for (const analyze::MetricCostEntry& group : cost.span_groups)
    groups[group.group] = {{"readings", group.readings}, {"total_ns", group.total_ns}};
  fields["groups"] = std::move(groups);
  if (cost.sampler)
    fields["sampler"] = {{"samples", cost.sampler->readings}, {"total_ns", cost.sampler->total_ns}};
  object["metric_cost"] = std::move(fields);
}

std::string dump_json(const Json& value) {
  return value.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

void sort_name_statistics(std::vector<analyze::NameStatistics>& names, const trace::Trace& trace,
                          std::string_view key) {
  auto by_name = [&trace](const analyze::NameStatistics& a, const analyze::NameStatistics& b) {
    std::string_view name_a = trace.str(a.name);
    std::string_view name_b = trace.str(b.name);
    if (name_a != name_b) return name_a < name_b;
    return a.name < b.name;
  };
  auto descending = [&by_name](auto field) {
    return [field, &by_name](const analyze::NameStatistics& a, const analyze::NameStatistics& b) {
      auto value_a = field(a);
      auto value_b = field(b);
      if (value_a != value_b) return value_a > value_b;
      return by_name(a, b);
    };
  };
  if (key == "name") {
    std::sort(names.begin(), names.end(), by_name);
  } else if (key == "self") {
    std::sort(names.begin(), names.end(),
              descending([](const analyze::NameStatistics& s) { return s.self_ns; }));
  } else if (key == "count") {
    std::sort(names.begin(), names.end(),
              descending([](const analyze::NameStatistics& s) { return s.count; }));
  } else if (key == "mean") {
    std::sort(names.begin(), names.end(),
              descending([](const analyze::NameStatistics& s) { return s.mean_ns; }));
  } else if (key == "p99") {
    std::sort(names.begin(), names.end(),
              descending([](const analyze::NameStatistics& s) { return s.p99_ns; }));
  } else {
    std::sort(names.begin(), names.end(),
              descending([](const analyze::NameStatistics& s) { return s.total_ns; }));
  }
}

}  // namespace internal
}  // namespace opsight::report
