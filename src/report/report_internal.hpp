// Pieces shared by the report renderers: an aligned text table, JSON and CSV number
// formatting, the overhead fields, and row ordering. Private to the report module.
//
// Thread-safety: free functions are pure; a TextTable is used by one thread.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "analyze/aggregate_tree.hpp"
#include "analyze/breakdown.hpp"
#include "analyze/distribution.hpp"
#include "analyze/kernels.hpp"
#include "analyze/metrics.hpp"
#include "analyze/operators.hpp"
#include "analyze/statistics.hpp"
#include "report/report.hpp"
#include "trace/trace.hpp"

namespace opsight::report::internal {

using Json = nlohmann::ordered_json;  // keeps fields in the documented order

// Terminal columns taken by UTF-8 text: one per code point (µ, ├, … are one column each).
size_t display_width(std::string_view text);

// `text` cut to at most `width` columns, ending in "…" when it was cut.
std::string truncate_to_width(std::string_view text, size_t width);

// Longest name shown in text tables before it is cut with "…".
inline constexpr size_t kMaxNameWidth = 60;

// Collects rows of cells and renders them with every column padded to its widest cell,
// two spaces between columns, no trailing spaces. Column alignment is per column.
class TextTable {
 public:
  enum class Align { kLeft, kRight };
  explicit TextTable(std::vector<Align> alignments) : alignments_(std::move(alignments)) {}
  void add_row(std::vector<std::string> cells) { rows_.push_back(std::move(cells)); }
  void render(std::string& out) const;

 private:
  std::vector<Align> alignments_;
  std::vector<std::vector<std::string>> rows_;
};

// A value in ns for JSON/CSV: rounded to one decimal, an integer when whole.
Json json_number(double value);
std::string csv_number(double value);
// Shortest round-trip form of a double (shares).
std::string csv_double(double value);

// Adds traced_ns, overhead_ns, overhead_known, overhead_share and events_dropped, and
// metric_cost when the trace measured what its metrics cost.
void add_overhead_fields(Json& object, const analyze::OverheadSummary& overhead);

// Adds "metric_cost": {"span_metrics_ns", "groups": {GROUP: {"readings", "total_ns"}},
// "sampler": {"samples", "total_ns"} (when a sampler ran)}.
void add_metric_cost_field(Json& object, const analyze::MetricCost& cost);

// Serialises with two-space indentation and a final newline; invalid UTF-8 in names is
// replaced rather than thrown.
std::string dump_json(const Json& value);

// Orders name statistics by a sort key (see ReportOptions::sort); ties by name.
void sort_name_statistics(std::vector<analyze::NameStatistics>& names, const trace::Trace& trace,
                          std::string_view key);

// The fields of a distribution: count, total_ns, min_ns, mean_ns, p50_ns, p75_ns, p90_ns,
// p95_ns, p97_ns, p99_ns, p999_ns, max_ns, stddev_ns.
void add_distribution_fields(Json& object, const analyze::Distribution& distribution);

// ---- Span metrics (metrics_report.cc) ----------------------------------------------------

// Whether a metric is a change, shown with a sign ("rss +12.0 MiB"): its name has "delta".
bool is_change_metric(std::string_view metric_name);

// One slice's metrics in a few words, in display order: "cpu 10.1 ms · rss +12.0 MiB (peak
// 1.2 GiB) · read 4.0 MiB · sent 1.0 KiB". A peak or level is shown in parentheses after
// the change it belongs to, rss_start/rss_end are left out beside rss_delta, and a metric
// opsight does not know is shown by its name without the unit suffix ("tokens 512").
std::string compact_metrics(const analyze::SliceMetricIndex& index,
                            std::span<const analyze::MetricReading> readings);

// A metric value for JSON and CSV: an integer when the argument was one, else the number.
Json metric_json_value(const analyze::MetricReading& reading);
std::string metric_csv_value(const analyze::MetricReading& reading);

// The statistics of the span names in `names`, in that order, each name's metrics in
// display order; `statistics` as compute_span_metric_statistics returns them.
std::vector<analyze::SpanMetricStatistics> span_metrics_of_names(
    std::span<const analyze::SpanMetricStatistics> statistics,
    std::span<const trace::StringId> names);

// The "metrics per span" text table: name (on the first row of its metrics), metric,
// count, mean, p50, p99, max, in the metric's unit.
void render_span_metric_table(const trace::Trace& trace,
                              std::span<const analyze::SpanMetricStatistics> rows,
                              std::string& out);

// Builds the "├─ " / "│  " prefixes of a pre-order sequence of tree nodes, given each
// node's depth and number of children. Past kMaxDrawnDepth levels the rest is summed up as
// "⋯ (depth N)" so that lines of a broken, thousands-deep trace stay short.
class TreePrefixes {
 public:
  static constexpr size_t kMaxDrawnDepth = 48;
  std::string next(size_t depth, uint32_t child_count);

