// opsight compare: two traces side by side, per span name and per code path, with the
// change, the Mann-Whitney U test and a verdict; then the regressions over a threshold.
#include <fmt/format.h>

#include <cmath>

#include "analyze/compare.hpp"
#include "report/report.hpp"
#include "report/report_internal.hpp"

namespace opsight::report {

namespace {

using internal::Json;

std::string format_ratio(const analyze::ComparedRow& row) {
  if (row.verdict == analyze::Verdict::kOnlyInA || row.verdict == analyze::Verdict::kOnlyInB ||
      row.median_ratio <= 0.0)
    return "";
  return fmt::format("{:.3f}×", row.median_ratio);
}

std::string format_change(const analyze::ComparedRow& row) {
  if (row.median_ratio <= 0.0) return "";
  return fmt::format("{:+.1f}%", (row.median_ratio - 1.0) * 100.0);
}

std::string format_p(const analyze::ComparedRow& row) {
  if (!row.tested) return "";
  if (row.adjusted_p_value < 1e-4) return fmt::format("{:.1e}", row.adjusted_p_value);
  return fmt::format("{:.4f}", row.adjusted_p_value);
}

std::string maybe_duration(const analyze::Distribution& distribution, double value) {
  return distribution.count == 0 ? std::string("-") : format_duration(value);
}

void add_row_json(Json& array, const analyze::ComparedRow& row, bool tree) {
  Json entry = Json::object();
  entry["name"] = row.name;
  if (tree) {
    entry["depth"] = row.depth;
    if (row.parent == UINT32_MAX)
      entry["parent"] = nullptr;
    else
      entry["parent"] = row.parent;
  }
  Json a = Json::object(), b = Json::object();
  internal::add_distribution_fields(a, row.a);
  internal::add_distribution_fields(b, row.b);
  entry["a"] = std::move(a);
  entry["b"] = std::move(b);
  entry["median_ratio"] = row.median_ratio > 0.0 ? Json(row.median_ratio) : Json(nullptr);
  entry["mean_delta_ns"] = internal::json_number(row.mean_delta_ns);
  entry["total_delta_ns"] = internal::json_number(row.total_delta_ns);
  entry["tested"] = row.tested;
  entry["p_value"] = row.tested ? Json(row.p_value) : Json(nullptr);
  entry["adjusted_p_value"] = row.tested ? Json(row.adjusted_p_value) : Json(nullptr);
  entry["probability_b_greater"] = row.tested ? Json(row.probability_b_greater) : Json(nullptr);
  entry["verdict"] = std::string(analyze::verdict_name(row.verdict));
  array.push_back(std::move(entry));
}

}  // namespace

std::string render_comparison(const analyze::Comparison& comparison, std::string_view a_label,
                              std::string_view b_label, double fail_threshold,
                              const ReportOptions& options) {
  return internal::render_guarded([&]() -> std::string {
    std::vector<const analyze::ComparedRow*> regressed;
    if (fail_threshold >= 0) regressed = analyze::regressions(comparison, fail_threshold);
    const size_t shown_names = options.limit > 0 ? std::min(options.limit, comparison.names.size())
                                                 : comparison.names.size();
    size_t tested = 0;
    for (const analyze::ComparedRow& row : comparison.names) tested += row.tested ? 1 : 0;

    if (options.format == OutputFormat::kJson) {
      Json document = Json::object();
      Json a = Json::object(), b = Json::object();
      a["label"] = std::string(a_label);
      a["slices"] = comparison.a_slices;
      a["traced_ns"] = comparison.a_traced_ns;
      b["label"] = std::string(b_label);
      b["slices"] = comparison.b_slices;
      b["traced_ns"] = comparison.b_traced_ns;
      internal::add_overhead_fields(a, comparison.a_overhead);
      internal::add_overhead_fields(b, comparison.b_overhead);
      document["a"] = std::move(a);
      document["b"] = std::move(b);
      document["test"] = "mann-whitney-u, two-sided, holm-adjusted";
      document["alpha"] = comparison.options.alpha;
      document["min_change"] = comparison.options.min_change;
      document["min_samples"] = comparison.options.min_samples;
      Json names = Json::array();
      for (size_t index = 0; index < shown_names; ++index)
        add_row_json(names, comparison.names[index], false);
      document["names"] = std::move(names);
      Json tree = Json::array();
      for (const analyze::ComparedRow& row : comparison.tree) add_row_json(tree, row, true);
      document["tree"] = std::move(tree);
      document["fail_threshold"] = fail_threshold >= 0 ? Json(fail_threshold) : Json(nullptr);
      Json regressions = Json::array();
      for (const analyze::ComparedRow* row : regressed) regressions.push_back(row->name);
      document["regressions"] = std::move(regressions);
      return internal::dump_json(document);
    }
    if (options.format == OutputFormat::kCsv) {
      std::string out =
          "name,a_count,b_count,a_p50_ns,b_p50_ns,median_ratio,a_mean_ns,b_mean_ns,mean_delta_ns,"
          "probability_b_greater,adjusted_p_value,verdict\r\n";
      for (size_t index = 0; index < shown_names; ++index) {
        const analyze::ComparedRow& row = comparison.names[index];
        out += fmt::format("{},{},{},{},{},{},{},{},{},{},{},{}\r\n", csv_field(row.name),
                           row.a.count, row.b.count, internal::csv_number(row.a.p50_ns),
                           internal::csv_number(row.b.p50_ns),
                           row.median_ratio > 0 ? internal::csv_double(row.median_ratio) : "",
                           internal::csv_number(row.a.mean_ns), internal::csv_number(row.b.mean_ns),
                           internal::csv_number(row.mean_delta_ns),
                           row.tested ? internal::csv_double(row.probability_b_greater) : "",
                           row.tested ? internal::csv_double(row.adjusted_p_value) : "",
                           csv_field(analyze::verdict_name(row.verdict)));
      }
      return out;
    }

    std::string out = fmt::format(
        "opsight compare: A = {} ({} slices, {} traced), B = {} ({} slices, {} traced)\n", a_label,
        comparison.a_slices, format_duration(static_cast<double>(comparison.a_traced_ns)), b_label,
        comparison.b_slices, format_duration(static_cast<double>(comparison.b_traced_ns)));
    out += fmt::format(
        "test: Mann-Whitney U, two-sided, Holm-adjusted over {} name{}; slower/faster needs p < "
        "{}, P(B>A) on that side of 0.5 and a median change of at least {:.3g}%; fewer than {} "
        "calls a side: not tested\n",
        tested, tested == 1 ? "" : "s", comparison.options.alpha,
        comparison.options.min_change * 100.0, comparison.options.min_samples);
    using Align = internal::TextTable::Align;
    std::vector<Align> alignments(12, Align::kRight);
    alignments[0] = Align::kLeft;
    alignments[11] = Align::kLeft;
    internal::TextTable names(alignments);
    names.add_row({"name", "A calls", "B calls", "A p50", "B p50", "change", "ratio", "A mean",
                   "B mean", "P(B>A)", "p", "verdict"});
    for (size_t index = 0; index < shown_names; ++index) {
      const analyze::ComparedRow& row = comparison.names[index];
      names.add_row({internal::truncate_to_width(row.name, internal::kMaxNameWidth),
                     fmt::format("{}", row.a.count), fmt::format("{}", row.b.count),
                     maybe_duration(row.a, row.a.p50_ns), maybe_duration(row.b, row.b.p50_ns),
                     format_change(row), format_ratio(row), maybe_duration(row.a, row.a.mean_ns),
                     maybe_duration(row.b, row.b.mean_ns),
                     row.tested ? fmt::format("{:.2f}", row.probability_b_greater) : "",
                     format_p(row), std::string(analyze::verdict_name(row.verdict))});
    }
    names.render(out);
    if (shown_names < comparison.names.size())
      out += fmt::format("… {} more names\n", comparison.names.size() - shown_names);

    out += "\ncode paths (merged call trees of A and B):\n";
    internal::TextTable tree({Align::kLeft, Align::kRight, Align::kRight, Align::kRight,
                              Align::kRight, Align::kRight, Align::kLeft});
    tree.add_row({"span", "A calls", "B calls", "A p50", "B p50", "change", "verdict"});
    // Child counts for the box drawing.
    std::vector<uint32_t> child_count(comparison.tree.size(), 0);
    for (const analyze::ComparedRow& row : comparison.tree)
      if (row.parent != UINT32_MAX && row.parent < child_count.size()) ++child_count[row.parent];
    internal::TreePrefixes prefixes;
    const size_t max_tree_rows = options.limit > 0 ? options.limit * 4 : comparison.tree.size();
    const size_t shown_tree = std::min(max_tree_rows, comparison.tree.size());
    for (size_t index = 0; index < shown_tree; ++index) {
      const analyze::ComparedRow& row = comparison.tree[index];
      tree.add_row({prefixes.next(row.depth, child_count[index]) +
                        internal::truncate_to_width(row.name, internal::kMaxNameWidth),
                    fmt::format("{}", row.a.count), fmt::format("{}", row.b.count),
                    maybe_duration(row.a, row.a.p50_ns), maybe_duration(row.b, row.b.p50_ns),
                    format_change(row), std::string(analyze::verdict_name(row.verdict))});
    }
    tree.render(out);
    if (shown_tree < comparison.tree.size())
      out += fmt::format("… {} more code paths\n", comparison.tree.size() - shown_tree);

    out += "\nA " + format_overhead_line(comparison.a_overhead) + "\n";
    out += "B " + format_overhead_line(comparison.b_overhead) + "\n";
    if (fail_threshold >= 0) {
      out += fmt::format("\nregressions (slower by {:.3g}% or more at the median): ",
                         fail_threshold * 100.0);
      if (regressed.empty()) {
        out += "none\n";
      } else {
        out += fmt::format("{}\n", regressed.size());
        for (const analyze::ComparedRow* row : regressed)
          out += fmt::format("  {}: {} -> {} ({}), p = {}\n", row->name,
                             format_duration(row->a.p50_ns), format_duration(row->b.p50_ns),
                             format_change(*row), format_p(*row));
      }
    }
    return out;
  });
}

}  // namespace opsight::report
