// The `opsight report` views of a trace, rendered as text, JSON or CSV.
//
//   render_summary  per span name: count, total, min, mean, median, p90, p95, p97, p99,
//                   p99.9, max, stddev (the Furiosa/Qualcomm percentile summary). Its JSON
//                   form is a plain list of objects, a documented interface
//                   (docs/reports.md).
//   render_tree     every root span with its descendants, start-end, duration and share
//                   of the parent (HiQ's tree), box-drawn.
//   render_table    per span name: count, total, self, mean, p99, share of traced time,
//                   sortable and limited.
//   render_merged_tree   the aggregated call tree: one node per code path with its call
//                        count and percentiles (a thousand inferences, one tree).
//   render_breakdown     per-inference phases of the span named options.breakdown_span,
//                        with a percentile table per phase and inferences per second.
//   render_operators     the operator table (count, total, self, share, mean, percentiles).
//   render_kernels       the GPU kernel table (count, total, share, mean, p50, p99, grid,
//                        block, the operators that launch it), copies by kind, launch sites
//                        and the GPU summary (busy time, utilisation, CUDA API time); a
//                        trace without GPU work says so in one line (docs/gpu.md).
//   render_critical_path where the end-to-end time goes along the critical path.
//   render_comparison    an A/B comparison (opsight compare): per name and per code path.
//   render_metrics       metrics beyond latency: counter tracks (samples, min, time-weighted
//                        mean, max), per span name and metric (count, mean, percentiles,
//                        max), and what recording them cost.
//
// Spans that carry metrics ("metric.*" arguments, schema/metric_names.hpp) show them in the
// tree (a compact text column, a "metrics" object in JSON, one CSV column per metric) and
// in the text summary (a "metrics per span" table after the latency table); a trace
// without metrics renders exactly as it did before metrics existed.
//
// Every text report opens with one header line (source, slice count, time span) and ends
// with the tracer's own overhead and the events it dropped, always (HiQ's "transparent"
// tracing); the tree and table JSON objects carry the same figures as fields.
//
// Quick start:
//   opsight::report::ReportOptions options;
//   options.source_name = "run.opsight";
//   std::string text = opsight::report::render_summary(trace, options);
//
// Thread-safety: every function is pure (reads the finalized trace, returns a string);
// concurrent calls on the same unchanged trace are safe. No function throws: a failure
// (out of memory) is returned as a one-line message starting with "opsight: ".
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "analyze/compare.hpp"
#include "analyze/statistics.hpp"
#include "trace/trace.hpp"

