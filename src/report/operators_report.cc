// The operator table (the Furiosa profiler's print_npu_operators, Qualcomm's opstats): per
// operator, count, total, self, share of all operator self time, mean and percentiles.
#include <fmt/format.h>

#include "analyze/operators.hpp"
#include "report/report.hpp"
#include "report/report_internal.hpp"

namespace opsight::report {

namespace {

using internal::Json;

std::string operators_text(const trace::Trace& trace, const ReportOptions& options,
                           const analyze::OperatorTable& table, size_t shown,
                           const internal::TraceExtent& extent) {
  std::string out = internal::format_header_line("operators", options, extent) + "\n";
  if (table.rows.empty()) {
    out += fmt::format("no operator slices (categories {}); choose others with --ops-category\n",
                       fmt::join(table.categories, ", "));
    out += format_overhead_line(analyze::summarize_overhead(trace)) + "\n";
    return out;
  }
  out += fmt::format("{} operator slices, {} operators, {} of self time (categories {})\n",
                     table.operator_slices, table.rows.size(),
                     format_duration(static_cast<double>(table.total_self_ns)),
                     fmt::join(table.categories, ", "));
  using Align = internal::TextTable::Align;
  std::vector<Align> alignments(11, Align::kRight);
  alignments[0] = Align::kLeft;
  alignments[1] = Align::kLeft;
  internal::TextTable text_table(std::move(alignments));
  text_table.add_row({"operator", "category", "count", "total", "self", "share", "mean", "min",
                      "p50", "p99", "max"});
  for (size_t index = 0; index < shown; ++index) {
    const analyze::OperatorRow& row = table.rows[index];
    text_table.add_row({internal::truncate_to_width(row.name, internal::kMaxNameWidth),
                        row.category, fmt::format("{}", row.duration.count),
                        format_duration(static_cast<double>(row.duration.total_ns)),
                        format_duration(static_cast<double>(row.self_ns)), format_share(row.share),
                        format_duration(row.duration.mean_ns),
                        format_duration(static_cast<double>(row.duration.min_ns)),
                        format_duration(row.duration.p50_ns), format_duration(row.duration.p99_ns),
                        format_duration(static_cast<double>(row.duration.max_ns))});
  }
  text_table.render(out);
  if (shown < table.rows.size())
    out += fmt::format("… {} more operators\n", table.rows.size() - shown);
  out += format_overhead_line(analyze::summarize_overhead(trace)) + "\n";
  return out;
}

std::string operators_json(const trace::Trace& trace, const ReportOptions& options,
                           const analyze::OperatorTable& table, size_t shown) {
  Json document = Json::object();
  document["source"] = options.source_name;
  document["categories"] = table.categories;
  document["operator_slices"] = table.operator_slices;
  document["total_self_ns"] = table.total_self_ns;
  Json rows = Json::array();
  for (size_t index = 0; index < shown; ++index) {
    const analyze::OperatorRow& row = table.rows[index];
    Json entry = Json::object();
    entry["name"] = row.name;
    entry["category"] = row.category;
    entry["self_ns"] = row.self_ns;
    entry["share"] = row.share;
    internal::add_distribution_fields(entry, row.duration);
    rows.push_back(std::move(entry));
  }
  document["operators"] = std::move(rows);
  document["operators_omitted"] = table.rows.size() - shown;
  internal::add_overhead_fields(document, analyze::summarize_overhead(trace));
  return internal::dump_json(document);
}

std::string operators_csv(const analyze::OperatorTable& table, size_t shown) {
  std::string out =
      "name,category,count,total_ns,self_ns,share,mean_ns,min_ns,p50_ns,p99_ns,max_ns\r\n";
  for (size_t index = 0; index < shown; ++index) {
    const analyze::OperatorRow& row = table.rows[index];
    out +=
        fmt::format("{},{},{},{},{},{},{},{},{},{},{}\r\n", csv_field(row.name),
                    csv_field(row.category), row.duration.count, row.duration.total_ns, row.self_ns,
                    internal::csv_double(row.share), internal::csv_number(row.duration.mean_ns),
                    row.duration.min_ns, internal::csv_number(row.duration.p50_ns),
                    internal::csv_number(row.duration.p99_ns), row.duration.max_ns);
  }
  return out;
}

}  // namespace

std::string render_operators(const trace::Trace& trace, const ReportOptions& options) {
  return internal::render_guarded([&] {
    analyze::OperatorTable table = analyze::compute_operator_table(
        trace, options.operator_categories.empty() ? analyze::default_operator_categories()
                                                   : options.operator_categories);
    return internal::render_operator_table(trace, table, options, internal::TraceExtent::of(trace));
  });
}

std::string internal::render_operator_table(const trace::Trace& context,
                                            const analyze::OperatorTable& table,
                                            const ReportOptions& options,
                                            const TraceExtent& extent) {
  const size_t shown =
      options.limit > 0 ? std::min(options.limit, table.rows.size()) : table.rows.size();
  switch (options.format) {
    case OutputFormat::kJson:
      return operators_json(context, options, table, shown);
    case OutputFormat::kCsv:
      return operators_csv(table, shown);
    case OutputFormat::kText:
      break;
  }
  return operators_text(context, options, table, shown, extent);
}

}  // namespace opsight::report
