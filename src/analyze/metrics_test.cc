// Golden tests of the metric analyses: small traces built here, expected values by hand.
#include "analyze/metrics.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "analyze/statistics.hpp"

namespace opsight::analyze {
namespace {

trace::ArgValue int_arg(int64_t value) { return trace::ArgValue::of_int(value); }
trace::ArgValue double_arg(double value) { return trace::ArgValue::of_double(value); }

// load x3 with cpu_ns 10/30/20, rss_delta_bytes on two, gpu_power_watts (fractional) on
// two; a child step with a user metric; a slice with a plain argument and a non-numeric
// metric-prefixed one.
trace::Trace metric_trace() {
  trace::Trace trace;
  trace::TrackId track = trace.thread_track(1, 1);
  trace::StringId category = trace.intern("python");
  trace::StringId load = trace.intern("load");
  trace::StringId cpu = trace.intern("metric.cpu_ns");
  trace::StringId rss = trace.intern("metric.rss_delta_bytes");
  trace::StringId power = trace.intern("metric.gpu_power_watts");
  trace::RowIndex first = trace.slices.add(0, 100, load, category, track);
  trace::RowIndex step = trace.slices.add(10, 10, trace.intern("step"), category, track);
  trace::RowIndex second = trace.slices.add(200, 100, load, category, track);
  trace::RowIndex third = trace.slices.add(400, 100, load, category, track);
  trace::RowIndex other = trace.slices.add(600, 5, trace.intern("other"), category, track);
  trace.slice_args.add(first, cpu, int_arg(10));
  trace.slice_args.add(first, rss, int_arg(-4096));
  trace.slice_args.add(first, power, double_arg(250.5));
  trace.slice_args.add(step, trace.intern("metric.custom_count"), int_arg(7));
  trace.slice_args.add(second, power, double_arg(100.25));
  trace.slice_args.add(second, cpu, int_arg(30));
  trace.slice_args.add(third, cpu, int_arg(20));
  trace.slice_args.add(third, rss, int_arg(1024));
  trace.slice_args.add(third, trace.intern("metric.note"),
                       trace::ArgValue::of_string(trace.intern("text")));
  trace.slice_args.add(other, trace.intern("plain"), int_arg(5));
  trace.slice_args.add(other, trace.intern("metric."), int_arg(1));
  trace.run.source_format = "opsight";
  trace.finalize();
  return trace;
}

const SpanMetricStatistics* find_statistics(const trace::Trace& trace,
                                            const std::vector<SpanMetricStatistics>& statistics,
                                            std::string_view span, std::string_view metric) {
  for (const SpanMetricStatistics& entry : statistics)
    if (trace.str(entry.span_name) == span && entry.metric_name == metric) return &entry;
  return nullptr;
}

trace::RowIndex row_named(const trace::Trace& trace, std::string_view name, int64_t start) {
  for (trace::RowIndex row = 0; row < trace.slices.size(); ++row)
    if (trace.str(trace.slices.name[row]) == name && trace.slices.ts[row] == start) return row;
  return trace::kNoRow;
}

TEST(SliceMetricIndex, NamesInDisplayOrderAndOnlyNumericPrefixedKeys) {
  trace::Trace trace = metric_trace();
  SliceMetricIndex index(trace);
  std::vector<std::string> names(index.names().begin(), index.names().end());
  EXPECT_EQ(names, (std::vector<std::string>{"cpu_ns", "rss_delta_bytes", "gpu_power_watts",
                                             "custom_count"}));
  EXPECT_EQ(index.metric_of_key(*trace.strings.find("plain")), SliceMetricIndex::kNotAMetric);
  EXPECT_EQ(index.metric_of_key(*trace.strings.find("metric.note")), SliceMetricIndex::kNotAMetric);
}

TEST(SliceMetricIndex, ReadingsOfOneSlice) {
  trace::Trace trace = metric_trace();
  SliceMetricIndex index(trace);
  std::vector<MetricReading> readings = index.readings_of(row_named(trace, "load", 0));
  ASSERT_EQ(readings.size(), 3u);
  EXPECT_EQ(readings[0].metric, 0u);
  EXPECT_EQ(readings[0].value, 10.0);
  EXPECT_TRUE(readings[0].integral);
  EXPECT_EQ(readings[1].metric, 1u);
  EXPECT_EQ(readings[1].value, -4096.0);
  EXPECT_EQ(readings[2].metric, 2u);
  EXPECT_EQ(readings[2].value, 250.5);
  EXPECT_FALSE(readings[2].integral);
  EXPECT_TRUE(index.readings_of(row_named(trace, "other", 600)).empty());
}

TEST(SliceMetricIndex, TraceWithoutMetricsIsEmpty) {
  trace::Trace trace;
  trace::TrackId track = trace.thread_track(1, 1);
  trace::RowIndex row = trace.slices.add(0, 10, trace.intern("a"), 0, track);
  trace.slice_args.add(row, trace.intern("size"), int_arg(3));
  trace.finalize();
  SliceMetricIndex index(trace);
  EXPECT_TRUE(index.empty());
  EXPECT_TRUE(index.readings_of(row).empty());
  EXPECT_TRUE(compute_span_metric_statistics(trace, index).empty());
}

TEST(SpanMetricStatistics, IntegralMetricHasExactPercentiles) {
  trace::Trace trace = metric_trace();
  SliceMetricIndex index(trace);
  auto statistics = compute_span_metric_statistics(trace, index);
  EXPECT_EQ(statistics.size(), 4u);
  const SpanMetricStatistics* cpu = find_statistics(trace, statistics, "load", "cpu_ns");
  ASSERT_NE(cpu, nullptr);
  EXPECT_EQ(cpu->unit, "ns");
  EXPECT_TRUE(cpu->integral);
  EXPECT_EQ(cpu->count, 3u);
  EXPECT_EQ(cpu->total, 60.0);
  EXPECT_EQ(cpu->mean, 20.0);
  EXPECT_EQ(cpu->min, 10.0);
  EXPECT_EQ(cpu->max, 30.0);
  // numpy.percentile([10, 20, 30], q): index q / 100 * 2.
  EXPECT_EQ(cpu->p50, 20.0);
  EXPECT_DOUBLE_EQ(cpu->p90, 28.0);
  EXPECT_DOUBLE_EQ(cpu->p99, 29.8);

  const SpanMetricStatistics* rss = find_statistics(trace, statistics, "load", "rss_delta_bytes");
  ASSERT_NE(rss, nullptr);
  EXPECT_EQ(rss->unit, "bytes");
  EXPECT_EQ(rss->count, 2u);
  EXPECT_EQ(rss->min, -4096.0);
  EXPECT_EQ(rss->mean, -1536.0);
  EXPECT_EQ(rss->p50, -1536.0);
  EXPECT_EQ(rss->total, -3072.0);
}

TEST(SpanMetricStatistics, FractionalMetricToAThousandthOfItsUnit) {
  trace::Trace trace = metric_trace();
  SliceMetricIndex index(trace);
  auto statistics = compute_span_metric_statistics(trace, index);
  const SpanMetricStatistics* power = find_statistics(trace, statistics, "load", "gpu_power_watts");
  ASSERT_NE(power, nullptr);
  EXPECT_EQ(power->unit, "watts");
  EXPECT_FALSE(power->integral);
  EXPECT_EQ(power->count, 2u);
  EXPECT_DOUBLE_EQ(power->mean, 175.375);
  EXPECT_EQ(power->min, 100.25);
  EXPECT_EQ(power->max, 250.5);
  // numpy.percentile([100.25, 250.5], [50, 90, 99]) = 175.375, 235.475, 248.9975.
  EXPECT_DOUBLE_EQ(power->p50, 175.375);
  EXPECT_NEAR(power->p90, 235.475, 1e-9);
  EXPECT_NEAR(power->p99, 248.9975, 1e-9);

  const SpanMetricStatistics* custom = find_statistics(trace, statistics, "step", "custom_count");
  ASSERT_NE(custom, nullptr);
  EXPECT_EQ(custom->unit, "");
  EXPECT_EQ(custom->count, 1u);
  EXPECT_EQ(custom->p99, 7.0);
}

TEST(CounterStatistics, TimeWeightedMeanOrderedSamplesAndUnits) {
  trace::Trace trace;
  uint32_t rss = trace.counter_track(7, "process.rss_bytes");
  uint32_t temperature = trace.counter_track(7, "gpu0.temperature_celsius", "degC");
  trace.counter_track(7, "process.empty_percent");
  trace.counters.add(30, rss, 200);
  trace.counters.add(0, rss, 100);
  trace.counters.add(10, rss, 300);
  trace.counters.add(15, rss, std::nan(""));
  trace.counters.add(5, temperature, 61.5);
  trace.finalize();
  std::vector<CounterStatistics> statistics = compute_counter_statistics(trace);
  ASSERT_EQ(statistics.size(), 2u);  // the track without samples is left out

  EXPECT_EQ(statistics[0].name, "gpu0.temperature_celsius");
  EXPECT_EQ(statistics[0].unit, "degC");  // the track's own unit comes first
  EXPECT_EQ(statistics[0].samples, 1u);
  EXPECT_EQ(statistics[0].mean, 61.5);

  const CounterStatistics& memory = statistics[1];
  EXPECT_EQ(memory.name, "process.rss_bytes");
  EXPECT_EQ(memory.pid, 7);
  EXPECT_EQ(memory.unit, "bytes");
  EXPECT_EQ(memory.samples, 3u);
  EXPECT_EQ(memory.min, 100.0);
  EXPECT_EQ(memory.max, 300.0);
  EXPECT_EQ(memory.last, 200.0);
  EXPECT_EQ(memory.first_ts_ns, 0);
  EXPECT_EQ(memory.last_ts_ns, 30);
  // 100 for 10 ns, then 300 for 20 ns, over 30 ns.
  EXPECT_DOUBLE_EQ(memory.mean, (100.0 * 10 + 300.0 * 20) / 30.0);
}

TEST(CounterStatistics, SamplesAtOneInstantTakeThePlainMean) {
  trace::Trace trace;
  uint32_t track = trace.counter_track(1, "load");
  trace.counters.add(5, track, 1);
  trace.counters.add(5, track, 4);
  trace.finalize();
  std::vector<CounterStatistics> statistics = compute_counter_statistics(trace);
  ASSERT_EQ(statistics.size(), 1u);
  EXPECT_EQ(statistics[0].mean, 2.5);
  EXPECT_EQ(statistics[0].unit, "");
}

TEST(MetricCost, GroupsCostliestFirstSamplerApartMalformedSkipped) {
  trace::RunInfo run;
  run.extra = {{"metric_cost.cpu", "1000 300000"},
               {"metric_cost.memory", "2000 5120000"},
               {"metric_cost.sampler", "40 90000"},
               {"metric_cost.bad", "x 1"},
               {"metric_cost.worse", "1 2 3"},
               {"metric_cost.memory", "10 1000"},
               {"metric_cost.", "1 1"},
               {"other", "1 1"}};
  MetricCost cost = parse_metric_cost(run);
  ASSERT_EQ(cost.span_groups.size(), 2u);
  EXPECT_EQ(cost.span_groups[0].group, "memory");
  EXPECT_EQ(cost.span_groups[0].readings, 2010u);
  EXPECT_EQ(cost.span_groups[0].total_ns, 5'121'000);
  EXPECT_EQ(cost.span_groups[1].group, "cpu");
  EXPECT_EQ(cost.span_total_ns, 5'421'000);
  ASSERT_TRUE(cost.sampler.has_value());
  EXPECT_EQ(cost.sampler->readings, 40u);
  EXPECT_EQ(cost.sampler->total_ns, 90'000);
  EXPECT_FALSE(cost.empty());
  EXPECT_TRUE(parse_metric_cost(trace::RunInfo{}).empty());
}

TEST(MetricCost, PartOfTheOverheadSummary) {
  trace::Trace trace = metric_trace();
  trace.run.overhead_ns = 1000;
  trace.run.extra.emplace_back("metric_cost.cpu", "3 600");
  OverheadSummary overhead = summarize_overhead(trace);
  ASSERT_EQ(overhead.metric_cost.span_groups.size(), 1u);
  EXPECT_EQ(overhead.metric_cost.span_total_ns, 600);
  EXPECT_FALSE(overhead.metric_cost.sampler.has_value());
}

TEST(RunExtraValue, LastOneWins) {
  trace::RunInfo run;
  run.extra = {{"gpu_unavailable", "first"}, {"gpu_unavailable", "no GPU"}};
  EXPECT_EQ(run_extra_value(run, "gpu_unavailable"), "no GPU");
  EXPECT_FALSE(run_extra_value(run, "sampler_interval_ns").has_value());
}

}  // namespace
}  // namespace opsight::analyze
