// The table: one row per span name with count, total, self, mean, p99 and share of the
// traced time, sortable and limited.
#include <fmt/format.h>

#include "analyze/statistics.hpp"
#include "report/report.hpp"
#include "report/report_internal.hpp"

namespace opsight::report {

namespace {

using internal::Json;

struct TableRows {
  std::vector<analyze::NameStatistics> rows;
  size_t omitted = 0;
};

TableRows table_rows(const trace::Trace& trace, std::vector<analyze::NameStatistics> rows,
                     const ReportOptions& options) {
  TableRows result{std::move(rows), 0};
  internal::sort_name_statistics(result.rows, trace, options.sort);
  if (options.limit > 0 && result.rows.size() > options.limit) {
    result.omitted = result.rows.size() - options.limit;
    result.rows.resize(options.limit);
  }
  return result;
}

std::string table_text(const trace::Trace& trace, const ReportOptions& options,
                       const TableRows& table_rows, const internal::TraceExtent& extent) {
  std::string out = internal::format_header_line("table", options, extent) + "\n";
  if (table_rows.rows.empty()) {
    out += "no spans in this trace\n";
  } else {
    using Align = internal::TextTable::Align;
    internal::TextTable table({Align::kLeft, Align::kRight, Align::kRight, Align::kRight,
                               Align::kRight, Align::kRight, Align::kRight});
    table.add_row({"name", "count", "total", "self", "mean", "p99", "of traced"});
    for (const analyze::NameStatistics& row : table_rows.rows) {
      table.add_row(
          {internal::truncate_to_width(trace.str(row.name), internal::kMaxNameWidth),
           fmt::format("{}", row.count), format_duration(static_cast<double>(row.total_ns)),
           format_duration(static_cast<double>(row.self_ns)), format_duration(row.mean_ns),
           format_duration(row.p99_ns), format_share(row.share_of_traced)});
    }
    table.render(out);
    if (table_rows.omitted > 0)
      out +=
          fmt::format("… {} more name{}\n", table_rows.omitted, table_rows.omitted == 1 ? "" : "s");
  }
  out += format_overhead_line(analyze::summarize_overhead(trace)) + "\n";
  return out;
}

std::string table_json(const trace::Trace& trace, const ReportOptions& options,
                       const TableRows& table_rows, const internal::TraceExtent& extent) {
  Json document = Json::object();
  document["source"] = options.source_name;
  document["slice_count"] = extent.slice_count;
  document["sort"] = validate_sort_key(options.sort) ? std::string("total") : options.sort;
  Json rows = Json::array();
  for (const analyze::NameStatistics& row : table_rows.rows) {
    Json entry = Json::object();
    entry["name"] = std::string(trace.str(row.name));
    entry["category"] = std::string(trace.str(row.category));
    entry["count"] = row.count;
    entry["total_ns"] = row.total_ns;
    entry["self_ns"] = row.self_ns;
    entry["mean_ns"] = internal::json_number(row.mean_ns);
    entry["p99_ns"] = internal::json_number(row.p99_ns);
    entry["share_of_traced"] = row.share_of_traced;
    rows.push_back(std::move(entry));
  }
  document["rows"] = std::move(rows);
  document["rows_omitted"] = table_rows.omitted;
  internal::add_overhead_fields(document, analyze::summarize_overhead(trace));
  return internal::dump_json(document);
}

std::string table_csv(const trace::Trace& trace, const TableRows& table_rows) {
  std::string out = "name,category,count,total_ns,self_ns,mean_ns,p99_ns,share_of_traced\r\n";
  for (const analyze::NameStatistics& row : table_rows.rows) {
    out += fmt::format("{},{},{},{},{},{},{},{}\r\n", csv_field(trace.str(row.name)),
                       csv_field(trace.str(row.category)), row.count, row.total_ns, row.self_ns,
                       internal::csv_number(row.mean_ns), internal::csv_number(row.p99_ns),
                       internal::csv_double(row.share_of_traced));
  }
  return out;
}

}  // namespace

std::string render_table(const trace::Trace& trace, const ReportOptions& options) {
  return internal::render_guarded([&] {
    analyze::TraceStatistics statistics = analyze::compute_name_statistics(trace);
    return internal::render_table_rows(trace, std::move(statistics.names), options,
                                       internal::TraceExtent::of(trace));
  });
}

std::string internal::render_table_rows(const trace::Trace& context,
                                        std::vector<analyze::NameStatistics> statistics,
                                        const ReportOptions& options, const TraceExtent& extent) {
  TableRows rows = table_rows(context, std::move(statistics), options);
  switch (options.format) {
    case OutputFormat::kJson:
      return table_json(context, options, rows, extent);
    case OutputFormat::kCsv:
      return table_csv(context, rows);
    case OutputFormat::kText:
      break;
  }
  return table_text(context, options, rows, extent);
}

}  // namespace opsight::report
