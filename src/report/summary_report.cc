// The percentile summary: one row per span name. When spans carry metrics, the text form
// goes on with a "metrics per span" table for the names shown; the JSON list and the CSV
// (documented interfaces) stay as they are: `report --metrics` has the metrics as data.
#include <fmt/format.h>

#include "analyze/metrics.hpp"
#include "analyze/statistics.hpp"
#include "report/report.hpp"
#include "report/report_internal.hpp"

namespace opsight::report {

namespace {

using internal::Json;

// The fields of the documented --summary interface, in order.
constexpr std::string_view kSummaryCsvHeader =
    "name,category,count,total_ns,self_ns,min_ns,mean_ns,p50_ns,p90_ns,p95_ns,p97_ns,p99_ns,"
    "p999_ns,max_ns,stddev_ns";

// The "metrics per span" table of the names in `rows`, when any of them has metrics.
void add_span_metrics_text(const trace::Trace& trace,
                           const std::vector<analyze::NameStatistics>& rows, std::string& out) {
  const analyze::SliceMetricIndex index(trace);
  if (index.empty()) return;
  std::vector<trace::StringId> names;
  names.reserve(rows.size());
  for (const analyze::NameStatistics& row : rows) names.push_back(row.name);
  std::vector<analyze::SpanMetricStatistics> metrics =
      internal::span_metrics_of_names(analyze::compute_span_metric_statistics(trace, index), names);
  if (metrics.empty()) return;
  out += "metrics per span\n";
  internal::render_span_metric_table(trace, metrics, out);
}

std::string summary_text(const trace::Trace& trace, const ReportOptions& options,
                         const std::vector<analyze::NameStatistics>& rows, size_t omitted,
                         const internal::TraceExtent& extent) {
  std::string out = internal::format_header_line("summary", options, extent) + "\n";
  if (rows.empty()) {
    out += "no spans in this trace\n";
  } else {
    using Align = internal::TextTable::Align;
    std::vector<Align> alignments(13, Align::kRight);
    alignments[0] = Align::kLeft;
    internal::TextTable table(std::move(alignments));
    table.add_row({"name", "count", "total", "min", "mean", "median", "p90", "p95", "p97", "p99",
                   "p99.9", "max", "stddev"});
    for (const analyze::NameStatistics& row : rows) {
      table.add_row(
          {internal::truncate_to_width(trace.str(row.name), internal::kMaxNameWidth),
           fmt::format("{}", row.count), format_duration(static_cast<double>(row.total_ns)),
           format_duration(static_cast<double>(row.min_ns)), format_duration(row.mean_ns),
           format_duration(row.p50_ns), format_duration(row.p90_ns), format_duration(row.p95_ns),
           format_duration(row.p97_ns), format_duration(row.p99_ns), format_duration(row.p999_ns),
           format_duration(static_cast<double>(row.max_ns)), format_duration(row.stddev_ns)});
    }
    table.render(out);
    if (omitted > 0) out += fmt::format("… {} more name{}\n", omitted, omitted == 1 ? "" : "s");
    add_span_metrics_text(trace, rows, out);
  }
  out += format_overhead_line(analyze::summarize_overhead(trace)) + "\n";
  return out;
}

// A plain list (the documented interface); overhead is not part of it.
std::string summary_json(const trace::Trace& trace,
                         const std::vector<analyze::NameStatistics>& rows) {
  Json list = Json::array();
  for (const analyze::NameStatistics& row : rows) {
    Json entry = Json::object();
    entry["name"] = std::string(trace.str(row.name));
    entry["category"] = std::string(trace.str(row.category));
    entry["count"] = row.count;
    entry["total_ns"] = row.total_ns;
    entry["self_ns"] = row.self_ns;
    entry["min_ns"] = row.min_ns;
    entry["mean_ns"] = internal::json_number(row.mean_ns);
    entry["p50_ns"] = internal::json_number(row.p50_ns);
    entry["p90_ns"] = internal::json_number(row.p90_ns);
    entry["p95_ns"] = internal::json_number(row.p95_ns);
    entry["p97_ns"] = internal::json_number(row.p97_ns);
    entry["p99_ns"] = internal::json_number(row.p99_ns);
    entry["p999_ns"] = internal::json_number(row.p999_ns);
    entry["max_ns"] = row.max_ns;
    entry["stddev_ns"] = internal::json_number(row.stddev_ns);
    list.push_back(std::move(entry));
  }
  return internal::dump_json(list);
}

std::string summary_csv(const trace::Trace& trace,
                        const std::vector<analyze::NameStatistics>& rows) {
  std::string out(kSummaryCsvHeader);
  out += "\r\n";
  for (const analyze::NameStatistics& row : rows) {
    out += fmt::format(
        "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\r\n", csv_field(trace.str(row.name)),
        csv_field(trace.str(row.category)), row.count, row.total_ns, row.self_ns, row.min_ns,
        internal::csv_number(row.mean_ns), internal::csv_number(row.p50_ns),
        internal::csv_number(row.p90_ns), internal::csv_number(row.p95_ns),
        internal::csv_number(row.p97_ns), internal::csv_number(row.p99_ns),
        internal::csv_number(row.p999_ns), row.max_ns, internal::csv_number(row.stddev_ns));
  }
  return out;
}

}  // namespace

std::string render_summary(const trace::Trace& trace, const ReportOptions& options) {
  return internal::render_guarded([&] {
    analyze::TraceStatistics statistics = analyze::compute_name_statistics(trace);
    return internal::render_summary_rows(trace, std::move(statistics.names), options,
                                         internal::TraceExtent::of(trace));
  });
}

namespace internal {

std::string render_summary_rows(const trace::Trace& context,
                                std::vector<analyze::NameStatistics> rows,
                                const ReportOptions& options, const TraceExtent& extent) {
  sort_name_statistics(rows, context, options.sort);
  size_t omitted = 0;
  if (options.limit > 0 && rows.size() > options.limit) {
    omitted = rows.size() - options.limit;
    rows.resize(options.limit);
  }
  switch (options.format) {
    case OutputFormat::kJson:
      return summary_json(context, rows);
    case OutputFormat::kCsv:
      return summary_csv(context, rows);
    case OutputFormat::kText:
      break;
  }
  return summary_text(context, options, rows, omitted, extent);
}

}  // namespace internal

}  // namespace opsight::report
