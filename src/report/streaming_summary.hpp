// `opsight report FILE --summary` (and `--table`, `--ops`, `--merged-tree`, `--breakdown`:
// streaming_views.hpp) over a native file without the trace
// model (issue 28): the file is read a window at a time by the one slot decoder's streaming
// consumer (io::NativeTail, its clock set to the file's first and last syncs as the whole-file
// reader fits them), and each span is folded in as it ends: per name its count, total,
// self time (its duration, minus the durations of the spans whose enclosing span carries
// that name) and its duration appended to a compact column (analyze::DurationColumn: 4
// bytes a span while durations fit in 32 bits). At the end each name's column becomes its
// exact distribution (the same summarize_distribution, whose figures do not depend on the
// values' order) and the rows are rendered by the code render_summary ends in: the output
// is byte for byte the whole-trace summary's (docs/reports.md, "Streaming reports", says
// what is held and the edge cases).
//
// Thread-safety: a pure function of the file; concurrent calls on different files are safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "report/report.hpp"

namespace opsight::report {

struct StreamedReport {
  std::string text;                   // the (first) view; empty when `error` is set
  std::vector<std::string> texts;     // every view asked for, in the order asked
  std::optional<std::string> error;   // nothing could be read: "FILE: why"
  std::optional<std::string> damage;  // read only up to some point (a crash): says where
  uint64_t slices = 0;                // spans folded in
  // The duration columns' bytes when every span was in (their peak), and the largest
  // name's copy made to select its percentiles: what the streaming summary holds per span.
  uint64_t column_bytes = 0;
  uint64_t largest_name_copy_bytes = 0;
  // Views that were rendered from the whole file after all: "breakdown" when the file has
  // GPU work (its host/device split pairs kernels with their launches across tracks).
  std::vector<std::string> whole_file_views;
};

// Whether the view of that name (report_views()'s names) streams: "summary" and "table"
// (the same per-name aggregation), "operators" (per operator row: a duration column and
// a self time, passed up from each ended span to its open parent), "merged_tree" and
// "breakdown" (per code path, per phase: streaming_views.hpp). The others read the
// whole trace: docs/reports.md, "Streaming reports", says why for each.
bool view_streams(std::string_view view_name);

// The views named `views` (each one that view_streams) of the native file at `path`, from
// one pass over it, in memory bounded by the number of spans times about 4 bytes (see
// above), not by the model. options.format: text, JSON or CSV.
StreamedReport render_streaming(const std::string& path, const std::vector<std::string>& views,
                                const ReportOptions& options);
// The summary alone.
StreamedReport render_summary_streaming(const std::string& path, const ReportOptions& options);

}  // namespace opsight::report
