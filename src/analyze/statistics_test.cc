#include "analyze/statistics.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

namespace opsight::analyze {
namespace {

const NameStatistics* find_name(const trace::Trace& trace, const TraceStatistics& statistics,
                                std::string_view name) {
  for (const NameStatistics& entry : statistics.names)
    if (trace.str(entry.name) == name) return &entry;
  return nullptr;
}

TEST(PercentileOfSorted, EmptyIsZero) { EXPECT_EQ(percentile_of_sorted({}, 50.0), 0.0); }

TEST(PercentileOfSorted, OneElementIsThatElement) {
  std::vector<int64_t> values = {42};
  for (double q : {0.0, 50.0, 99.9, 100.0}) EXPECT_EQ(percentile_of_sorted(values, q), 42.0);
}

TEST(PercentileOfSorted, TwoElementsInterpolate) {
  // numpy.percentile([10, 20], q): 10 + 10 * q / 100.
  std::vector<int64_t> values = {10, 20};
  EXPECT_DOUBLE_EQ(percentile_of_sorted(values, 0.0), 10.0);
  EXPECT_DOUBLE_EQ(percentile_of_sorted(values, 50.0), 15.0);
  EXPECT_DOUBLE_EQ(percentile_of_sorted(values, 90.0), 19.0);
  EXPECT_DOUBLE_EQ(percentile_of_sorted(values, 99.0), 19.9);
  EXPECT_DOUBLE_EQ(percentile_of_sorted(values, 100.0), 20.0);
}

TEST(PercentileOfSorted, FiveElements) {
  // numpy.percentile([1, 2, 3, 4, 100], q): index = q / 100 * 4. The index is rounded in
  // binary (q = 90 gives 61.599999999999966 by numpy's formula), hence NEAR.
  std::vector<int64_t> values = {1, 2, 3, 4, 100};
  EXPECT_NEAR(percentile_of_sorted(values, 50.0), 3.0, 1e-9);
  EXPECT_NEAR(percentile_of_sorted(values, 25.0), 2.0, 1e-9);
  EXPECT_NEAR(percentile_of_sorted(values, 90.0), 61.6, 1e-9);   // 4 + 0.6 * 96
  EXPECT_NEAR(percentile_of_sorted(values, 95.0), 80.8, 1e-9);   // 4 + 0.8 * 96
  EXPECT_NEAR(percentile_of_sorted(values, 99.0), 96.16, 1e-9);  // 4 + 0.96 * 96
}

TEST(PercentileOfSorted, OneToHundred) {
  // numpy.percentile(np.arange(1, 101), q): 1 + q / 100 * 99.
  std::vector<int64_t> values(100);
  std::iota(values.begin(), values.end(), 1);
  EXPECT_DOUBLE_EQ(percentile_of_sorted(values, 50.0), 50.5);
  EXPECT_DOUBLE_EQ(percentile_of_sorted(values, 90.0), 90.1);
  EXPECT_DOUBLE_EQ(percentile_of_sorted(values, 95.0), 95.05);
  EXPECT_DOUBLE_EQ(percentile_of_sorted(values, 97.0), 97.03);
  EXPECT_DOUBLE_EQ(percentile_of_sorted(values, 99.0), 99.01);
  EXPECT_DOUBLE_EQ(percentile_of_sorted(values, 99.9), 99.901);
  EXPECT_DOUBLE_EQ(percentile_of_sorted(values, 100.0), 100.0);
}

TEST(PercentileOfSorted, OutOfRangeIsClamped) {
  std::vector<int64_t> values = {5, 7};
  EXPECT_EQ(percentile_of_sorted(values, -3.0), 5.0);
  EXPECT_EQ(percentile_of_sorted(values, 250.0), 7.0);
}

TEST(PercentilesOfUnsorted, MatchesSortForManyShapes) {
  uint64_t state = 1;
  auto next = [&state] {
    state = trace::mix64(state);
    return state;
  };
  for (size_t count : {1u, 2u, 3u, 31u, 33u, 100u, 1000u, 4099u}) {
    for (int shape = 0; shape < 3; ++shape) {
      std::vector<int64_t> values(count);
      for (size_t i = 0; i < count; ++i) {
        if (shape == 0) values[i] = static_cast<int64_t>(next() % 1000000);
        if (shape == 1) values[i] = static_cast<int64_t>(next() % 4);  // many ties
        if (shape == 2) values[i] = static_cast<int64_t>(count - i);   // descending
      }
      std::vector<int64_t> sorted = values;
      std::sort(sorted.begin(), sorted.end());
      std::vector<double> results(kSummaryPercentiles.size());
      percentiles_of_unsorted(values, kSummaryPercentiles, results);
      for (size_t i = 0; i < kSummaryPercentiles.size(); ++i)
        EXPECT_EQ(results[i], percentile_of_sorted(sorted, kSummaryPercentiles[i]))
            << "count " << count << " shape " << shape << " p" << kSummaryPercentiles[i];
    }
  }
}

// main [0, 100) on one thread contains a [10, 40) and a [50, 70); a contains b [20, 30).
trace::Trace nested_trace() {
  trace::Trace trace;
  trace::TrackId track = trace.thread_track(1, 1);
  trace::StringId category = trace.intern("python");
  trace.slices.add(0, 100, trace.intern("main"), category, track);
  trace.slices.add(10, 30, trace.intern("a"), category, track);
  trace.slices.add(20, 10, trace.intern("b"), category, track);
  trace.slices.add(50, 20, trace.intern("a"), category, track);
  trace.finalize();
  return trace;
}

TEST(NameStatistics, SelfTimeSubtractsDirectChildrenOnly) {
  trace::Trace trace = nested_trace();
  TraceStatistics statistics = compute_name_statistics(trace);
  ASSERT_EQ(statistics.names.size(), 3u);
  EXPECT_EQ(statistics.slice_count, 4u);
  EXPECT_EQ(statistics.traced_ns, 100);
  const NameStatistics* main_entry = find_name(trace, statistics, "main");
  const NameStatistics* a_entry = find_name(trace, statistics, "a");
  const NameStatistics* b_entry = find_name(trace, statistics, "b");
  ASSERT_TRUE(main_entry && a_entry && b_entry);
  EXPECT_EQ(main_entry->total_ns, 100);
  EXPECT_EQ(main_entry->self_ns, 50);  // 100 - 30 - 20 (b is a grandchild)
  EXPECT_EQ(a_entry->count, 2u);
  EXPECT_EQ(a_entry->total_ns, 50);
  EXPECT_EQ(a_entry->self_ns, 40);  // (30 - 10) + 20
  EXPECT_EQ(b_entry->self_ns, 10);
  EXPECT_DOUBLE_EQ(main_entry->share_of_traced, 1.0);
  EXPECT_DOUBLE_EQ(a_entry->share_of_traced, 0.5);

  std::vector<int64_t> self_times = compute_self_times(trace);
  EXPECT_EQ(self_times, (std::vector<int64_t>{50, 20, 10, 20}));
}

TEST(NameStatistics, MomentsAndPercentiles) {
  // Durations 2, 4, 4, 4, 5, 5, 7, 9: mean 5, population stddev 2.
  trace::Trace trace;
  trace::TrackId track = trace.thread_track(1, 1);
  trace::StringId name = trace.intern("step");
  int64_t start = 0;
  for (int64_t duration : {4, 2, 9, 4, 5, 7, 4, 5}) {
    trace.slices.add(start, duration, name, 0, track);
    start += 100;
  }
  trace.finalize();
  TraceStatistics statistics = compute_name_statistics(trace);
  ASSERT_EQ(statistics.names.size(), 1u);
  const NameStatistics& entry = statistics.names[0];
  EXPECT_EQ(entry.count, 8u);
  EXPECT_EQ(entry.total_ns, 40);
  EXPECT_EQ(entry.self_ns, 40);
  EXPECT_EQ(entry.min_ns, 2);
  EXPECT_EQ(entry.max_ns, 9);
  EXPECT_DOUBLE_EQ(entry.mean_ns, 5.0);
  EXPECT_DOUBLE_EQ(entry.stddev_ns, 2.0);
  // sorted 2 4 4 4 5 5 7 9, index = q / 100 * 7
  EXPECT_DOUBLE_EQ(entry.p50_ns, 4.5);
  EXPECT_DOUBLE_EQ(entry.p90_ns, 7.6);     // 7 + 0.3 * 2
  EXPECT_DOUBLE_EQ(entry.p95_ns, 8.3);     // 7 + 0.65 * 2
  EXPECT_DOUBLE_EQ(entry.p97_ns, 8.58);    // 7 + 0.79 * 2
  EXPECT_DOUBLE_EQ(entry.p99_ns, 8.86);    // 7 + 0.93 * 2
  EXPECT_DOUBLE_EQ(entry.p999_ns, 8.986);  // 7 + 0.993 * 2
}

TEST(NameStatistics, MostCommonCategoryWins) {
  trace::Trace trace;
  trace::TrackId track = trace.thread_track(1, 1);
  trace::StringId name = trace.intern("op");
  trace::StringId cpu = trace.intern("cpu");
  trace::StringId gpu = trace.intern("gpu");
  trace.slices.add(0, 1, name, cpu, track);
  trace.slices.add(10, 1, name, gpu, track);
  trace.slices.add(20, 1, name, gpu, track);
  trace.finalize();
  TraceStatistics statistics = compute_name_statistics(trace);
  ASSERT_EQ(statistics.names.size(), 1u);
  EXPECT_EQ(trace.str(statistics.names[0].category), "gpu");
}

TEST(NameStatistics, EmptyTrace) {
  trace::Trace trace;
  trace.finalize();
  TraceStatistics statistics = compute_name_statistics(trace);
  EXPECT_TRUE(statistics.names.empty());
  EXPECT_EQ(statistics.slice_count, 0u);
  EXPECT_EQ(statistics.traced_ns, 0);
}

TEST(Overhead, UsesRunTotalOrTrackSum) {
  trace::Trace trace = nested_trace();
  trace.tracks[0].overhead_ns = 7;
  trace.tracks[0].events_dropped = 2;
  OverheadSummary from_tracks = summarize_overhead(trace);
  EXPECT_EQ(from_tracks.overhead_ns, 7);
  EXPECT_TRUE(from_tracks.overhead_known);
  EXPECT_EQ(from_tracks.events_dropped, 2u);
  EXPECT_EQ(from_tracks.traced_ns, 100);
  EXPECT_DOUBLE_EQ(from_tracks.share, 0.07);

  trace.run.overhead_ns = 25;
  trace.run.traced_ns = 1000;
  trace.run.events_dropped = 5;  // every thread's drops: the tracks' are not added to it
  OverheadSummary from_run = summarize_overhead(trace);
  EXPECT_EQ(from_run.overhead_ns, 25);
  EXPECT_EQ(from_run.events_dropped, 5u);
  EXPECT_EQ(from_run.traced_ns, 1000);
  EXPECT_DOUBLE_EQ(from_run.share, 0.025);
}

TEST(Overhead, ForeignTraceWithoutOverheadIsUnknown) {
  trace::Trace trace = nested_trace();
  trace.run.source_format = "chrome-json";
  EXPECT_FALSE(summarize_overhead(trace).overhead_known);
  trace.run.source_format = "opsight";
  EXPECT_TRUE(summarize_overhead(trace).overhead_known);
}

TEST(Overhead, ForeignTraceReadBackFromNativeStaysUnknown) {
  // An ONNX Runtime profile converted to .opsight (or stored as a run): the native reader
  // counts the events it read per track, and writes its own version.
  trace::Trace trace = nested_trace();
  trace.run.source_format = "opsight";
  trace.run.extra.emplace_back("converted_from", "onnxruntime");
  trace.run.opsight_version = "0.1.0";
  trace.tracks[0].events_recorded = 6;
  EXPECT_FALSE(summarize_overhead(trace).overhead_known);
  trace.tracks[0].overhead_ns = 3;  // a cost that was really measured is shown
  EXPECT_TRUE(summarize_overhead(trace).overhead_known);
}

}  // namespace
}  // namespace opsight::analyze
