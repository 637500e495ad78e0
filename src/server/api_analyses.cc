// The API's analyses: /api/runs/{run}/report/{view} (a report view's JSON, as
// `opsight report --VIEW --format json` prints it), /api/runs/{run}/latency (the
// distribution of one span name: histogram and CDF) and /api/compare (`opsight compare`'s
// JSON).
#include <algorithm>
#include <cmath>

#include "analyze/compare.hpp"
#include "analyze/distribution.hpp"
#include "report/report.hpp"
#include "server/api_internal.hpp"

namespace opsight::server {
namespace {

nlohmann::json distribution_json(const analyze::Distribution& distribution) {
  return {{"count", distribution.count},     {"total_ns", distribution.total_ns},
          {"min_ns", distribution.min_ns},   {"max_ns", distribution.max_ns},
          {"mean_ns", distribution.mean_ns}, {"stddev_ns", distribution.stddev_ns},
          {"p50_ns", distribution.p50_ns},   {"p75_ns", distribution.p75_ns},
          {"p90_ns", distribution.p90_ns},   {"p95_ns", distribution.p95_ns},
          {"p97_ns", distribution.p97_ns},   {"p99_ns", distribution.p99_ns},
          {"p999_ns", distribution.p999_ns}};
}

report::ReportOptions json_report_options(const QueryParams& query) {
  report::ReportOptions options;
  options.format = report::OutputFormat::kJson;
  options.sort = query.string_or("sort", "total");
  if (auto problem = report::validate_sort_key(options.sort))
    throw ApiError(400, "query parameter 'sort': " + *problem);
  options.limit = static_cast<size_t>(query.int_or("limit", 0, 0, 100'000'000));
  options.max_roots = static_cast<size_t>(query.int_or("max_roots", 20, 0, 100'000'000));
  options.max_depth = static_cast<size_t>(query.int_or("depth", 0, 0, 65'535));
  options.breakdown_span = query.string_or("span", "");
  options.breakdown_by_category = query.string_or("by_category", "") == "true";
  return options;
}

}  // namespace

ApiResponse handle_report(ApiContext& context, const PathParams& path, const QueryParams& query) {
  const std::string& view_name = path.at(1);
  const report::ReportView* view = report::find_report_view(view_name);
  if (view == nullptr)
    throw ApiError(
        404, "no report view '" + view_name + "': the views are " + report::report_view_names());
  report::ReportOptions options = json_report_options(query);
  if (view->needs_span && options.breakdown_span.empty())
    throw ApiError(400, "the " + view_name +
                            " view needs the query parameter 'span' (the span "
                            "that marks one inference)");
  auto run = context.load_run(path.at(0));
  options.source_name = run->label();
  ApiResponse response;
  response.body = view->render(run->trace(), options);
  if (response.body.starts_with("opsight: ")) throw ApiError(500, response.body);
  return response;
}

ApiResponse handle_latency(ApiContext& context, const PathParams& path, const QueryParams& query) {
  const std::string name = query.required_string("name");
  const auto buckets = static_cast<size_t>(query.int_or("buckets", 40, 1, 1000));
  auto run = context.load_run(path.at(0));
  const trace::Trace& trace = run->trace();
  auto name_id = trace.strings.find(name);
  std::vector<int64_t> durations;
  if (name_id)
    for (trace::RowIndex row = 0; row < trace.slices.size(); ++row)
      if (trace.slices.name[row] == *name_id) durations.push_back(trace.slices.dur[row]);
  if (durations.empty()) throw ApiError(404, "no span named '" + name + "' in " + run->label());
  std::sort(durations.begin(), durations.end());
  std::vector<int64_t> for_summary = durations;
  analyze::Distribution distribution = analyze::summarize_distribution(for_summary);

  const int64_t low = durations.front(), high = durations.back();
  const double width =
      high > low ? static_cast<double>(high - low) / static_cast<double>(buckets) : 1.0;
  std::vector<uint64_t> counts(high > low ? buckets : 1, 0);
  for (int64_t duration : durations) {
    auto bucket = static_cast<size_t>(static_cast<double>(duration - low) / width);
    counts[std::min(bucket, counts.size() - 1)] += 1;
  }
  nlohmann::json histogram = nlohmann::json::array();
  for (size_t i = 0; i < counts.size(); ++i)
    histogram.push_back(
        {{"start_ns", static_cast<double>(low) + width * static_cast<double>(i)},
         {"end_ns", high > low ? static_cast<double>(low) + width * static_cast<double>(i + 1)
                               : static_cast<double>(high)},
         {"count", counts[i]}});
  // The CDF at 201 points (every half percent), through the reports' percentile function.
  nlohmann::json cdf = nlohmann::json::array();
  for (int step = 0; step <= 200; ++step) {
    double percent = step / 2.0;
    cdf.push_back(
        {{"percent", percent}, {"duration_ns", analyze::percentile_of_sorted(durations, percent)}});
  }
  return json_response({{"name", name},
                        {"distribution", distribution_json(distribution)},
                        {"histogram", histogram},
                        {"cdf", cdf}});
}

ApiResponse handle_compare(ApiContext& context, const PathParams&, const QueryParams& query) {
  const std::string a_reference = query.required_string("a");
  const std::string b_reference = query.required_string("b");
  report::ReportOptions options;
  options.format = report::OutputFormat::kJson;
  options.limit = static_cast<size_t>(query.int_or("limit", 0, 0, 100'000'000));
  auto a = context.load_run(a_reference);
  auto b = context.load_run(b_reference);
  analyze::Comparison comparison = analyze::compare_traces(a->trace(), b->trace());
  ApiResponse response;
  response.body = report::render_comparison(comparison, a->label(), b->label(), -1.0, options);
  if (response.body.starts_with("opsight: ")) throw ApiError(500, response.body);
  return response;
}

}  // namespace opsight::server
