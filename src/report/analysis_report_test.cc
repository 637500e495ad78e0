// The analysis views of `opsight report` (--merged-tree, --breakdown, --ops,
// --critical-path) and `opsight compare`: their text carries the right rows and their JSON
// the right numbers.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "analyze/compare.hpp"
#include "report/report.hpp"
#include "trace/categories.hpp"

namespace opsight::report {
namespace {

// Four inferences of "infer" [preprocess 100*(i+1), compute 1000, 10 ns uncovered], the
// compute span holding one "aten::mm" operator of 600 ns.
trace::Trace inference_trace(int64_t compute_ns = 1000) {
  trace::Trace trace;
  trace::TrackId track = trace.thread_track(7, 7);
  const trace::StringId infer = trace.intern("infer"), pre = trace.intern("preprocess"),
                        compute = trace.intern("compute"), mm = trace.intern("aten::mm");
  const trace::StringId op = trace.intern(trace::kCategoryOperator);
  int64_t start = 0;
  for (int64_t i = 0; i < 4; ++i) {
    const int64_t pre_ns = 100 * (i + 1);
    trace.slices.add(start, pre_ns + compute_ns + 10, infer, 0, track);
    trace.slices.add(start + 5, pre_ns, pre, 0, track);
    trace.slices.add(start + 5 + pre_ns, compute_ns, compute, 0, track);
    trace.slices.add(start + 5 + pre_ns + 100, 600, mm, op, track);
    start += pre_ns + compute_ns + 10;
  }
  trace.finalize();
  return trace;
}

nlohmann::json parse(const std::string& text) { return nlohmann::json::parse(text); }

TEST(BreakdownReport, TextAndJson) {
  trace::Trace trace = inference_trace();
  ReportOptions options;
  options.source_name = "run.opsight";
  options.breakdown_span = "infer";
  std::string text = render_breakdown(trace, options);
  EXPECT_NE(text.find("4 inferences of 'infer'"), std::string::npos) << text;
  EXPECT_NE(text.find("preprocess"), std::string::npos);
  EXPECT_NE(text.find("(uncovered)"), std::string::npos);
  EXPECT_NE(text.find("tracer overhead"), std::string::npos);
  options.format = OutputFormat::kJson;
  nlohmann::json document = parse(render_breakdown(trace, options));
  EXPECT_EQ(document["inference_count"], 4);
  ASSERT_EQ(document["phases"].size(), 3u);
  EXPECT_EQ(document["phases"][0]["phase"], "preprocess");
  EXPECT_EQ(document["phases"][0]["mean_ns"], 250);
  EXPECT_EQ(document["phases"][0]["p75_ns"], 325);  // 100,200,300,400: 300 + 0.25 * 100
  EXPECT_EQ(document["phases"][1]["min_ns"], 1000);
  EXPECT_EQ(document["phases"][2]["max_ns"], 10);  // 5 ns before preprocess, 5 after compute
  EXPECT_EQ(document["total"]["count"], 4);
  options.format = OutputFormat::kCsv;
  std::string csv = render_breakdown(trace, options);
  EXPECT_EQ(csv.rfind("phase,present_in,mean_ns", 0), 0u);
  EXPECT_NE(csv.find("(total),4,"), std::string::npos);
}

TEST(BreakdownReport, MissingSpanSaysSo) {
  trace::Trace trace = inference_trace();
  ReportOptions options;
  options.breakdown_span = "nope";
  EXPECT_NE(render_breakdown(trace, options).find("no span named 'nope'"), std::string::npos);
}

TEST(OperatorsReport, CountsOperatorsOnly) {
  trace::Trace trace = inference_trace();
  ReportOptions options;
  options.format = OutputFormat::kJson;
  nlohmann::json document = parse(render_operators(trace, options));
  EXPECT_EQ(document["operator_slices"], 4);
  ASSERT_EQ(document["operators"].size(), 1u);
  EXPECT_EQ(document["operators"][0]["name"], "aten::mm");
  EXPECT_EQ(document["operators"][0]["total_ns"], 2400);
  EXPECT_EQ(document["operators"][0]["share"], 1.0);
  options.format = OutputFormat::kText;
  options.operator_categories = {"gpu_kernel"};
  EXPECT_NE(render_operators(trace, options).find("no operator slices"), std::string::npos);
}

TEST(MergedTreeReport, OneNodePerPath) {
  trace::Trace trace = inference_trace();
  ReportOptions options;
  std::string text = render_merged_tree(trace, options);
  EXPECT_NE(text.find("4 code paths"), std::string::npos) << text;
  EXPECT_NE(text.find("└─ aten::mm"), std::string::npos) << text;
  options.format = OutputFormat::kJson;
  nlohmann::json document = parse(render_merged_tree(trace, options));
  ASSERT_EQ(document["nodes"].size(), 4u);
  EXPECT_EQ(document["nodes"][0]["name"], "infer");
  EXPECT_EQ(document["nodes"][0]["count"], 4);
  EXPECT_TRUE(document["nodes"][0]["parent"].is_null());
  EXPECT_EQ(document["nodes"][3]["name"], "aten::mm");
  EXPECT_EQ(document["nodes"][3]["parent"], 2);
}

TEST(CriticalPathReport, ByNameAddsUpToTheLength) {
  trace::Trace trace = inference_trace();
  ReportOptions options;
  options.format = OutputFormat::kJson;
  nlohmann::json document = parse(render_critical_path(trace, options));
  int64_t sum = document["idle_ns"];
  for (const auto& entry : document["by_name"]) sum += entry["on_path_ns"].get<int64_t>();
  EXPECT_EQ(sum, document["length_ns"]);
  EXPECT_EQ(document["roots"].size(), 4u);
  options.format = OutputFormat::kText;
  EXPECT_NE(render_critical_path(trace, options).find("4 chained root spans"), std::string::npos);
}

TEST(CompareReport, ListsRegressionsOverTheThreshold) {
  trace::Trace a = inference_trace(1000);
  trace::Trace b = inference_trace(1500);
  analyze::CompareOptions compare_options;
  compare_options.min_samples = 4;
  analyze::Comparison comparison = analyze::compare_traces(a, b, compare_options);
  ReportOptions options;
  std::string text = render_comparison(comparison, "a.opsight", "b.opsight", 0.05, options);
  EXPECT_NE(text.find("A = a.opsight"), std::string::npos) << text;
  EXPECT_NE(text.find("code paths"), std::string::npos);
  EXPECT_NE(text.find("A tracer overhead"), std::string::npos);
  EXPECT_NE(text.find("regressions (slower by 5% or more"), std::string::npos);
  options.format = OutputFormat::kJson;
  nlohmann::json document =
      parse(render_comparison(comparison, "a.opsight", "b.opsight", 0.05, options));
  EXPECT_EQ(document["a"]["label"], "a.opsight");
  bool found_compute = false;
  for (const auto& row : document["names"]) {
    if (row["name"] != "compute") continue;
    found_compute = true;
    EXPECT_DOUBLE_EQ(row["median_ratio"].get<double>(), 1.5);
    EXPECT_EQ(row["a"]["count"], 4);
  }
  EXPECT_TRUE(found_compute);
  EXPECT_TRUE(document["fail_threshold"].is_number());
}

}  // namespace
}  // namespace opsight::report
