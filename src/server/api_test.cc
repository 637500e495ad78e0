// The REST API without HTTP: every route over a real run store, its answers checked
// against the report code they must equal, and every kind of bad request refused with a
// 4xx and a message naming what was wrong.
#include "server/api.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "analyze/compare.hpp"
#include "report/report.hpp"
#include "server/server_test_fixtures.hpp"

namespace opsight::server {
namespace {

using nlohmann::json;
using testing::inference_trace;
using testing::kHostileName;
using testing::TemporaryStore;

class ApiTest : public ::testing::Test {
 protected:
  ApiTest() : store_(::testing::UnitTest::GetInstance()->current_test_info()->name()) {
    store_.add_two_runs();
    bad_file_ = (store_.folder() / "broken.json").string();
    std::ofstream(bad_file_) << "this is not a trace";
    ApiOptions options;
    options.store_path = store_.path();
    options.files = {bad_file_};
    options.max_loaded_runs = 2;
    api_ = std::make_unique<Api>(options);
  }

  ApiResponse get(const std::string& path, std::map<std::string, std::string> params = {}) {
    return api_->handle({"GET", path, std::move(params)});
  }
  json get_json(const std::string& path, std::map<std::string, std::string> params = {}) {
    ApiResponse response = get(path, std::move(params));
    EXPECT_EQ(response.status, 200) << path << ": " << response.body;
    return json::parse(response.body);
  }
  // Expects a refusal with `status` whose message contains `words`.
  void expect_error(const ApiResponse& response, int status, const std::string& words) {
    EXPECT_EQ(response.status, status) << response.body;
    json body = json::parse(response.body);
    EXPECT_NE(body.at("error").get<std::string>().find(words), std::string::npos) << response.body;
  }

