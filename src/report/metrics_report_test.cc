// Golden tests of metrics in reports: a small trace with span metrics, counters and metric
// costs built here, the exact text, JSON and CSV out.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "report/report.hpp"

namespace opsight::report {
namespace {

constexpr int64_t kMillisecond = 1'000'000;
constexpr int64_t kMebibyte = 1 << 20;

trace::ArgValue int_arg(int64_t value) { return trace::ArgValue::of_int(value); }
trace::ArgValue double_arg(double value) { return trace::ArgValue::of_double(value); }

// train (20 ms) with load_batch (memory, cpu, disk, network metrics) and step (cpu, GPU
// power, a user metric), then idle without metrics; two counter tracks; metric costs.
trace::Trace metrics_trace() {
  trace::Trace trace;
  trace::TrackId track = trace.thread_track(1, 1);
  trace::StringId category = trace.intern("python");
  trace.slices.add(0, 20 * kMillisecond, trace.intern("train"), category, track);
  trace::RowIndex load =
      trace.slices.add(1 * kMillisecond, 12'300'000, trace.intern("load_batch"), category, track);
  trace::RowIndex step =
      trace.slices.add(14 * kMillisecond, 5 * kMillisecond, trace.intern("step"), category, track);
  trace.slices.add(21 * kMillisecond, 1 * kMillisecond, trace.intern("idle"), category, track);
  trace.slice_args.add(load, trace.intern("metric.cpu_ns"), int_arg(10'100'000));
  trace.slice_args.add(load, trace.intern("metric.rss_start_bytes"), int_arg(1000 * kMebibyte));
  trace.slice_args.add(load, trace.intern("metric.rss_end_bytes"), int_arg(1012 * kMebibyte));
  trace.slice_args.add(load, trace.intern("metric.rss_delta_bytes"), int_arg(12 * kMebibyte));
  trace.slice_args.add(load, trace.intern("metric.rss_peak_bytes"), int_arg(1'288'490'189));
  trace.slice_args.add(load, trace.intern("metric.io_read_bytes"), int_arg(4 * kMebibyte));
  trace.slice_args.add(load, trace.intern("metric.net_sent_bytes"), int_arg(1024));
  trace.slice_args.add(step, trace.intern("metric.cpu_ns"), int_arg(4 * kMillisecond));
  trace.slice_args.add(step, trace.intern("metric.gpu_power_watts"), double_arg(250.5));
  trace.slice_args.add(step, trace.intern("metric.tokens"), int_arg(512));
  trace.slice_args.add(step, trace.intern("batch"), int_arg(3));
  uint32_t rss = trace.counter_track(1, "process.rss_bytes");
  trace.counters.add(0, rss, 1024.0 * kMebibyte);
  trace.counters.add(10 * kMillisecond, rss, 1536.0 * kMebibyte);
  trace.counters.add(20 * kMillisecond, rss, 1280.0 * kMebibyte);
  uint32_t utilization = trace.counter_track(1, "gpu0.utilization_percent");
  trace.counters.add(0, utilization, 50);
  trace.counters.add(5 * kMillisecond, utilization, 100);
  trace.counters.add(15 * kMillisecond, utilization, 0);
  trace.run.source_format = "opsight";
  trace.run.overhead_ns = 1'200'000;
  trace.run.traced_ns = 22 * kMillisecond;
  trace.run.extra = {{"metric_cost.cpu", "1000 300000"},
                     {"metric_cost.memory", "2000 700000"},
                     {"metric_cost.sampler", "40 90000"},
                     {"sampler_interval_ns", "100000000"}};
  trace.finalize();
  return trace;
}

ReportOptions options_for(OutputFormat format) {
  ReportOptions options;
  options.format = format;
  options.source_name = "metrics.opsight";
  return options;
}

constexpr std::string_view kOverheadLine =
    "tracer overhead: 1.20 ms (5.45% of 22.0 ms traced; metrics 1.00 ms of it: memory 700 µs, "
    "cpu 300 µs; sampler 90.0 µs on its own thread), 0 events dropped\n";

// The "metrics per span" table of metrics_trace(), in the summary and the metrics view.
constexpr std::string_view kSpanMetricTable =
    "name        metric           count        mean         p50         p99         max\n"
    "load_batch  cpu_ns               1     10.1 ms     10.1 ms     10.1 ms     10.1 ms\n"
    "            rss_delta_bytes      1   +12.0 MiB   +12.0 MiB   +12.0 MiB   +12.0 MiB\n"
    "            rss_peak_bytes       1     1.2 GiB     1.2 GiB     1.2 GiB     1.2 GiB\n"
    "            rss_start_bytes      1  1000.0 MiB  1000.0 MiB  1000.0 MiB  1000.0 MiB\n"
    "            rss_end_bytes        1  1012.0 MiB  1012.0 MiB  1012.0 MiB  1012.0 MiB\n"
    "            io_read_bytes        1     4.0 MiB     4.0 MiB     4.0 MiB     4.0 MiB\n"
    "            net_sent_bytes       1     1.0 KiB     1.0 KiB     1.0 KiB     1.0 KiB\n"
    "step        cpu_ns               1     4.00 ms     4.00 ms     4.00 ms     4.00 ms\n"
    "            gpu_power_watts      1     250.5 W     250.5 W     250.5 W     250.5 W\n"
    "            tokens               1         512         512         512         512\n";

TEST(FormatBytes, BinaryUnitsWithOneDecimal) {
  EXPECT_EQ(format_bytes(0), "0 B");
  EXPECT_EQ(format_bytes(512), "512 B");
  EXPECT_EQ(format_bytes(1023), "1023 B");
  EXPECT_EQ(format_bytes(1024), "1.0 KiB");
  EXPECT_EQ(format_bytes(4 * kMebibyte), "4.0 MiB");
  EXPECT_EQ(format_bytes(1'288'490'189), "1.2 GiB");
  EXPECT_EQ(format_bytes(1024.0 * kMebibyte - 1), "1.0 GiB");  // not "1024.0 MiB"
  EXPECT_EQ(format_bytes(-3 * kMebibyte), "-3.0 MiB");
}

TEST(FormatMetricValue, ByUnit) {
  EXPECT_EQ(format_metric_value(10'100'000, "ns"), "10.1 ms");
  EXPECT_EQ(format_metric_value(12 * kMebibyte, "bytes", true), "+12.0 MiB");
  EXPECT_EQ(format_metric_value(-12 * kMebibyte, "bytes", true), "-12.0 MiB");
  EXPECT_EQ(format_metric_value(0, "bytes", true), "0 B");
  EXPECT_EQ(format_metric_value(87.46, "percent"), "87.5%");
  EXPECT_EQ(format_metric_value(250.5, "watts"), "250.5 W");
  EXPECT_EQ(format_metric_value(61.5, "celsius"), "61.5 °C");
  EXPECT_EQ(format_metric_value(2 * kMebibyte, "bytes/s"), "2.0 MiB/s");
  EXPECT_EQ(format_metric_value(3, "/s"), "3/s");
  EXPECT_EQ(format_metric_value(512, ""), "512");
  EXPECT_EQ(format_metric_value(2.5, ""), "2.50");
  EXPECT_EQ(format_metric_value(12.26, "MB"), "12.3 MB");
}

TEST(OverheadLine, NamesTheMetricCostWhenThereIsOne) {
  analyze::OverheadSummary overhead;
  overhead.overhead_known = true;
  overhead.overhead_ns = 1'200'000;
  overhead.traced_ns = 4'005'000'000;
  overhead.share = 1'200'000.0 / 4'005'000'000.0;
  overhead.metric_cost.span_groups = {{"memory", 2000, 700'000}, {"cpu", 1000, 300'000}};
  overhead.metric_cost.span_total_ns = 1'000'000;
  overhead.metric_cost.sampler = analyze::MetricCostEntry{"sampler", 40, 90'000};
  EXPECT_EQ(format_overhead_line(overhead),
            "tracer overhead: 1.20 ms (0.030% of 4.005 s traced; metrics 1.00 ms of it: memory "
            "700 µs, cpu 300 µs; sampler 90.0 µs on its own thread), 0 events dropped");
  overhead.metric_cost.span_groups.clear();
  overhead.traced_ns = 0;
  EXPECT_EQ(format_overhead_line(overhead),
            "tracer overhead: 1.20 ms (no traced time; sampler 90.0 µs on its own thread), 0 "
            "events dropped");
}

TEST(OverheadLine, SaysWhatEachExportSentAndDroppedFromTheRunInfo) {
  trace::RunInfo run;
  run.extra = {{"export:otlp http://127.0.0.1:4318/v1/traces", "6000 5488 512"},
               {"export:zipkin http://z:9411/api/v2/spans", "1 1 0"},
               {"export:", "1 1 0"},                 // no target: skipped
               {"export:loki x", "5 5"},             // two numbers: skipped
               {"export:loki y", "5 5 0 0"},         // four: skipped
               {"export:loki z", "5 -1 0"},          // negative: skipped
               {"metric_cost.cpu", "1000 300000"}};  // not an export
  std::vector<analyze::ExportOutcome> exports = analyze::parse_export_outcomes(run);
  ASSERT_EQ(exports.size(), 2u);
  EXPECT_EQ(exports[0].target, "otlp http://127.0.0.1:4318/v1/traces");
  EXPECT_EQ(exports[0].spans, 6000u);
  EXPECT_EQ(exports[0].sent, 5488u);
  EXPECT_EQ(exports[0].dropped, 512u);
  analyze::OverheadSummary overhead;
  overhead.overhead_known = true;
  overhead.overhead_ns = 1'200'000;
  overhead.traced_ns = 4'005'000'000;
  overhead.share = 1'200'000.0 / 4'005'000'000.0;
  overhead.exports = exports;
  EXPECT_EQ(format_overhead_line(overhead),
            "tracer overhead: 1.20 ms (0.030% of 4.005 s traced), 0 events dropped; exported "
            "5488 of 6000 spans to otlp http://127.0.0.1:4318/v1/traces, 512 dropped; exported 1 "
            "of 1 span to zipkin http://z:9411/api/v2/spans");
}

TEST(MetricsTree, TextShowsEachSlicesMetricsInALastColumn) {
  EXPECT_EQ(render_tree(metrics_trace(), options_for(OutputFormat::kText)),
            "opsight tree: metrics.opsight, 4 slices, 22.0 ms\n"
            "span           duration  of parent    start      end  metrics\n"
            "train           20.0 ms                0 ns  20.0 ms\n"
            "├─ load_batch   12.3 ms      61.5%  1.00 ms  13.3 ms  cpu 10.1 ms · rss +12.0 MiB "
            "(peak 1.2 GiB) · read 4.0 MiB · sent 1.0 KiB\n"
            "└─ step         5.00 ms      25.0%  14.0 ms  19.0 ms  cpu 4.00 ms · gpu power 250.5 W "
            "· tokens 512\n"
            "idle            1.00 ms             21.0 ms  22.0 ms\n" +
                std::string(kOverheadLine));
}

TEST(MetricsTree, JsonHasAMetricsObjectOnlyWhereThereAreMetrics) {
  auto document =
      nlohmann::json::parse(render_tree(metrics_trace(), options_for(OutputFormat::kJson)));
  const auto& train = document["roots"][0];
  EXPECT_FALSE(train.contains("metrics"));
  EXPECT_EQ(train["children"][0]["metrics"],
            nlohmann::json::parse(R"({"cpu_ns": 10100000, "rss_delta_bytes": 12582912,
              "rss_peak_bytes": 1288490189, "rss_start_bytes": 1048576000,
              "rss_end_bytes": 1061158912, "io_read_bytes": 4194304,
              "net_sent_bytes": 1024})"));
  EXPECT_EQ(train["children"][1]["metrics"],
            nlohmann::json::parse(R"({"cpu_ns": 4000000, "gpu_power_watts": 250.5,
              "tokens": 512})"));
  EXPECT_FALSE(document["roots"][1].contains("metrics"));
  EXPECT_EQ(document["metric_cost"], nlohmann::json::parse(R"({"span_metrics_ns": 1000000,
    "groups": {"memory": {"readings": 2000, "total_ns": 700000},
               "cpu": {"readings": 1000, "total_ns": 300000}},
    "sampler": {"samples": 40, "total_ns": 90000}})"));
}

TEST(MetricsTree, CsvHasAColumnPerMetric) {
  EXPECT_EQ(render_tree(metrics_trace(), options_for(OutputFormat::kCsv)),
            "depth,path,start_ns,end_ns,dur_ns,self_ns,share_of_parent,metric.cpu_ns,"
            "metric.rss_delta_bytes,metric.rss_peak_bytes,metric.rss_start_bytes,"
            "metric.rss_end_bytes,metric.io_read_bytes,metric.net_sent_bytes,"
            "metric.gpu_power_watts,metric.tokens\r\n"
            "0,train,0,20000000,20000000,2700000,,,,,,,,,,\r\n"
            "1,train/load_batch,1000000,13300000,12300000,12300000,0.615,10100000,12582912,"
            "1288490189,1048576000,1061158912,4194304,1024,,\r\n"
            "1,train/step,14000000,19000000,5000000,5000000,0.25,4000000,,,,,,,250.5,512\r\n"
            "0,idle,21000000,22000000,1000000,1000000,,,,,,,,,,\r\n");
}

TEST(MetricsSummary, TextAddsAMetricsPerSpanTable) {
  EXPECT_EQ(render_summary(metrics_trace(), options_for(OutputFormat::kText)),
            "opsight summary: metrics.opsight, 4 slices, 22.0 ms\n"
            "name        count    total      min     mean   median      p90      p95      p97  "
            "    p99    p99.9      max  stddev\n"
            "train           1  20.0 ms  20.0 ms  20.0 ms  20.0 ms  20.0 ms  20.0 ms  20.0 ms  "
            "20.0 ms  20.0 ms  20.0 ms    0 ns\n"
            "load_batch      1  12.3 ms  12.3 ms  12.3 ms  12.3 ms  12.3 ms  12.3 ms  12.3 ms  "
            "12.3 ms  12.3 ms  12.3 ms    0 ns\n"
            "step            1  5.00 ms  5.00 ms  5.00 ms  5.00 ms  5.00 ms  5.00 ms  5.00 ms  "
            "5.00 ms  5.00 ms  5.00 ms    0 ns\n"
            "idle            1  1.00 ms  1.00 ms  1.00 ms  1.00 ms  1.00 ms  1.00 ms  1.00 ms  "
            "1.00 ms  1.00 ms  1.00 ms    0 ns\n"
            "metrics per span\n" +
                std::string(kSpanMetricTable) + std::string(kOverheadLine));
}

TEST(MetricsSummary, JsonAndCsvKeepTheirDocumentedShape) {
  trace::Trace trace = metrics_trace();
  auto list = nlohmann::json::parse(render_summary(trace, options_for(OutputFormat::kJson)));
  ASSERT_TRUE(list.is_array());
  EXPECT_EQ(list.size(), 4u);
  EXPECT_FALSE(list[1].contains("metrics"));
  std::string csv = render_summary(trace, options_for(OutputFormat::kCsv));
  EXPECT_EQ(csv.substr(0, csv.find('\r')),
            "name,category,count,total_ns,self_ns,min_ns,mean_ns,p50_ns,p90_ns,p95_ns,p97_ns,"
            "p99_ns,p999_ns,max_ns,stddev_ns");
}

TEST(MetricsView, Text) {
  // rss: 1.0 GiB for 10 ms, then 1.5 GiB for 10 ms; utilization: 50% for 5 ms, then 100%
  // for 10 ms (the last sample has no duration).
  EXPECT_EQ(render_metrics(metrics_trace(), options_for(OutputFormat::kText)),
            "opsight metrics: metrics.opsight, 4 slices, 22.0 ms\n"
            "counters (mean: time-weighted; sampled every 100 ms)\n"
            "name                      unit     samples      min     mean      max\n"
            "gpu0.utilization_percent  percent        3     0.0%    83.3%   100.0%\n"
            "process.rss_bytes         bytes          3  1.0 GiB  1.2 GiB  1.5 GiB\n"
            "metrics per span\n" +
                std::string(kSpanMetricTable) +
                "metric cost (part of the tracer overhead): memory 2000 readings in 700 µs (350 "
                "ns each), cpu 1000 readings in 300 µs (300 ns each)\n"
                "sampler cost (on its own thread): 40 samples in 90.0 µs (2.25 µs each)\n" +
                std::string(kOverheadLine));
}

TEST(MetricsView, Json) {
  auto document =
      nlohmann::json::parse(render_metrics(metrics_trace(), options_for(OutputFormat::kJson)));
  EXPECT_EQ(document["counters"][1], nlohmann::json::parse(R"({"name": "process.rss_bytes",
    "pid": 1, "unit": "bytes", "samples": 3, "min": 1073741824.0, "mean": 1342177280.0,
    "max": 1610612736.0, "last": 1342177280.0, "first_ns": 0, "last_ns": 20000000})"));
  EXPECT_EQ(document["span_metrics"][0], nlohmann::json::parse(R"({"name": "load_batch",
    "metric": "cpu_ns", "unit": "ns", "count": 1, "total": 10100000, "mean": 10100000,
    "min": 10100000, "p50": 10100000, "p90": 10100000, "p99": 10100000, "max": 10100000})"));
  EXPECT_EQ(document["sampler_interval_ns"], 100'000'000);
  EXPECT_TRUE(document["gpu_unavailable"].is_null());
  EXPECT_EQ(document["metric_cost"]["span_metrics_ns"], 1'000'000);
}

TEST(MetricsView, Csv) {
  EXPECT_EQ(render_metrics(metrics_trace(), options_for(OutputFormat::kCsv)),
            "kind,name,pid,metric,unit,count,total,mean,min,p50,p90,p99,max\r\n"
            "counter,gpu0.utilization_percent,1,,percent,3,,83.33333333333333,0,,,,100\r\n"
            "counter,process.rss_bytes,1,,bytes,3,,1342177280,1073741824,,,,1610612736\r\n"
            "span,load_batch,,cpu_ns,ns,1,10100000,10100000,10100000,10100000,10100000,10100000,"
            "10100000\r\n"
            "span,load_batch,,rss_delta_bytes,bytes,1,12582912,12582912,12582912,12582912,"
            "12582912,12582912,12582912\r\n"
            "span,load_batch,,rss_peak_bytes,bytes,1,1288490189,1288490189,1288490189,1288490189,"
            "1288490189,1288490189,1288490189\r\n"
            "span,load_batch,,rss_start_bytes,bytes,1,1048576000,1048576000,1048576000,1048576000,"
            "1048576000,1048576000,1048576000\r\n"
            "span,load_batch,,rss_end_bytes,bytes,1,1061158912,1061158912,1061158912,1061158912,"
            "1061158912,1061158912,1061158912\r\n"
            "span,load_batch,,io_read_bytes,bytes,1,4194304,4194304,4194304,4194304,4194304,"
            "4194304,4194304\r\n"
            "span,load_batch,,net_sent_bytes,bytes,1,1024,1024,1024,1024,1024,1024,1024\r\n"
            "span,step,,cpu_ns,ns,1,4000000,4000000,4000000,4000000,4000000,4000000,4000000\r\n"
            "span,step,,gpu_power_watts,watts,1,250.5,250.5,250.5,250.5,250.5,250.5,250.5\r\n"
            "span,step,,tokens,,1,512,512,512,512,512,512,512\r\n"
            "cost,memory,,,ns,2000,700000,350,,,,,\r\n"
            "cost,cpu,,,ns,1000,300000,300,,,,,\r\n"
            "cost,sampler,,,ns,40,90000,2250,,,,,\r\n");
}

TEST(MetricsView, NoMetricsSaysWhereToLearnAboutThem) {
  trace::Trace trace;
  trace::TrackId track = trace.thread_track(1, 1);
  trace.slices.add(0, 10, trace.intern("a"), 0, track);
  trace.run.source_format = "opsight";
  trace.run.extra = {{"gpu_unavailable", "no GPU: libnvidia-ml.so.1 not found"}};
  trace.finalize();
  EXPECT_EQ(render_metrics(trace, options_for(OutputFormat::kText)),
            "opsight metrics: metrics.opsight, 1 slice, 10 ns\n"
            "no counter tracks or span metrics in this trace (record with metrics: see "
            "docs/metrics.md)\n"
            "gpu metrics: none (no GPU: libnvidia-ml.so.1 not found)\n"
            "tracer overhead: 0 ns (0% of 10 ns traced), 0 events dropped\n");
  auto document = nlohmann::json::parse(render_metrics(trace, options_for(OutputFormat::kJson)));
  EXPECT_TRUE(document["counters"].empty());
  EXPECT_TRUE(document["span_metrics"].empty());
  EXPECT_FALSE(document.contains("metric_cost"));
  EXPECT_EQ(document["gpu_unavailable"], "no GPU: libnvidia-ml.so.1 not found");
}

}  // namespace
}  // namespace opsight::report