 private:
  std::vector<uint32_t> remaining_children_;  // per depth: children still to be drawn
};

// What a report's header line says of the whole trace: its slice count and time bounds
// (Trace::time_bounds), from the trace, or counted by a streaming pass over a file.
struct TraceExtent {
  size_t slice_count = 0;
  int64_t first_ns = 0;
  int64_t last_ns = 0;
  static TraceExtent of(const trace::Trace& trace) {
    auto [first, last] = trace.time_bounds();
    return TraceExtent{trace.slices.size(), first, last};
  }
};

// format_header_line's text from an extent.
std::string format_header_line(std::string_view report_name, const ReportOptions& options,
                               const TraceExtent& extent);

// The summary of `rows` (compute_name_statistics's entries, unsorted, naming strings of
// `context`): sorted, cut to options.limit and rendered; the text form's overhead line and
// its "metrics per span" table come from `context` (its run, tracks and the slices that
// carry metric arguments), its header from `extent`. render_summary and the streaming
// summary (streaming_summary.hpp) both end here, so that their outputs are identical.
std::string render_summary_rows(const trace::Trace& context,
                                std::vector<analyze::NameStatistics> rows,
                                const ReportOptions& options, const TraceExtent& extent);

// The table of `rows` (with their share_of_traced set), as render_summary_rows.
std::string render_table_rows(const trace::Trace& context,
                              std::vector<analyze::NameStatistics> rows,
                              const ReportOptions& options, const TraceExtent& extent);

// The operator table `table` (compute_operator_table's, or the streaming one's), as
// render_summary_rows.
std::string render_operator_table(const trace::Trace& context, const analyze::OperatorTable& table,
                                  const ReportOptions& options, const TraceExtent& extent);

// The merged tree `tree` (AggregateTree::build's, or the streaming one's, naming strings of
// `context`), as render_summary_rows.
std::string render_merged_tree_nodes(const trace::Trace& context,
                                     const analyze::AggregateTree& tree,
                                     const ReportOptions& options, const TraceExtent& extent);

// The breakdown `breakdown` (compute_breakdown's, or the streaming one's) with its
// host/device split when the trace has GPU work, as render_summary_rows.
std::string render_breakdown_result(const trace::Trace& context,
                                    const analyze::Breakdown& breakdown,
                                    const std::optional<analyze::HostDeviceSplit>& split,
                                    const ReportOptions& options, const TraceExtent& extent);

// Runs a renderer, turning any exception into a one-line message (nothing escapes).
template <typename Renderer>
std::string render_guarded(Renderer&& renderer) noexcept {
  try {
    return renderer();
  } catch (const std::exception& error) {
    try {
      return std::string("opsight: cannot render the report: ") + error.what() + "\n";
    } catch (...) {
      return {};
    }
  } catch (...) {
    return {};
  }
}

}  // namespace opsight::report::internal