  TemporaryStore store_;
  std::string bad_file_;
  std::unique_ptr<Api> api_;
};

TEST_F(ApiTest, RunsAreListedSearchedAndSorted) {
  json runs = get_json("/api/runs");
  ASSERT_EQ(runs["runs"].size(), 2u);
  EXPECT_EQ(runs["runs"][0]["name"], "slower");  // newest first
  EXPECT_EQ(runs["runs"][1]["tags"]["model"], "bert");
  EXPECT_EQ(runs["runs"][1]["slices"], 60);
  EXPECT_EQ(runs["runs"][1]["created"].get<std::string>().back(), 'Z');
  EXPECT_EQ(runs["files"][0]["ref"], "file:0");
  json by_name = get_json("/api/runs", {{"sort", "name"}});
  EXPECT_EQ(by_name["runs"][0]["name"], "baseline");
  json searched = get_json("/api/runs", {{"q", "SLOW"}});
  ASSERT_EQ(searched["runs"].size(), 1u);
  EXPECT_EQ(searched["runs"][0]["name"], "slower");
  EXPECT_EQ(get_json("/api/runs", {{"q", "model=bert"}})["runs"].size(), 1u);
  EXPECT_EQ(get_json("/api/runs", {{"tag", "model=bert"}})["runs"].size(), 1u);
  EXPECT_EQ(get_json("/api/runs", {{"since", "2100-01-01"}})["runs"].size(), 0u);
  EXPECT_EQ(get_json("/api/runs", {{"until", "2100-01-01"}})["runs"].size(), 2u);
  expect_error(get("/api/runs", {{"sort", "color"}}), 400, "'sort': 'color'");
  expect_error(get("/api/runs", {{"since", "yesterday"}}), 400, "'since'");
  expect_error(get("/api/runs", {{"limit", "-1"}}), 400, "'limit'");
}

TEST_F(ApiTest, RunDetailHasMetadataCountsAndOverhead) {
  json run = get_json("/api/runs/baseline");
  EXPECT_EQ(run["id"], 1);
  EXPECT_EQ(run["label"], "run 1 (baseline)");
  EXPECT_EQ(run["command"], "python serve.py");
  EXPECT_EQ(run["counts"]["slices"], 60);
  EXPECT_EQ(run["counts"]["counter_samples"], 20);
  EXPECT_EQ(run["overhead"]["overhead_ns"], 12000);
  EXPECT_EQ(run["overhead"]["events_dropped"], 0);
  EXPECT_NE(run["overhead"]["line"].get<std::string>().find("tracer overhead: 12.0 µs"),
            std::string::npos);
  EXPECT_EQ(get_json("/api/runs/latest")["name"], "slower");
  expect_error(get("/api/runs/nosuchrun"), 404, "nosuchrun");
  expect_error(get("/api/runs/file:7"), 404, "file:7");
  expect_error(get("/api/runs/file:0"), 422, "broken.json");
}

TEST_F(ApiTest, ReportViewsAreTheReportsJson) {
  trace::Trace trace = inference_trace(20, 1, true);
  report::ReportOptions options;
  options.format = report::OutputFormat::kJson;
  options.source_name = "run 1 (baseline)";
  EXPECT_EQ(get("/api/runs/1/report/summary").body, report::render_summary(trace, options));
  EXPECT_EQ(get("/api/runs/1/report/merged_tree").body, report::render_merged_tree(trace, options));
  options.sort = "self";
  options.limit = 2;
  EXPECT_EQ(get("/api/runs/1/report/table", {{"sort", "self"}, {"limit", "2"}}).body,
            report::render_table(trace, options));
  expect_error(get("/api/runs/1/report/pie"), 404, "no report view 'pie'");
  expect_error(get("/api/runs/1/report/breakdown"), 400, "'span'");
  expect_error(get("/api/runs/1/report/table", {{"sort", "colour"}}), 400, "'sort'");
  EXPECT_EQ(get("/api/runs/1/report/breakdown", {{"span", "infer"}}).status, 200);
}

TEST_F(ApiTest, LatencyOfOneNameHasHistogramAndCdf) {
  json latency = get_json("/api/runs/1/latency", {{"name", "infer"}, {"buckets", "4"}});
  EXPECT_EQ(latency["distribution"]["count"], 20);
  EXPECT_EQ(latency["distribution"]["min_ns"], 1'000'000);
  EXPECT_EQ(latency["distribution"]["max_ns"], 1'019'000);
  ASSERT_EQ(latency["histogram"].size(), 4u);
  uint64_t total = 0;
  for (const auto& bucket : latency["histogram"]) total += bucket["count"].get<uint64_t>();
  EXPECT_EQ(total, 20u);
  EXPECT_EQ(latency["cdf"].size(), 201u);
  EXPECT_EQ(latency["cdf"][100]["duration_ns"], latency["distribution"]["p50_ns"]);
  expect_error(get("/api/runs/1/latency"), 400, "missing query parameter 'name'");
  expect_error(get("/api/runs/1/latency", {{"name", "nothing"}}), 404, "no span named 'nothing'");
  expect_error(get("/api/runs/1/latency", {{"name", "infer"}, {"buckets", "0"}}), 400, "'buckets'");
}

TEST_F(ApiTest, CompareIsOpsightComparesJson) {
  trace::Trace a = inference_trace(20, 1, true), b = inference_trace(20, 3, false);
  report::ReportOptions options;
  options.format = report::OutputFormat::kJson;
  std::string expected = report::render_comparison(
      analyze::compare_traces(a, b), "run 1 (baseline)", "run 2 (slower)", -1.0, options);
  ApiResponse response = get("/api/compare", {{"a", "1"}, {"b", "2"}});
  EXPECT_EQ(response.status, 200);
  EXPECT_EQ(response.body, expected);
  EXPECT_NE(response.body.find("\"slower\""), std::string::npos);
  expect_error(get("/api/compare", {{"a", "1"}}), 400, "'b'");
}

TEST_F(ApiTest, TimelineTilesCountersSlicesAndSearch) {
  json timeline = get_json("/api/runs/1/timeline");
  ASSERT_EQ(timeline["processes"].size(), 1u);
  const json& process = timeline["processes"][0];
  EXPECT_EQ(process["name"], "python serve.py");
  ASSERT_EQ(process["tracks"].size(), 1u);
  EXPECT_EQ(process["tracks"][0]["depth_count"], 2);
  EXPECT_EQ(process["counters"][0]["name"], "rss");
  EXPECT_EQ(process["counters"][0]["max"], 20000.0);
  const std::string start = std::to_string(timeline["start_ns"].get<int64_t>());
  const std::string end = std::to_string(timeline["end_ns"].get<int64_t>());

  json fine = get_json("/api/runs/1/tiles",
                       {{"track", "0"}, {"start", start}, {"end", end}, {"resolution", "1000"}});
  EXPECT_EQ(fine["depths"][0].size(), 20u);  // every inference is wider than a pixel
  json first = fine["depths"][0][0];         // [start, dur, count, row, name index]
  EXPECT_EQ(fine["names"][first[4].get<size_t>()], "infer");
  json coarse =
      get_json("/api/runs/1/tiles",
               {{"track", "0"}, {"start", start}, {"end", end}, {"resolution", "100000000"}});
  EXPECT_EQ(coarse["depths"][0].size(), 1u);
  EXPECT_EQ(coarse["depths"][0][0][2], 20);  // one block standing for 20 slices

  json counters =
      get_json("/api/runs/1/counters",
               {{"track", "0"}, {"start", start}, {"end", end}, {"resolution", "1000"}});
  EXPECT_EQ(counters["points"].size(), 20u);

  auto row = std::to_string(first[3].get<int64_t>());
  json slice = get_json("/api/runs/1/slices/" + row);
  EXPECT_EQ(slice["name"], "infer");
  EXPECT_EQ(slice["args"]["batch"], 0);
  EXPECT_EQ(slice["child_count"], 2);
  EXPECT_EQ(slice["self_ns"], 1'000'000 - 500'000 - 250'000);

  json search = get_json("/api/runs/1/search", {{"q", "<IMG"}});
  ASSERT_EQ(search["total"], 1);
  EXPECT_EQ(search["matches"][0]["name"], kHostileName);
  json child =
      get_json("/api/runs/1/slices/" + std::to_string(search["matches"][0]["row"].get<int>()));
  ASSERT_EQ(child["parents"].size(), 1u);
  EXPECT_EQ(child["parents"][0]["name"], "infer");
  // Its trace: the root's own; the child's parent is the root, the root begins the trace.
  ASSERT_TRUE(slice["trace_id"].is_string());
  EXPECT_EQ(slice["trace_id"].get<std::string>().size(), 32u);
  EXPECT_TRUE(slice["parent_span_id"].is_null());
  EXPECT_EQ(child["trace_id"], slice["trace_id"]);
  EXPECT_EQ(child["parent_span_id"], slice["span_id"]);
  json spans =
      get_json("/api/runs/1/search", {{"q", "trace:" + slice["trace_id"].get<std::string>()}});
  EXPECT_GE(spans["total"].get<int>(), 3);  // infer and its two children at least
  for (const json& match : spans["matches"])
    EXPECT_EQ(get_json("/api/runs/1/slices/" + std::to_string(match["row"].get<int>()))["trace_id"],
              slice["trace_id"]);
  expect_error(get("/api/runs/1/search", {{"q", "trace:12"}}), 400, "32 hex digits");
}

TEST_F(ApiTest, ARangeSummarizesTheSlicesInsideIt) {
  // The first inference: infer [1 ms, 2 ms), encode and decode inside it; the second
  // starts at 2.05 ms.
  json range = get_json("/api/runs/2/range", {{"start", "1000000"}, {"end", "4000000"}});
  EXPECT_EQ(range["duration_ns"], 3'000'000);
  EXPECT_EQ(range["slice_count"], 3);  // one whole inference of 3 ms, with its children
  ASSERT_EQ(range["names"].size(), 3u);
  EXPECT_EQ(range["names"][0]["name"], "infer");
  EXPECT_EQ(range["names"][0]["total_ns"], 3'000'000);
  EXPECT_EQ(range["names"][1]["name"], "encode");
  EXPECT_EQ(range["names"][1]["p50_ns"], 1'500'000.0);
  json everything = get_json("/api/runs/2/range", {{"start", "0"}, {"end", "999999999999"}});
  EXPECT_EQ(everything["slice_count"], 60);
  EXPECT_EQ(get_json("/api/runs/2/range",
                     {{"start", "0"}, {"end", "999999999999"}, {"limit", "1"}})["names"]
                .size(),
            1u);
  expect_error(get("/api/runs/2/range", {{"start", "5"}, {"end", "4"}}), 400, "before start");
  expect_error(get("/api/runs/2/range", {{"start", "5"}}), 400, "'end'");
}

// Search: the exact total whatever the limit, pages from an offset in time order, args.
TEST_F(ApiTest, SearchCountsEveryMatchPagesAndLooksInArgs) {
  json all = get_json("/api/runs/2/search", {{"q", "infer"}});
  ASSERT_EQ(all["total"], 20);
  json page = get_json("/api/runs/2/search", {{"q", "infer"}, {"limit", "5"}, {"offset", "17"}});
  EXPECT_EQ(page["total"], 20);  // exact, not the page's size
  EXPECT_EQ(page["offset"], 17);
  ASSERT_EQ(page["matches"].size(), 3u);  // the last three, in time order
  for (int i = 0; i < 3; ++i) EXPECT_EQ(page["matches"][i], all["matches"][17 + i]);
  EXPECT_LT(all["matches"][0]["ts"].get<int64_t>(), all["matches"][1]["ts"].get<int64_t>());
  EXPECT_EQ(get_json("/api/runs/2/search", {{"q", "infer"}, {"offset", "20"}})["matches"].size(),
            0u);
  // Plain text looks in arg values too (a number: equal); a named arg, only its values.
  EXPECT_EQ(get_json("/api/runs/2/search", {{"q", "7"}})["total"], 1);
  json batch = get_json("/api/runs/2/search", {{"q", "arg:batch=17"}});
  ASSERT_EQ(batch["total"], 1);
  EXPECT_EQ(get_json("/api/runs/2/slices/" +
                     std::to_string(batch["matches"][0]["row"].get<int>()))["args"]["batch"],
            17);
  EXPECT_EQ(get_json("/api/runs/2/search", {{"q", "arg:batch="}})["total"], 20);
  EXPECT_EQ(get_json("/api/runs/2/search", {{"q", "name:7"}})["total"], 0);
  expect_error(get("/api/runs/2/search", {{"q", "name:"}}), 400, "nothing to search");
  expect_error(get("/api/runs/2/search", {{"q", "arg:=1"}}), 400, "KEY");
  expect_error(get("/api/runs/2/search", {{"q", "x"}, {"offset", "-1"}}), 400, "'offset'");
}

// An area of the second run (each inference 3x: infer [1 ms, 4 ms), encode [1.00001 ms,
// 2.50001 ms), decode [2.50002 ms, 3.25002 ms)): the range [2.4 ms, 2.6 ms) clips all three.
TEST_F(ApiTest, AnAreaGivesClippedTimesPerTrackAndPerName) {
  json area =
      get_json("/api/runs/2/area", {{"start", "2400000"}, {"end", "2600000"}, {"tracks", "0"}});
  EXPECT_EQ(area["duration_ns"], 200'000);
  EXPECT_EQ(area["slice_count"], 3);
  ASSERT_EQ(area["tracks"].size(), 1u);
  EXPECT_EQ(area["tracks"][0]["track"], 0);
  EXPECT_EQ(area["tracks"][0]["slice_count"], 3);
  EXPECT_EQ(area["tracks"][0]["busy_ns"], 200'000);  // infer covers the whole range
  ASSERT_EQ(area["names"].size(), 3u);
  EXPECT_EQ(area["names"][0]["name"], "infer");
  EXPECT_EQ(area["names"][0]["wall_ns"], 200'000);
  EXPECT_EQ(area["names"][0]["self_ns"], 200'000 - 100'010 - 99'980);
  EXPECT_EQ(area["names"][1]["name"], "encode");
  EXPECT_EQ(area["names"][1]["wall_ns"], 100'010);  // [2.4 ms, 2.50001 ms)
  EXPECT_EQ(area["names"][1]["self_ns"], 100'010);
  EXPECT_EQ(area["names"][2]["name"], "decode");
  EXPECT_EQ(area["names"][2]["wall_ns"], 99'980);  // [2.50002 ms, 2.6 ms)
  EXPECT_EQ(area["names"][2]["average_ns"], 99'980.0);
  // No tracks given: every track with slices; limit cuts the names, not name_count.
  json whole =
      get_json("/api/runs/2/area", {{"start", "0"}, {"end", "999999999999"}, {"limit", "1"}});
  EXPECT_EQ(whole["slice_count"], 60);
  EXPECT_EQ(whole["track_count"], 1);
  EXPECT_EQ(whole["name_count"], 3);
  EXPECT_EQ(whole["names"].size(), 1u);
  expect_error(get("/api/runs/2/area", {{"start", "5"}, {"end", "4"}}), 400, "before start");
  expect_error(get("/api/runs/2/area", {{"start", "0"}, {"end", "4"}, {"tracks", "0,x"}}), 400,
               "'x' is not a track id");
  expect_error(get("/api/runs/2/area", {{"start", "0"}, {"end", "4"}, {"tracks", "9"}}), 404,
               "no track 9");
}

// A kernel's details name the call that launched it and the operator, module and source
// line open there (a PyTorch-profiler trace of an MLP on CUDA, tests/data); a CPU slice has
// no such block.
TEST_F(ApiTest, AKernelsDetailsNameItsLaunchOperatorModuleAndLine) {
  ApiOptions options;
  options.store_path = store_.path();
  options.files = {std::string(OPSIGHT_SOURCE_DIR) +
                   "/tests/data/pytorch_profiler_cuda_small.json"};
  Api api(options);
  auto get_from = [&](const std::string& path, std::map<std::string, std::string> params = {}) {
    ApiResponse response = api.handle({"GET", path, std::move(params)});
    EXPECT_EQ(response.status, 200) << path << ": " << response.body;
    return json::parse(response.body);
  };
  json search = get_from("/api/runs/file:0/search", {{"q", "sm90_xmma_gemm"}});
  ASSERT_GE(search["total"].get<int>(), 1);
  json kernel =
      get_from("/api/runs/file:0/slices/" + std::to_string(search["matches"][0]["row"].get<int>()));
  ASSERT_TRUE(kernel.contains("launched_by")) << kernel.dump();
  EXPECT_EQ(kernel["launched_by"]["name"], "cudaLaunchKernel");
  EXPECT_EQ(kernel["launched_by"]["operator"], "aten::addmm");
  EXPECT_EQ(kernel["launched_by"]["module"].get<std::string>().rfind("nn.Module: Linear_", 0), 0u);
  EXPECT_EQ(kernel["launched_by"]["source"], "torch/nn/modules/linear.py:125");
  json call = get_from("/api/runs/file:0/slices/" +
                       std::to_string(kernel["launched_by"]["row"].get<int>()));
  EXPECT_FALSE(call.contains("launched_by"));
}

TEST_F(ApiTest, MalformedTimelineRequestsAreRefusedWithTheirReason) {
  std::map<std::string, std::string> good = {
      {"track", "0"}, {"start", "0"}, {"end", "1000"}, {"resolution", "1"}};
  auto with = [&](const std::string& key, const std::string& value) {
    auto params = good;
    if (value.empty()) {
      params.erase(key);
    } else {
      params[key] = value;
    }
    return params;
  };
  expect_error(get("/api/runs/1/tiles", with("track", "")), 400, "missing query parameter 'track'");
  expect_error(get("/api/runs/1/tiles", with("track", "x")), 400, "'track': 'x' is not an integer");
  expect_error(get("/api/runs/1/tiles", with("track", "9")), 404, "no track 9");
  expect_error(get("/api/runs/1/tiles", with("end", "-5")), 400, "before start");
  expect_error(get("/api/runs/1/tiles", with("resolution", "0")), 400, "'resolution'");
  expect_error(get("/api/runs/1/tiles", with("end", "99999999999999")), 400, "pixels");
  expect_error(get("/api/runs/1/tiles", with("start", "1e9")), 400, "not an integer");
  expect_error(get("/api/runs/1/tiles", with("start", "99999999999999999999999")), 400, "'start'");
  expect_error(get("/api/runs/1/counters", with("track", "3")), 404, "no counter track 3");
  expect_error(get("/api/runs/1/slices/999999"), 404, "no slice row '999999'");
  expect_error(get("/api/runs/1/slices/-1"), 404, "no slice row");
  expect_error(get("/api/runs/1/search", {{"q", std::string(1001, 'a')}}), 400, "longer");
  expect_error(get("/api/nothing"), 404, "no API route /api/nothing");
  expect_error(get("/api/runs/1/tiles/extra"), 404, "no API route");
  expect_error(api_->handle({"POST", "/api/runs", {}}), 405, "method POST");
  expect_error(get("/api/runs//report/summary"), 404, "no API route");
}

TEST_F(ApiTest, DeleteRemovesARunAndForgetsItsTrace) {
  get_json("/api/runs/2");
  json removed = json::parse(api_->handle({"DELETE", "/api/runs/2", {}}).body);
  EXPECT_EQ(removed["removed"]["name"], "slower");
  EXPECT_EQ(get_json("/api/runs")["runs"].size(), 1u);
  expect_error(get("/api/runs/2"), 404, "2");
  expect_error(api_->handle({"DELETE", "/api/runs/file:0", {}}), 400, "not a stored run");
}

TEST_F(ApiTest, LoadedRunsStayWithinTheCapacity) {
  get_json("/api/runs/1/timeline");
  get_json("/api/runs/2/timeline");
  get_json("/api/runs/1/timeline");
  json info = get_json("/api/info");
  EXPECT_EQ(info["loaded_runs"], json({"run:1", "run:2"}));
  EXPECT_EQ(info["max_loaded_runs"], 2);
}

TEST_F(ApiTest, TagsAreAddedReplacedAndRemovedOnStoredRuns) {
  json tagged =
      json::parse(api_->handle({"PUT", "/api/runs/1/tags/reviewed", {{"value", "yes"}}}).body);
  EXPECT_EQ(tagged["tags"]["reviewed"], "yes");
  EXPECT_EQ(tagged["tags"]["model"], "bert");
  EXPECT_EQ(get_json("/api/runs", {{"tag", "reviewed=yes"}})["runs"].size(), 1u);
  ApiResponse flag = api_->handle({"PUT", "/api/runs/2/tags/ci", {}});  // a tag without value
  EXPECT_EQ(flag.status, 200) << flag.body;
  EXPECT_EQ(json::parse(flag.body)["tags"]["ci"], "");
  json untagged = json::parse(api_->handle({"DELETE", "/api/runs/1/tags/model", {}}).body);
  EXPECT_FALSE(untagged["tags"].contains("model"));
  EXPECT_EQ(get_json("/api/runs/1")["tags"], json({{"reviewed", "yes"}}));
  expect_error(api_->handle({"DELETE", "/api/runs/1/tags/model", {}}), 404, "no tag 'model'");
  expect_error(api_->handle({"PUT", "/api/runs/1/tags/a=b", {}}), 400, "holds '='");
  expect_error(api_->handle({"PUT", "/api/runs/1/tags/bad\nkey", {}}), 400, "control character");
  expect_error(api_->handle({"PUT", "/api/runs/9/tags/x", {}}), 404, "9");
  expect_error(api_->handle({"PUT", "/api/runs/file:0/tags/x", {}}), 400, "only stored runs");
  expect_error(api_->handle({"GET", "/api/runs/1/tags/x", {}}), 405, "not allowed");
}

TEST_F(ApiTest, InferencesAreTheBreakdownsSingleInferences) {
  json inferences = get_json("/api/runs/1/inferences", {{"span", "infer"}});
  json breakdown = get_json("/api/runs/1/report/breakdown", {{"span", "infer"}});
  ASSERT_EQ(inferences["inference_count"], breakdown["inference_count"]);
  ASSERT_EQ(inferences["inferences"].size(), 20u);
  ASSERT_EQ(inferences["phases"].size(), breakdown["phases"].size());
  for (size_t phase = 0; phase < breakdown["phases"].size(); ++phase) {
    EXPECT_EQ(inferences["phases"][phase], breakdown["phases"][phase]["phase"]);
    double sum = 0;
    for (const auto& inference : inferences["inferences"])
      sum += inference["phases"][phase].get<double>();
    EXPECT_DOUBLE_EQ(sum / 20, breakdown["phases"][phase]["mean_ns"].get<double>()) << phase;
  }
  for (const auto& inference : inferences["inferences"]) {
    int64_t sum = 0;
    for (const auto& value : inference["phases"]) sum += value.get<int64_t>();
    EXPECT_EQ(sum, inference["dur"].get<int64_t>());
  }
  EXPECT_EQ(
      get_json("/api/runs/1/inferences", {{"span", "infer"}, {"limit", "3"}})["inferences"].size(),
      3u);
  expect_error(get("/api/runs/1/inferences"), 400, "'span'");
  expect_error(get("/api/runs/1/inferences", {{"span", "infer"}, {"by", "color"}}), 400, "'by'");
  expect_error(get("/api/runs/1/inferences", {{"span", "nothing"}}), 404,
               "no span named 'nothing'");
}

TEST_F(ApiTest, CriticalPathSlicesAreTheCriticalPathsSteps) {
  json path = get_json("/api/runs/1/critical_path_slices");
  json report_view = get_json("/api/runs/1/report/critical_path");
  EXPECT_EQ(path["length_ns"], report_view["length_ns"]);
  EXPECT_EQ(path["idle_ns"], report_view["idle_ns"]);
  ASSERT_EQ(path["step_count"], 60);  // 20 inferences and their 2 children each
  int64_t on_path = 0;
  for (const auto& step : path["steps"]) on_path += step[5].get<int64_t>();
  EXPECT_EQ(on_path + path["idle_ns"].get<int64_t>(), path["length_ns"].get<int64_t>());
  json slice = get_json("/api/runs/1/slices/" + std::to_string(path["steps"][0][0].get<int>()));
  EXPECT_EQ(slice["name"], "infer");
  EXPECT_EQ(slice["ts"], path["steps"][0][1]);
  EXPECT_EQ(get_json("/api/runs/1/critical_path_slices", {{"limit", "5"}})["steps"].size(), 5u);
  expect_error(get("/api/runs/1/critical_path_slices", {{"limit", "0"}}), 400, "'limit'");
}

TEST_F(ApiTest, MarksAreTheFlowsAndInstantsOfAWindow) {
  const std::string path = (store_.folder() / "flows.json").string();
  std::ofstream(path) << R"({"traceEvents":[
    {"ph":"X","pid":1,"tid":1,"ts":0,"dur":5,"name":"send","bind_id":"0xa","flow_out":true},
    {"ph":"X","pid":1,"tid":2,"ts":20,"dur":5,"name":"receive","bind_id":"0xa","flow_in":true},
    {"ph":"X","pid":1,"tid":2,"ts":100,"dur":5,"name":"late","bind_id":"0xb","flow_out":true},
    {"ph":"X","pid":1,"tid":1,"ts":200,"dur":5,"name":"later","bind_id":"0xb","flow_in":true},
    {"ph":"i","pid":1,"tid":1,"ts":3,"name":"<b>checkpoint</b>","s":"t"},
    {"ph":"i","pid":1,"tid":1,"ts":150,"name":"gc","s":"g"}]})";
  ApiOptions options;
  options.store_path = store_.path();
  options.files = {path};
  Api api(options);
  auto marks = [&](int64_t start, int64_t end) {
    ApiResponse response =
        api.handle({"GET",
                    "/api/runs/file:0/marks",
                    {{"start", std::to_string(start)}, {"end", std::to_string(end)}}});
    EXPECT_EQ(response.status, 200) << response.body;
    return json::parse(response.body);
  };
  json all = marks(0, 300'000);
  ASSERT_EQ(all["flows"].size(), 2u);
  ASSERT_EQ(all["instants"].size(), 2u);
  const json& first = all["flows"][0];
  EXPECT_EQ(first[1], 5'000);     // leaves the end of "send" (ns)
  EXPECT_EQ(first[5], 20'000);    // arrives at the start of "receive"
  EXPECT_NE(first[2], first[6]);  // across threads
  EXPECT_EQ(all["names"][all["instants"][0][1].get<size_t>()], "<b>checkpoint</b>");
  EXPECT_EQ(all["instants"][0][0], 3'000);
  EXPECT_EQ(all["instants"][0][3], "thread");
  EXPECT_EQ(all["instants"][1][3], "global");
  json early = marks(0, 50'000);  // the second flow and the gc instant lie later
  EXPECT_EQ(early["flows"].size(), 1u);
  EXPECT_EQ(early["instants"].size(), 1u);
  json crossing = marks(120'000, 130'000);  // inside the second arrow, past both its ends
  EXPECT_EQ(crossing["flows"].size(), 1u);
  EXPECT_EQ(crossing["instants"].size(), 0u);
  ApiResponse limited = api.handle(
      {"GET", "/api/runs/file:0/marks", {{"start", "0"}, {"end", "300000"}, {"limit", "1"}}});
  json limited_body = json::parse(limited.body);
  EXPECT_EQ(limited_body["flows"].size(), 1u);
  EXPECT_EQ(limited_body["flow_total"], 2);
  expect_error(api.handle({"GET", "/api/runs/file:0/marks", {{"start", "9"}, {"end", "1"}}}), 400,
               "before start");
  expect_error(api.handle({"GET", "/api/runs/file:0/marks", {{"end", "1"}}}), 400, "'start'");
}

TEST_F(ApiTest, ExplainRunsGiveEachModelsGraphsAndBreaks) {
  EXPECT_TRUE(get_json("/api/explain")["runs"].empty());  // no run is tagged kind=explain
  auto opened = store::RunStore::open(store_.path());
  ASSERT_TRUE(opened.ok());
  for (int breaks : {1, 2}) {
    trace::Trace trace;
    trace::TrackId track = trace.thread_track(1, 1);
    trace::RowIndex row =
        trace.slices.add(0, 1000, trace.intern("explain tiny"), trace.intern("explain"), track);
    json result = {{"model", "tiny"},       {"family", "mlp"},        {"status", "ok"},
                   {"graphs", breaks + 1},  {"graph_breaks", breaks}, {"ops", 7},
                   {"newer_field", "kept"}, {"breaks", json::array()}};
    for (int i = 0; i < breaks; ++i)
      result["breaks"].push_back({{"reason", "Tensor.item() <call>"},
                                  {"file", "models.py"},
                                  {"line", 10 + i},
                                  {"function", "forward"},
                                  {"count", 1}});
    trace.slice_args.add(row, trace.intern("explain.result"),
                         trace::ArgValue::of_string(trace.intern(result.dump())));
    trace.slice_args.add(row, trace.intern("other"), trace::ArgValue::of_int(1));
    trace.finalize();
    store::RunMetadata metadata;
    metadata.name = "explain " + std::to_string(breaks);
    metadata.tags = {{"kind", "explain"}, {"commit", "c" + std::to_string(breaks)}};
    ASSERT_TRUE(opened.value()->add(trace, metadata).ok());
  }
  json runs = get_json("/api/explain")["runs"];
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0]["name"], "explain 1");  // oldest first
  EXPECT_EQ(runs[1]["tags"]["commit"], "c2");
  ASSERT_EQ(runs[1]["models"].size(), 1u);
  const json& model = runs[1]["models"][0];
  EXPECT_EQ(model["model"], "tiny");
  EXPECT_EQ(model["graphs"], 3);
  EXPECT_EQ(model["graph_breaks"], 2);
  EXPECT_EQ(model["span"], "explain tiny");
  // The result goes through as stored: a field this server does not know is kept (the
  // fields are defined by the Python package, not here).
  EXPECT_EQ(model["newer_field"], "kept");
  ASSERT_EQ(model["breaks"].size(), 2u);
  EXPECT_EQ(model["breaks"][1]["line"], 11);
  EXPECT_EQ(model["breaks"][1]["reason"], "Tensor.item() <call>");
  EXPECT_EQ(get_json("/api/explain", {{"limit", "1"}})["runs"].size(), 1u);
  expect_error(get("/api/explain", {{"limit", "x"}}), 400, "'limit'");
}

// A run of several traces (server_test_fixtures.hpp's many_traces_trace), stored and read
// back: one row per trace, each opening its root, sorted, paged and filtered; a served
// request's trace keeps its caller's id and remote parent; bad parameters are named.
TEST_F(ApiTest, TracesListEveryTraceOfARunWithItsRoot) {
  auto opened = store::RunStore::open(store_.path());
  ASSERT_TRUE(opened.ok());
  store::RunMetadata metadata;
  metadata.name = "traces";
  ASSERT_TRUE(opened.value()->add(testing::many_traces_trace(), metadata).ok());

  json answer = get_json("/api/runs/traces/traces");
  EXPECT_EQ(answer["total"], 6);
  EXPECT_EQ(answer["matched"], 6);
  EXPECT_EQ(answer["sort"], "duration");
  EXPECT_EQ(answer["order"], "desc");
  ASSERT_EQ(answer["traces"].size(), 6u);
  // Slowest first: the caller's trace, two requests over two processes.
  const json& caller = answer["traces"][0];
  EXPECT_EQ(caller["trace_id"], testing::kManyTracesCaller.to_hex());
  EXPECT_EQ(caller["root_name"], "GET /predict");
  EXPECT_EQ(caller["root_ts"], 5000);
  EXPECT_EQ(caller["start_ns"], 5000);
  EXPECT_EQ(caller["end_ns"], 62000);
  EXPECT_EQ(caller["duration_ns"], 57000);
  EXPECT_EQ(caller["span_count"], 4);
  EXPECT_EQ(caller["error_count"], 1);
  EXPECT_EQ(caller["root_count"], 2);
  EXPECT_EQ(caller["process_count"], 2);
  EXPECT_EQ(caller["remote_parent_span_id"], "1122334455667788");
  EXPECT_EQ(caller["pid"], 100);
  EXPECT_EQ(caller["process"], "python serve.py");
  // Its root row is the slice the UI opens: its details name the same trace, and the
  // trace:ID search finds exactly its spans.
  json root = get_json("/api/runs/traces/slices/" + std::to_string(caller["root_row"].get<int>()));
  EXPECT_EQ(root["name"], "GET /predict");
  EXPECT_EQ(root["trace_id"], caller["trace_id"]);
  EXPECT_EQ(root["parent_span_id"], "1122334455667788");
  EXPECT_EQ(get_json("/api/runs/traces/search",
                     {{"q", "trace:" + caller["trace_id"].get<std::string>()}})["total"],
            4);
  // A root span of its own: its trace is the one its details give.
  const json& step = answer["traces"][1];
  EXPECT_EQ(step["root_name"], "step");
  EXPECT_EQ(step["duration_ns"], 10000);
  EXPECT_EQ(step["error_count"], 1);
  EXPECT_TRUE(step["remote_parent_span_id"].is_null());
  EXPECT_EQ(get_json("/api/runs/traces/slices/" +
                     std::to_string(step["root_row"].get<int>()))["trace_id"],
            step["trace_id"]);

  // Sorting, paging, the filter.
  auto roots = [&](std::map<std::string, std::string> params) {
    std::vector<std::string> names;
    const json page = get_json("/api/runs/traces/traces", std::move(params));
    for (const json& row : page["traces"])
      names.push_back(row["root_name"].get<std::string>() + "@" +
                      std::to_string(row["root_ts"].get<int64_t>()));
    return names;
  };
  EXPECT_EQ(roots({{"sort", "start"}}),
            (std::vector<std::string>{"step@1000", "GET /predict@5000", "job@8000", "step@20000",
                                      "batch@70000", "call@70010"}));
  EXPECT_EQ(roots({{"sort", "start"}, {"order", "desc"}}).front(), "call@70010");
  EXPECT_EQ(roots({{"sort", "spans"}, {"limit", "2"}}),
            (std::vector<std::string>{"GET /predict@5000", "step@1000"}));
  EXPECT_EQ(roots({{"limit", "2"}, {"offset", "2"}}),
            (std::vector<std::string>{"step@20000", "job@8000"}));
  EXPECT_TRUE(roots({{"offset", "6"}}).empty());
  json filtered = get_json("/api/runs/traces/traces", {{"q", "STEP"}, {"limit", "1"}});
  EXPECT_EQ(filtered["matched"], 2);
  EXPECT_EQ(filtered["total"], 6);
  ASSERT_EQ(filtered["traces"].size(), 1u);
  EXPECT_EQ(filtered["traces"][0]["root_ts"], 1000);

  // The inference runs: every inference a root span of its own trace.
  EXPECT_EQ(get_json("/api/runs/baseline/traces")["total"], 20);

  expect_error(get("/api/runs/traces/traces", {{"sort", "color"}}), 400, "'sort': 'color'");
  expect_error(get("/api/runs/traces/traces", {{"order", "up"}}), 400, "'order': 'up'");
  expect_error(get("/api/runs/traces/traces", {{"limit", "0"}}), 400, "'limit'");
  expect_error(get("/api/runs/traces/traces", {{"limit", "many"}}), 400, "'limit'");
  expect_error(get("/api/runs/traces/traces", {{"offset", "-1"}}), 400, "'offset'");
  expect_error(get("/api/runs/traces/traces", {{"q", std::string(1001, 'x')}}), 400, "'q'");
  expect_error(get("/api/runs/nosuchrun/traces"), 404, "nosuchrun");
}

TEST(ApiWithoutStore, AMissingStoreHasNoRunsAndSaysWhy) {
  ApiOptions options;
  options.store_path = "/nonexistent/opsight/runs.db";
  Api api(options);
  ApiResponse response = api.handle({"GET", "/api/runs", {}});
  EXPECT_EQ(response.status, 200);
  json body = json::parse(response.body);
  EXPECT_TRUE(body["runs"].empty());
  EXPECT_NE(body["store_problem"].get<std::string>().find("no run store at /nonexistent"),
            std::string::npos);
  EXPECT_EQ(api.handle({"GET", "/api/runs/latest", {}}).status, 404);
  EXPECT_FALSE(std::filesystem::exists("/nonexistent/opsight/runs.db"));
}

}  // namespace
}  // namespace opsight::server
