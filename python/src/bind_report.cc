// opsight._native's reports (src/report): Trace.render (every view of report_views(), in
// text, JSON or CSV) and compare (opsight compare), rendered by the code that renders the
// CLI's.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "analyze/compare.hpp"
#include "bindings.hpp"
#include "report/report.hpp"

namespace nb = nanobind;

namespace opsight::python {
namespace {

report::OutputFormat output_format(std::string_view name) {
  std::string error;
  std::optional<report::OutputFormat> format = report::parse_output_format(name, &error);
  if (!format) throw std::invalid_argument(error);
  return *format;
}

std::string render(const store::LoadedTrace& loaded, std::string_view view, std::string_view format,
                   const std::string& sort, size_t limit, size_t max_roots, const std::string& span,
                   bool by_category, const std::vector<std::string>& categories, size_t max_depth) {
  if (auto error = report::validate_sort_key(sort)) throw std::invalid_argument(*error);
  report::ReportOptions options;
  options.format = output_format(format);
  options.sort = sort;
  options.limit = limit;
  options.max_roots = max_roots;
  options.max_depth = max_depth;
  options.source_name = loaded.label;
  options.breakdown_span = span;
  options.breakdown_by_category = by_category;
  options.operator_categories = categories;
  const report::ReportView* found = report::find_report_view(view);
  if (found == nullptr)
    throw std::invalid_argument("unknown report '" + std::string(view) + "' (expected " +
                                report::report_view_names() + ")");
  if (found->needs_span && span.empty())
    throw std::invalid_argument("the " + std::string(view) + " needs the name of a span");
  return found->render(loaded.trace, options);
}

std::string compare_traces(const store::LoadedTrace& a, const store::LoadedTrace& b, double alpha,
                           double min_change, uint64_t min_samples, double fail_threshold,
                           std::string_view format) {
  analyze::CompareOptions options;
  options.alpha = alpha;
  options.min_change = min_change;
  options.min_samples = min_samples;
  analyze::Comparison comparison = analyze::compare_traces(a.trace, b.trace, options);
  report::ReportOptions report_options;
  report_options.format = output_format(format);
  return report::render_comparison(comparison, a.label, b.label, fail_threshold, report_options);
}

}  // namespace

void bind_report(nb::module_& m, TraceClass& trace_class) {
  trace_class.def("render", &render, nb::arg("view"), nb::arg("format") = "text",
                  nb::arg("sort") = "total", nb::arg("limit") = 0, nb::arg("max_roots") = 20,
                  nb::arg("span") = "", nb::arg("by_category") = false,
                  nb::arg("categories") = std::vector<std::string>{}, nb::arg("max_depth") = 0);

  m.def("compare", &compare_traces, nb::arg("a"), nb::arg("b"), nb::arg("alpha") = 0.01,
        nb::arg("min_change") = 0.02, nb::arg("min_samples") = 5, nb::arg("fail_threshold") = -1.0,
        nb::arg("format") = "json", "Compares two traces (opsight compare), rendered in `format`.");
  m.def(
      "report_views",
      [] {
        std::vector<std::string> names;
        for (const report::ReportView& view : report::report_views()) names.emplace_back(view.name);
        return names;
      },
      "The report views render() takes, in `opsight report`'s order.");
  m.def("output_formats", &report::output_format_names,
        "The formats render() and compare() write (text, json, csv), the first the default.");
}

}  // namespace opsight::python
