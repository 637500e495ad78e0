// The critical path: the chain of root spans that sets the end-to-end time, and where that
// time goes by span name (self time on the path), plus idle gaps.
#include <fmt/format.h>

#include "analyze/critical_path.hpp"
#include "report/report.hpp"
#include "report/report_internal.hpp"

namespace opsight::report {

namespace {

using internal::Json;

std::string critical_path_text(const trace::Trace& trace, const ReportOptions& options,
                               const analyze::CriticalPath& path) {
  std::string out = format_header_line("critical path", trace, options) + "\n";
  if (path.roots.empty()) {
    out += "no spans in this trace\n";
    out += format_overhead_line(analyze::summarize_overhead(trace)) + "\n";
    return out;
  }
  const int64_t trace_start = trace.time_bounds().first;
  out += fmt::format(
      "{} end to end ({} to {}): {} chained root span{}, {} idle between them, {} concurrent "
      "root span{} off the path\n",
      format_duration(static_cast<double>(path.length_ns)),
      format_duration(static_cast<double>(path.start_ns - trace_start)),
      format_duration(static_cast<double>(path.end_ns - trace_start)), path.roots.size(),
      path.roots.size() == 1 ? "" : "s", format_duration(static_cast<double>(path.idle_ns)),
      path.concurrent_roots_skipped, path.concurrent_roots_skipped == 1 ? "" : "s");
  using Align = internal::TextTable::Align;
  internal::TextTable by_name({Align::kLeft, Align::kRight, Align::kRight, Align::kRight});
  by_name.add_row({"span", "on path (self)", "of path", "count"});
  const size_t shown_names =
      options.limit > 0 ? std::min(options.limit, path.by_name.size()) : path.by_name.size();
  for (size_t index = 0; index < shown_names; ++index) {
    const analyze::CriticalPathByName& entry = path.by_name[index];
    by_name.add_row({internal::truncate_to_width(trace.str(entry.name), internal::kMaxNameWidth),
                     format_duration(static_cast<double>(entry.on_path_ns)),
                     format_share(entry.share), fmt::format("{}", entry.count)});
  }
  if (path.idle_ns > 0) {
    by_name.add_row({"(idle)", format_duration(static_cast<double>(path.idle_ns)),
                     format_share(path.length_ns > 0 ? static_cast<double>(path.idle_ns) /
                                                           static_cast<double>(path.length_ns)
                                                     : 0.0),
                     ""});
  }
  by_name.render(out);
  if (shown_names < path.by_name.size())
    out += fmt::format("… {} more names\n", path.by_name.size() - shown_names);

  out += "\nchain:\n";
  internal::TextTable chain(
      {Align::kLeft, Align::kLeft, Align::kRight, Align::kRight, Align::kRight});
  chain.add_row({"root span", "track", "start", "end", "duration"});
  const size_t max_roots = options.max_roots == 0 ? path.roots.size() : options.max_roots;
  const size_t shown_roots = std::min(max_roots, path.roots.size());
  // The last roots matter most (they end the run): show the last ones when cut.
  for (size_t index = path.roots.size() - shown_roots; index < path.roots.size(); ++index) {
    const trace::RowIndex row = path.roots[index];
    chain.add_row(
        {internal::truncate_to_width(trace.str(trace.slices.name[row]), internal::kMaxNameWidth),
         internal::truncate_to_width(trace.track_label(trace.slices.track[row]), 40),
         format_duration(static_cast<double>(trace.slices.ts[row] - trace_start)),
         format_duration(static_cast<double>(trace.slices.end(row) - trace_start)),
         format_duration(static_cast<double>(trace.slices.dur[row]))});
  }
  if (shown_roots < path.roots.size())
    out += fmt::format("(the last {} of {} chained roots)\n", shown_roots, path.roots.size());
  chain.render(out);
  out += format_overhead_line(analyze::summarize_overhead(trace)) + "\n";
  return out;
}

std::string critical_path_json(const trace::Trace& trace, const ReportOptions& options,
                               const analyze::CriticalPath& path) {
  const int64_t trace_start = trace.time_bounds().first;
  Json document = Json::object();
  document["source"] = options.source_name;
  document["start_ns"] = path.start_ns - trace_start;
  document["end_ns"] = path.end_ns - trace_start;
  document["length_ns"] = path.length_ns;
  document["idle_ns"] = path.idle_ns;
  document["concurrent_roots_skipped"] = path.concurrent_roots_skipped;
  Json by_name = Json::array();
  for (const analyze::CriticalPathByName& entry : path.by_name) {
    Json item = Json::object();
    item["name"] = std::string(trace.str(entry.name));
    item["on_path_ns"] = entry.on_path_ns;
    item["share"] = entry.share;
    item["count"] = entry.count;
    by_name.push_back(std::move(item));
  }
  document["by_name"] = std::move(by_name);
  Json roots = Json::array();
  for (trace::RowIndex row : path.roots) {
    Json item = Json::object();
    item["name"] = std::string(trace.str(trace.slices.name[row]));
    item["track"] = trace.track_label(trace.slices.track[row]);
    item["start_ns"] = trace.slices.ts[row] - trace_start;
    item["dur_ns"] = trace.slices.dur[row];
    item["span_id"] = trace::span_id_to_hex(trace.slices.span_id[row]);
    roots.push_back(std::move(item));
  }
  document["roots"] = std::move(roots);
  internal::add_overhead_fields(document, analyze::summarize_overhead(trace));
  return internal::dump_json(document);
}

std::string critical_path_csv(const trace::Trace& trace, const analyze::CriticalPath& path) {
  std::string out = "name,on_path_ns,share,count\r\n";
  for (const analyze::CriticalPathByName& entry : path.by_name)
    out += fmt::format("{},{},{},{}\r\n", csv_field(trace.str(entry.name)), entry.on_path_ns,
                       internal::csv_double(entry.share), entry.count);
  if (path.idle_ns > 0) out += fmt::format("(idle),{},,\r\n", path.idle_ns);
  return out;
}

}  // namespace

std::string render_critical_path(const trace::Trace& trace, const ReportOptions& options) {
  return internal::render_guarded([&] {
    analyze::CriticalPath path = analyze::compute_critical_path(trace);
    switch (options.format) {
      case OutputFormat::kJson:
        return critical_path_json(trace, options, path);
      case OutputFormat::kCsv:
        return critical_path_csv(trace, path);
      case OutputFormat::kText:
        break;
    }
    return critical_path_text(trace, options, path);
  });
}

}  // namespace opsight::report