namespace opsight::report {

enum class OutputFormat { kText, kJson, kCsv };

struct ReportOptions {
  OutputFormat format = OutputFormat::kText;
  // Row order of the summary and the table: total, self, count, mean, p99 (descending)
  // or name (ascending). An invalid key is treated as "total"; check it first with
  // validate_sort_key().
  std::string sort = "total";
  size_t limit = 0;       // rows of the summary and the table; 0 = all
  size_t max_roots = 20;  // roots shown by the tree; 0 = all
  // Levels the tree shows below each root (0 = all): deeper spans are left out and counted
  // on the deepest span shown ("+N nested"), e.g. 3 keeps a request's phases and modules
  // and folds the operators under them.
  size_t max_depth = 0;
  std::string source_name;  // the file name shown in headers ("trace" when empty)
  // render_breakdown: the span that marks one inference, and whether phases are its
  // children's names (default) or their categories.
  std::string breakdown_span;
  bool breakdown_by_category = false;
  // render_operators: the categories counted as operators (empty: "operator",
  // "gpu_kernel").
  std::vector<std::string> operator_categories;
};

// nullopt for a valid sort key, otherwise an error message naming the valid keys.
std::optional<std::string> validate_sort_key(std::string_view key);

// The output formats' names, in OutputFormat's order: "text", "json", "csv" (the one list
// every front end's --format takes).
std::vector<std::string> output_format_names();
// The output format of that name; nullopt, with `error` saying which names are valid, for
// any other name.
std::optional<OutputFormat> parse_output_format(std::string_view name, std::string* error);

std::string render_summary(const trace::Trace& trace, const ReportOptions& options);
std::string render_tree(const trace::Trace& trace, const ReportOptions& options);
std::string render_table(const trace::Trace& trace, const ReportOptions& options);
std::string render_merged_tree(const trace::Trace& trace, const ReportOptions& options);
std::string render_breakdown(const trace::Trace& trace, const ReportOptions& options);
std::string render_operators(const trace::Trace& trace, const ReportOptions& options);
std::string render_kernels(const trace::Trace& trace, const ReportOptions& options);
std::string render_critical_path(const trace::Trace& trace, const ReportOptions& options);
std::string render_metrics(const trace::Trace& trace, const ReportOptions& options);

// One report view: the one list that `opsight report`'s flags, the Python module's
// Trace.render(view) and the web UI dispatch through.
struct ReportView {
  std::string_view name;  // "merged_tree": what Python and the API call it
  std::string_view flag;  // "--merged-tree": what `opsight report` calls it
  std::string_view help;  // the flag's help text
  std::string (*render)(const trace::Trace& trace, const ReportOptions& options);
  bool needs_span = false;  // the breakdown: ReportOptions::breakdown_span names the inference
};

// Every view, in the order `opsight report` prints them when several are asked for.
std::span<const ReportView> report_views();
// The view called `name` ("summary", "merged_tree"...); nullptr if there is none.
const ReportView* find_report_view(std::string_view name);
// "tree, merged_tree, summary, table, breakdown, operators, kernels, critical_path or
// metrics".
std::string report_view_names();

// opsight compare: `a_label`/`b_label` name the two sides ("run 12 (nightly)", a file);
// regressions at or above `fail_threshold` (a fraction; negative: none asked for) are
// listed at the end. options.limit bounds the rows of each table.
std::string render_comparison(const analyze::Comparison& comparison, std::string_view a_label,
                              std::string_view b_label, double fail_threshold,
                              const ReportOptions& options);

// ---- Formatting used by the text reports (also useful to other front ends) ------------

// A duration with the unit chosen for the value: "812 ns", "12.5 ns", "12.4 µs",
// "3.21 ms", "4.005 s" (three significant digits in µs and ms, milliseconds in s).
std::string format_duration(double nanoseconds);

// A byte count with a binary unit: "512 B", "4.0 KiB", "12.0 MiB", "1.2 GiB" (one decimal
// from KiB on); negative values keep their sign.
std::string format_bytes(double bytes);

// A metric or counter value in the unit its name gives (schema::metric_unit): "ns" as a
// duration, "bytes" as format_bytes, "percent" as "87.5%", "watts" as "250.0 W",
// "celsius" as "61.5 °C", a rate "<unit>/s" as the unit's form plus "/s", a plain number
// with three significant digits ("2.50", "512"), any other unit after the number.
// `with_sign` puts "+" before positive values (changes: "rss +12.0 MiB").
std::string format_metric_value(double value, std::string_view unit, bool with_sign = false);

// A fraction as a percentage with one decimal ("62.5%"); "<0.1%" for tiny non-zero values.
std::string format_share(double fraction);

// A fraction as a percentage with two significant digits for small values ("0.00031%",
// "0.50%", "12.34%"), as the overhead line needs.
std::string format_small_percent(double fraction);

// "tracer overhead: 12.3 µs (0.00031% of 4.005 s traced), 0 events dropped". When the
// trace measured what its metrics cost, the parentheses say so: "(0.031% of 4.005 s traced;
// metrics 1.00 ms of it: memory 700 µs, cpu 300 µs; sampler 90.0 µs on its own thread)".
std::string format_overhead_line(const analyze::OverheadSummary& overhead);

// "opsight summary: run.opsight, 3 slices, 4.005 s".
std::string format_header_line(std::string_view report_name, const trace::Trace& trace,
                               const ReportOptions& options);

// One CSV field, quoted per RFC 4180 when it holds a comma, a quote, CR or LF.
std::string csv_field(std::string_view text);

}  // namespace opsight::report
