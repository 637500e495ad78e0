// Golden tests: small hand-built traces in, the exact report text out.
#include "report/report.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

namespace opsight::report {
namespace {

// HiQ's quick start: main -> func1 -> func2, 4.005 s in all, 16.3 µs of tracer overhead.
trace::Trace hiq_trace() {
  trace::Trace trace;
  trace::TrackId track = trace.thread_track(100, 100);
  trace::StringId category = trace.intern("python");
  trace.slices.add(0, 4'005'000'000, trace.intern("main"), category, track);
  trace.slices.add(100'000, 4'004'800'000, trace.intern("func1"), category, track);
  trace.slices.add(1'502'000'000, 2'502'700'000, trace.intern("func2"), category, track);
  trace.run.overhead_ns = 16'300;
  trace.run.source_format = "opsight";
  trace.finalize();
  return trace;
}

ReportOptions text_options(std::string source = "main.opsight") {
  ReportOptions options;
  options.source_name = std::move(source);
  return options;
}

// step x3 (10, 20, 60 ns) under two roots, plus a name that needs CSV quoting.
trace::Trace small_trace() {
  trace::Trace trace;
  trace::TrackId track = trace.thread_track(1, 1);
  trace::StringId cpu = trace.intern("cpu");
  trace::StringId step = trace.intern("step");
  trace::StringId request = trace.intern("request");
  trace.slices.add(0, 100, request, cpu, track);
  trace.slices.add(10, 10, step, cpu, track);
  trace.slices.add(30, 20, step, cpu, track);
  trace.slices.add(200, 100, request, cpu, track);
  trace.slices.add(210, 60, step, cpu, track);
  trace.slices.add(400, 5, trace.intern("say \"hi\", world"), trace.intern("odd,category"), track);
  trace.run.source_format = "opsight";
  trace.run.overhead_ns = 40;
  trace.run.traced_ns = 1000;
  trace.finalize();
  return trace;
}

TEST(FormatDuration, PicksUnitPerValue) {
  EXPECT_EQ(format_duration(0), "0 ns");
  EXPECT_EQ(format_duration(812), "812 ns");
  EXPECT_EQ(format_duration(12.5), "12.5 ns");
  EXPECT_EQ(format_duration(999.6), "1.00 µs");
  EXPECT_EQ(format_duration(12'400), "12.4 µs");
  EXPECT_EQ(format_duration(123'400), "123 µs");
  EXPECT_EQ(format_duration(3'210'000), "3.21 ms");
  EXPECT_EQ(format_duration(999'700'000), "1.000 s");
  EXPECT_EQ(format_duration(4'005'000'000), "4.005 s");
}

TEST(FormatPercent, ShareAndSmallPercent) {
  EXPECT_EQ(format_share(0.625), "62.5%");
  EXPECT_EQ(format_share(0.0001), "<0.1%");
  EXPECT_EQ(format_share(0.0), "0.0%");
  EXPECT_EQ(format_small_percent(0.0), "0%");
  EXPECT_EQ(format_small_percent(0.1234), "12.34%");
  EXPECT_EQ(format_small_percent(0.005), "0.50%");
  EXPECT_EQ(format_small_percent(4.07e-6), "0.00041%");
}

TEST(OverheadLine, WithoutDrops) {
  analyze::OverheadSummary overhead;
  overhead.overhead_known = true;
  overhead.overhead_ns = 12'300;
  overhead.traced_ns = 4'005'000'000;
  overhead.share = 12'300.0 / 4'005'000'000.0;
  EXPECT_EQ(format_overhead_line(overhead),
            "tracer overhead: 12.3 µs (0.00031% of 4.005 s traced), 0 events dropped");
}

TEST(OverheadLine, WithDrops) {
  analyze::OverheadSummary overhead;
  overhead.overhead_known = true;
  overhead.overhead_ns = 2'500'000;
  overhead.traced_ns = 100'000'000;
  overhead.share = 0.025;
  overhead.events_dropped = 1;
  EXPECT_EQ(format_overhead_line(overhead),
            "tracer overhead: 2.50 ms (2.50% of 100 ms traced), 1 event dropped");
  overhead.events_dropped = 1234;
  EXPECT_EQ(format_overhead_line(overhead),
            "tracer overhead: 2.50 ms (2.50% of 100 ms traced), 1234 events dropped");
}

TEST(OverheadLine, SaysWhatAFlightRecorderKeptAndDropped) {
  trace::RunInfo run;
  run.extra = {{"ring_max_age_ns", "60000000000"},
               {"ring_max_bytes", "268435456"},
               {"ring_held_ns", "60050000000"},
               {"ring_dropped_events", "1234"},
               {"dump_trigger", "SIGUSR2"}};
  analyze::OverheadSummary overhead;
  overhead.ring = analyze::parse_ring(run);
  EXPECT_EQ(format_overhead_line(overhead),
            "tracer overhead: not recorded in this trace, 0 events dropped; flight recorder "
            "(ring 60.000 s, 256 MiB): kept the last 60.050 s, 1234 older events dropped, "
            "dumped on SIGUSR2");
  EXPECT_FALSE(analyze::parse_ring(trace::RunInfo{}).present());
}

TEST(OverheadLine, SaysWhatSamplingKeptFromTheRunInfo) {
  trace::RunInfo run;
  run.extra = {{"sampling", "1 in 100 of 'handle_request' spans"},
               {"sampling_units", "3700"},
               {"sampling_units_recorded", "37"}};
  analyze::OverheadSummary overhead;
  overhead.sampling = analyze::parse_sampling(run);
  EXPECT_EQ(format_overhead_line(overhead),
            "tracer overhead: not recorded in this trace, 0 events dropped; sampled 1 in 100 "
            "of 'handle_request' spans: 37 of 3700 units recorded (counts are of these, not "
            "totals)");
  run.extra = {{"sampling", "operators in 1 in 100 of root spans"},
               {"sampling_units", "300"},
               {"sampling_units_recorded", "3"}};
  overhead.sampling = analyze::parse_sampling(run);
  EXPECT_EQ(format_overhead_line(overhead),
            "tracer overhead: not recorded in this trace, 0 events dropped; sampled operators in "
            "1 in 100 of root spans: 3 of 300 units recorded (operator counts are of these; "
            "other spans are totals)");
  run.extra = {{"sampling_units", "x"}};  // no policy: not sampled, whatever else is there
  EXPECT_FALSE(analyze::parse_sampling(run).sampled());
}

TEST(OverheadLine, UnknownAndNoTracedTime) {
  analyze::OverheadSummary overhead;
  EXPECT_EQ(format_overhead_line(overhead),
            "tracer overhead: not recorded in this trace, 0 events dropped");
  overhead.overhead_known = true;
  EXPECT_EQ(format_overhead_line(overhead),
            "tracer overhead: 0 ns (no traced time), 0 events dropped");
}

TEST(OverheadLine, DropsAreTheRunTotalNotPlusTheTracksBreakdown) {
  trace::Trace trace = hiq_trace();
  trace.run.events_dropped = 5;
  trace.tracks[0].events_dropped = 3;
  std::string text = render_summary(trace, text_options());
  EXPECT_NE(text.find("tracer overhead: 16.3 µs (0.00041% of 4.005 s traced), 5 events dropped\n"),
            std::string::npos)
      << text;
}

TEST(TreeReport, HiqQuickStartText) {
  EXPECT_EQ(render_tree(hiq_trace(), text_options()),
            "opsight tree: main.opsight, 3 slices, 4.005 s\n"
            "span         duration  of parent    start      end\n"
            "main          4.005 s                0 ns  4.005 s\n"
            "└─ func1      4.005 s     100.0%   100 µs  4.005 s\n"
            "   └─ func2   2.503 s      62.5%  1.502 s  4.005 s\n"
            "tracer overhead: 16.3 µs (0.00041% of 4.005 s traced), 0 events dropped\n");
}

TEST(TreeReport, SiblingsAndVerticalBars) {
  trace::Trace trace;
  trace::TrackId track = trace.thread_track(1, 1);
  trace.slices.add(0, 1000, trace.intern("root"), 0, track);
  trace.slices.add(0, 400, trace.intern("a"), 0, track);
  trace.slices.add(100, 200, trace.intern("x"), 0, track);
  trace.slices.add(500, 500, trace.intern("b"), 0, track);
  trace.finalize();
  EXPECT_EQ(render_tree(trace, text_options("t.json")),
            "opsight tree: t.json, 4 slices, 1.00 µs\n"
            "span     duration  of parent   start      end\n"
            "root      1.00 µs               0 ns  1.00 µs\n"
            "├─ a       400 ns      40.0%    0 ns   400 ns\n"
            "│  └─ x    200 ns      50.0%  100 ns   300 ns\n"
            "└─ b       500 ns      50.0%  500 ns  1.00 µs\n"
            "tracer overhead: not recorded in this trace, 0 events dropped\n");
}

TEST(TreeReport, DepthFoldsDeeperSpansIntoACount) {
  trace::Trace trace;
  trace::TrackId track = trace.thread_track(1, 1);
  trace.slices.add(0, 1000, trace.intern("request"), 0, track);
  trace.slices.add(0, 400, trace.intern("infer"), 0, track);
  trace.slices.add(100, 200, trace.intern("aten::linear"), 0, track);
  trace.slices.add(150, 100, trace.intern("aten::addmm"), 0, track);
  trace.slices.add(500, 500, trace.intern("postprocess"), 0, track);
  trace.finalize();
  ReportOptions options = text_options("t.json");
  options.max_depth = 1;
  EXPECT_EQ(render_tree(trace, options),
            "opsight tree: t.json, 5 slices, 1.00 µs\n"
            "span                  duration  of parent   start      end\n"
            "request                1.00 µs               0 ns  1.00 µs\n"
            "├─ infer (+2 nested)    400 ns      40.0%    0 ns   400 ns\n"
            "└─ postprocess          500 ns      50.0%  500 ns  1.00 µs\n"
            "tracer overhead: not recorded in this trace, 0 events dropped\n");
  options.format = OutputFormat::kJson;
  nlohmann::json document = nlohmann::json::parse(render_tree(trace, options));
  const nlohmann::json& infer = document["roots"][0]["children"][0];
  EXPECT_EQ(infer["name"], "infer");
  EXPECT_TRUE(infer["children"].empty());
  EXPECT_EQ(infer["descendants_omitted"], 2);
  EXPECT_FALSE(document["roots"][0]["children"][1].contains("descendants_omitted"));
  options.format = OutputFormat::kCsv;
  EXPECT_EQ(render_tree(trace, options).find("aten::"), std::string::npos);
  options.max_depth = 0;  // all levels
  EXPECT_NE(render_tree(trace, options).find("request/infer/aten::linear/aten::addmm"),
            std::string::npos);
}

TEST(TreeReport, ManyRootsAreTruncated) {
  trace::Trace trace;
  trace::TrackId track = trace.thread_track(1, 1);
  trace::StringId name = trace.intern("request");
  for (int64_t index = 0; index < 5; ++index) trace.slices.add(index * 10, 5, name, 0, track);
  trace.finalize();
  ReportOptions options = text_options("r.opsight");
  options.max_roots = 2;
  EXPECT_EQ(render_tree(trace, options),
            "opsight tree: r.opsight, 5 slices, 45 ns\n"
            "span     duration  of parent  start    end\n"
            "request      5 ns              0 ns   5 ns\n"
            "request      5 ns             10 ns  15 ns\n"
            "… 3 more roots\n"
            "tracer overhead: not recorded in this trace, 0 events dropped\n");
  options.max_roots = 0;
  std::string all = render_tree(trace, options);
  EXPECT_EQ(all.find("more root"), std::string::npos);

  options.max_roots = 2;
  options.format = OutputFormat::kJson;
  nlohmann::json document = nlohmann::json::parse(render_tree(trace, options));
  EXPECT_EQ(document["roots"].size(), 2u);
  EXPECT_EQ(document["roots_omitted"], 3);
}

TEST(TreeReport, JsonShape) {
  ReportOptions options = text_options();
  options.format = OutputFormat::kJson;
  nlohmann::json document = nlohmann::json::parse(render_tree(hiq_trace(), options));
  ASSERT_EQ(document["roots"].size(), 1u);
  const nlohmann::json& main_node = document["roots"][0];
  EXPECT_EQ(main_node["name"], "main");
  EXPECT_EQ(main_node["start_ns"], 0);
  EXPECT_EQ(main_node["end_ns"], 4'005'000'000);
  EXPECT_EQ(main_node["dur_ns"], 4'005'000'000);
  EXPECT_EQ(main_node["self_ns"], 200'000);
  EXPECT_TRUE(main_node["share_of_parent"].is_null());
  const nlohmann::json& func2 = main_node["children"][0]["children"][0];
  EXPECT_EQ(func2["name"], "func2");
  EXPECT_EQ(func2["start_ns"], 1'502'000'000);
  EXPECT_DOUBLE_EQ(func2["share_of_parent"].get<double>(), 2'502'700'000.0 / 4'004'800'000.0);
  EXPECT_TRUE(func2["children"].empty());
  EXPECT_EQ(document["overhead_ns"], 16'300);
  EXPECT_EQ(document["overhead_known"], true);
  EXPECT_EQ(document["events_dropped"], 0);
  EXPECT_DOUBLE_EQ(document["overhead_share"].get<double>(), 16'300.0 / 4'005'000'000.0);
  EXPECT_EQ(document["roots_omitted"], 0);
}

TEST(TreeReport, Csv) {
  ReportOptions options = text_options();
  options.format = OutputFormat::kCsv;
  EXPECT_EQ(render_tree(hiq_trace(), options),
            "depth,path,start_ns,end_ns,dur_ns,self_ns,share_of_parent\r\n"
            "0,main,0,4005000000,4005000000,200000,\r\n"
            "1,main/func1,100000,4004900000,4004800000,1502100000,0.9999500624219725\r\n"
            "2,main/func1/func2,1502000000,4004700000,2502700000,2502700000,"
            "0.6249250898921295\r\n");
}

TEST(SummaryReport, Text) {
  EXPECT_EQ(render_summary(small_trace(), text_options("small.opsight")),
            "opsight summary: small.opsight, 6 slices, 405 ns\n"
            "name             count   total     min    mean  median     p90     p95      p97"
            "      p99    p99.9     max   stddev\n"
            "request              2  200 ns  100 ns  100 ns  100 ns  100 ns  100 ns   100 ns"
            "   100 ns   100 ns  100 ns     0 ns\n"
            "step                 3   90 ns   10 ns   30 ns   20 ns   52 ns   56 ns  57.6 ns"
            "  59.2 ns  59.9 ns   60 ns  21.6 ns\n"
            "say \"hi\", world      1    5 ns    5 ns    5 ns    5 ns    5 ns    5 ns     5 ns"
            "     5 ns     5 ns    5 ns     0 ns\n"
            "tracer overhead: 40 ns (4.00% of 1.00 µs traced), 0 events dropped\n");
}

TEST(SummaryReport, JsonIsAListWithTheDocumentedFields) {
  ReportOptions options = text_options();
  options.format = OutputFormat::kJson;
  std::string json = render_summary(small_trace(), options);
  nlohmann::json list = nlohmann::json::parse(json);
  ASSERT_TRUE(list.is_array());
  ASSERT_EQ(list.size(), 3u);
  EXPECT_EQ(json.substr(0, json.find("},")),
            "[\n"
            "  {\n"
            "    \"name\": \"request\",\n"
            "    \"category\": \"cpu\",\n"
            "    \"count\": 2,\n"
            "    \"total_ns\": 200,\n"
            "    \"self_ns\": 110,\n"
            "    \"min_ns\": 100,\n"
            "    \"mean_ns\": 100,\n"
            "    \"p50_ns\": 100,\n"
            "    \"p90_ns\": 100,\n"
            "    \"p95_ns\": 100,\n"
            "    \"p97_ns\": 100,\n"
            "    \"p99_ns\": 100,\n"
            "    \"p999_ns\": 100,\n"
            "    \"max_ns\": 100,\n"
            "    \"stddev_ns\": 0\n"
            "  ");
  const nlohmann::json& step = list[1];
  EXPECT_EQ(step["name"], "step");
  EXPECT_EQ(step["count"], 3);
  EXPECT_EQ(step["total_ns"], 90);
  EXPECT_EQ(step["self_ns"], 90);
  EXPECT_EQ(step["mean_ns"], 30);
  EXPECT_TRUE(step["mean_ns"].is_number_integer());
  EXPECT_EQ(step["p50_ns"], 20);
  EXPECT_DOUBLE_EQ(step["p97_ns"].get<double>(), 57.6);
  EXPECT_DOUBLE_EQ(step["p99_ns"].get<double>(), 59.2);
  EXPECT_DOUBLE_EQ(step["p999_ns"].get<double>(), 59.9);    // 59.92 rounded to one decimal
  EXPECT_DOUBLE_EQ(step["stddev_ns"].get<double>(), 21.6);  // sqrt(1400 / 3) = 21.60
  EXPECT_EQ(list[2]["name"], "say \"hi\", world");
  EXPECT_EQ(list[2]["category"], "odd,category");
}

TEST(SummaryReport, CsvQuotesCommasAndQuotes) {
  ReportOptions options = text_options();
  options.format = OutputFormat::kCsv;
  EXPECT_EQ(render_summary(small_trace(), options),
            "name,category,count,total_ns,self_ns,min_ns,mean_ns,p50_ns,p90_ns,p95_ns,p97_ns,"
            "p99_ns,p999_ns,max_ns,stddev_ns\r\n"
            "request,cpu,2,200,110,100,100,100,100,100,100,100,100,100,0\r\n"
            "step,cpu,3,90,90,10,30,20,52,56,57.6,59.2,59.9,60,21.6\r\n"
            "\"say \"\"hi\"\", world\",\"odd,category\",1,5,5,5,5,5,5,5,5,5,5,5,0\r\n");
  EXPECT_EQ(csv_field("plain"), "plain");
  EXPECT_EQ(csv_field("line\nbreak"), "\"line\nbreak\"");
}

TEST(TableReport, SortKeysAndLimit) {
  EXPECT_EQ(validate_sort_key("total"), std::nullopt);
  for (const char* key : {"self", "count", "mean", "p99", "name"})
    EXPECT_EQ(validate_sort_key(key), std::nullopt) << key;
  EXPECT_EQ(validate_sort_key("median"),
            "unknown sort key 'median'; valid keys: total, self, count, mean, p99, name");

  ReportOptions options = text_options("small.opsight");
  options.sort = "count";
  EXPECT_EQ(render_table(small_trace(), options),
            "opsight table: small.opsight, 6 slices, 405 ns\n"
            "name             count   total    self    mean      p99  of traced\n"
            "step                 3   90 ns   90 ns   30 ns  59.2 ns       9.0%\n"
            "request              2  200 ns  110 ns  100 ns   100 ns      20.0%\n"
            "say \"hi\", world      1    5 ns    5 ns    5 ns     5 ns       0.5%\n"
            "tracer overhead: 40 ns (4.00% of 1.00 µs traced), 0 events dropped\n");

  options.sort = "name";
  options.limit = 2;
  EXPECT_EQ(render_table(small_trace(), options),
            "opsight table: small.opsight, 6 slices, 405 ns\n"
            "name             count   total    self    mean     p99  of traced\n"
            "request              2  200 ns  110 ns  100 ns  100 ns      20.0%\n"
            "say \"hi\", world      1    5 ns    5 ns    5 ns    5 ns       0.5%\n"
            "… 1 more name\n"
            "tracer overhead: 40 ns (4.00% of 1.00 µs traced), 0 events dropped\n");

  options.sort = "mean";
  options.limit = 0;
  options.format = OutputFormat::kCsv;
  EXPECT_EQ(render_table(small_trace(), options),
            "name,category,count,total_ns,self_ns,mean_ns,p99_ns,share_of_traced\r\n"
            "request,cpu,2,200,110,100,100,0.2\r\n"
            "step,cpu,3,90,90,30,59.2,0.09\r\n"
            "\"say \"\"hi\"\", world\",\"odd,category\",1,5,5,5,5,0.005\r\n");

  // An invalid key falls back to "total" (callers validate first).
  options.sort = "bogus";
  options.format = OutputFormat::kJson;
  nlohmann::json document = nlohmann::json::parse(render_table(small_trace(), options));
  EXPECT_EQ(document["sort"], "total");
  ASSERT_EQ(document["rows"].size(), 3u);
  EXPECT_EQ(document["rows"][0]["name"], "request");
  EXPECT_EQ(document["rows"][1]["name"], "step");
  EXPECT_EQ(document["rows_omitted"], 0);
  EXPECT_EQ(document["overhead_ns"], 40);
  EXPECT_EQ(document["traced_ns"], 1000);
  EXPECT_DOUBLE_EQ(document["overhead_share"].get<double>(), 0.04);
}

TEST(EmptyTrace, EveryReportSaysNoSpans) {
  trace::Trace trace;
  trace.finalize();
  ReportOptions options = text_options("empty.opsight");
  const std::string expected_tail =
      "no spans in this trace\n"
      "tracer overhead: not recorded in this trace, 0 events dropped\n";
  EXPECT_EQ(render_summary(trace, options),
            "opsight summary: empty.opsight, 0 slices, 0 ns\n" + expected_tail);
  EXPECT_EQ(render_tree(trace, options),
            "opsight tree: empty.opsight, 0 slices, 0 ns\n" + expected_tail);
  EXPECT_EQ(render_table(trace, options),
            "opsight table: empty.opsight, 0 slices, 0 ns\n" + expected_tail);

  options.format = OutputFormat::kJson;
  EXPECT_EQ(render_summary(trace, options), "[]\n");
  nlohmann::json tree = nlohmann::json::parse(render_tree(trace, options));
  EXPECT_TRUE(tree["roots"].empty());
  nlohmann::json table = nlohmann::json::parse(render_table(trace, options));
  EXPECT_TRUE(table["rows"].empty());

  options.format = OutputFormat::kCsv;
  EXPECT_EQ(render_summary(trace, options),
            "name,category,count,total_ns,self_ns,min_ns,mean_ns,p50_ns,p90_ns,p95_ns,p97_ns,"
            "p99_ns,p999_ns,max_ns,stddev_ns\r\n");
}

TEST(TextReports, LongNamesAreCut) {
  trace::Trace trace;
  trace::TrackId track = trace.thread_track(1, 1);
  trace.slices.add(0, 10, trace.intern(std::string(80, 'x')), 0, track);
  trace.finalize();
  std::string text = render_table(trace, text_options());
  EXPECT_NE(text.find(std::string(59, 'x') + "…  "), std::string::npos) << text;
  EXPECT_EQ(text.find(std::string(60, 'x')), std::string::npos);
}

// ---- Async lanes and merged traces ----------------------------------------------------

// One process's requests: `count` requests of `request_ns` on a thread, each with a step,
// and a handler on an async lane.
void add_process(trace::Trace& trace, int64_t pid, int64_t start, int count, int64_t request_ns) {
  trace::TrackId thread = trace.thread_track(pid, pid);
  trace::TrackId lane = trace.async_track(pid, pid, 0x10, "Task-1 (handler)");
  for (int index = 0; index < count; ++index) {
    int64_t at = start + index * 1000;
    trace.slices.add(at, request_ns, trace.intern("request"), 0, thread);
    trace.slices.add(at + 1, request_ns / 2, trace.intern("step"), 0, thread);
    trace.slices.add(at + 2, 40, trace.intern("handle"), 0, lane);
  }
  trace.tracks[thread].overhead_ns = 7 * pid;
  trace.run.source_format = "opsight";
}

TEST(TreeReport, RootsOnAsyncLanesNameTheirLane) {
  trace::Trace trace;
  add_process(trace, 1, 0, 1, 100);
  trace.finalize();
  EXPECT_EQ(render_tree(trace, text_options("a.opsight")),
            "opsight tree: a.opsight, 3 slices, 100 ns\n"
            "span                       duration  of parent  start     end\n"
            "request                      100 ns              0 ns  100 ns\n"
            "└─ step                       50 ns      50.0%   1 ns   51 ns\n"
            "handle [Task-1 (handler)]     40 ns              2 ns   42 ns\n"
            "tracer overhead: 7 ns (7.00% of 100 ns traced), 0 events dropped\n");
  ReportOptions options = text_options();
  options.format = OutputFormat::kJson;
  nlohmann::json document = nlohmann::json::parse(render_tree(trace, options));
  ASSERT_EQ(document["roots"].size(), 2u);
  EXPECT_EQ(document["roots"][0]["track"], "thread 1");
  EXPECT_EQ(document["roots"][0]["async"], false);
  EXPECT_EQ(document["roots"][1]["track"], "Task-1 (handler)");
  EXPECT_EQ(document["roots"][1]["async"], true);
}

TEST(MergedReport, AReportOverTwoProcessesEqualsOneOverTheirUnion) {
  trace::Trace first, second, both;
  add_process(first, 1, 0, 3, 100);
  add_process(second, 2, 500, 4, 300);
  add_process(both, 1, 0, 3, 100);
  add_process(both, 2, 500, 4, 300);
  first.run.overhead_ns = 7;
  second.run.overhead_ns = 14;
  both.run.overhead_ns = 21;
  first.finalize();
  second.finalize();
  both.finalize();
  trace::append_trace(first, second);
  ReportOptions options = text_options("a.opsight + b.opsight");
  EXPECT_EQ(render_summary(first, options), render_summary(both, options));
  EXPECT_EQ(render_table(first, options), render_table(both, options));
  EXPECT_EQ(render_tree(first, options), render_tree(both, options));
  options.format = OutputFormat::kJson;
  EXPECT_EQ(render_summary(first, options), render_summary(both, options));
  EXPECT_EQ(render_tree(first, options), render_tree(both, options));
}

}  // namespace
}  // namespace opsight::report
