// The streaming summary, table and operator table against render_summary, render_table and
// render_operators on the whole trace read from the same file: the text, JSON and CSV
// outputs are compared byte for byte, under every sort key and a
// limit, on files with nested spans, several threads, async spans and lanes, arguments and
// span metrics, mixed categories, unmatched begins and ends, and files cut short as a
// SIGKILL leaves them (no footer, no index, a last chunk cut in half).
#include "report/streaming_summary.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "io/io.hpp"
#include "io/native/native_test_files.hpp"
#include "report/report.hpp"
#include "report/report_test_support.hpp"

namespace {

using opsight::report::OutputFormat;
using opsight::report::ReportOptions;
using opsight::trace::ArgValue;
using opsight::trace::Trace;
namespace files = opsight::io::native_test_files;
using opsight::report::testing::TemporaryTraceFile;

// Every format and sort key, and a limit: the streamed output equals the whole path's.
void expect_streaming_summary_equal(const std::string& bytes, bool expect_damage) {
  TemporaryTraceFile file("opsight-streaming-summary", bytes);
  opsight::io::ReadResult whole = opsight::io::read_native(bytes);
  ASSERT_TRUE(whole.ok());
  EXPECT_EQ(whole.damage.has_value(), expect_damage);
  for (OutputFormat format : {OutputFormat::kText, OutputFormat::kJson, OutputFormat::kCsv}) {
    for (const char* sort : {"total", "self", "count", "mean", "p99", "name"}) {
      for (size_t limit : {size_t{0}, size_t{2}}) {
        ReportOptions options;
        options.format = format;
        options.sort = sort;
        options.limit = limit;
        options.source_name = "run.opsight";
        options.operator_categories = {"cpu_op", "module"};
        opsight::report::StreamedReport streamed = opsight::report::render_streaming(
            file.path(), {"summary", "table", "operators"}, options);
        ASSERT_FALSE(streamed.error.has_value()) << *streamed.error;
        EXPECT_EQ(streamed.damage.has_value(), expect_damage);
        EXPECT_EQ(streamed.slices, whole.trace.slices.size());
        ASSERT_EQ(streamed.texts.size(), 3u);
        EXPECT_EQ(streamed.texts[0], opsight::report::render_summary(whole.trace, options))
            << "format " << static_cast<int>(format) << ", sort " << sort << ", limit " << limit;
        EXPECT_EQ(streamed.texts[1], opsight::report::render_table(whole.trace, options))
            << "format " << static_cast<int>(format) << ", sort " << sort << ", limit " << limit;
        EXPECT_EQ(streamed.texts[2], opsight::report::render_operators(whole.trace, options))
            << "format " << static_cast<int>(format) << ", sort " << sort << ", limit " << limit;
      }
    }
  }
}

// A model with what a real run holds: nested spans on three threads, an asyncio lane,
// process async spans (nested on one id), arguments, span metrics, a name under two
// categories, instants and counters, and the run's overhead fields.
Trace streaming_summary_model() {
  Trace trace;
  trace.run.pid = 42;
  trace.run.command_line = "python serve.py";
  trace.run.opsight_version = "0.1.0";
  trace.run.has_unix_offset = true;
  trace.run.unix_offset_ns = 1'700'000'000'000'000'000;
  trace.run.extra.emplace_back("metric_cost.cpu", "120 45000");
  std::vector<opsight::trace::TrackId> threads = {
      trace.thread_track(42, 42), trace.thread_track(42, 43), trace.thread_track(42, 44)};
  trace.tracks[threads[0]].name = trace.intern("main");
  trace.tracks[threads[0]].overhead_ns = 5000;
  auto lane = trace.async_track(42, 42, 7, "task 7");
  auto queue = trace.process_async_track(42, 99, "queue");
  for (int i = 0; i < 2000; ++i) {
    const int64_t ts = 10'000 + i * 1000;
    auto track = threads[static_cast<size_t>(i % 3)];
    auto request = trace.slices.add(ts, 900 + (i * 37) % 101, trace.intern("request"),
                                    trace.intern(i % 4 == 0 ? "rpc" : "http"), track);
    if (i % 3 == 0) {
      trace.slice_args.add(request, trace.intern("batch"), ArgValue::of_int(i));
      trace.slice_args.add(request, trace.intern("metric.cpu_ns"), ArgValue::of_int(400 + i % 13));
      trace.slice_args.add(request, trace.intern("metric.rss_delta_bytes"),
                           ArgValue::of_double(1024.5 * (i % 5)));
    }
    trace.slices.add(ts + 100, 300 + i % 7, trace.intern(i % 2 ? "model" : "tok"),
                     trace.intern("module"), track);
    trace.slices.add(ts + 150, 20 + i % 11, trace.intern("aten::mm"), trace.intern("cpu_op"),
                     track);
    auto fused = trace.slices.add(ts + 180, 5 + i % 3, trace.intern("aten::mm"),
                                  trace.intern("cpu_op"), track);
    if (i % 4 == 1)
      trace.slice_args.add(fused, trace.intern("op_name"),
                           ArgValue::of_string(trace.intern("aten::mm_fused")));
    if (i % 10 == 0) {
      trace.slices.add(ts, 5000, trace.intern("queued"), 0, queue);
      trace.slices.add(ts + 100, 2000 + i % 9, trace.intern("dequeue"), 0, queue);
    }
    if (i % 5 == 0) trace.slices.add(ts + 10, 50, trace.intern("task step"), 0, lane);
    if (i % 7 == 0) trace.instants.add(ts + 200, trace.intern("cache miss"), 0, track);
    if (i % 50 == 0) trace.counters.add(ts, trace.counter_track(42, "process.rss_bytes"), 1e6 + i);
  }
  trace.instants.add(5, trace.intern("start"), 0, threads[0]);  // the earliest event
  trace.finalize();
  return trace;
}

TEST(StreamingSummary, EqualsTheWholeTraceSummaryOnARun) {
  Trace model = streaming_summary_model();
  const std::string bytes = opsight::io::write_native(model);
  expect_streaming_summary_equal(bytes, false);
  // What was compared holds what it should: every name, the metrics table, the overhead.
  TemporaryTraceFile file("opsight-streaming-summary", bytes);
  ReportOptions options;
  const std::string text = opsight::report::render_summary_streaming(file.path(), options).text;
  for (const char* expected : {"request", "aten::mm", "queued", "dequeue", "task step",
                               "metrics per span", "cpu", "tracer overhead"})
    EXPECT_NE(text.find(expected), std::string::npos) << expected << " in\n" << text;
}

TEST(StreamingSummary, EqualsTheWholeTraceSummaryOnAnEmptyRun) {
  Trace empty;
  empty.finalize();
  expect_streaming_summary_equal(opsight::io::write_native(empty), false);
}

TEST(StreamingSummary, EqualsTheWholeTraceSummaryOnAFileCutShort) {
  // What a SIGKILL leaves: no footer, no index, and here a last chunk cut in half.
  std::string bytes = opsight::io::write_native(streaming_summary_model());
  std::string cut = bytes.substr(0, bytes.size() * 2 / 3);
  expect_streaming_summary_equal(cut, true);
}

TEST(StreamingSummary, EqualsTheWholeTraceSummaryWithUnmatchedBeginsAndEnds) {
  using files::slot;
  using opsight::format::SlotKind;
  // Thread 0: an end with no begin, nested spans, an inline-named span, a span never ended
  // (closed at the thread's last event). Thread 1: two spans left open. Neither file has a
  // footer (the process was killed): both paths say so.
  std::vector<files::ThreadEvents> threads(2);
  threads[0].thread_index = 0;
  threads[0].slots = files::concat({{slot(5, SlotKind::kEnd)},
                                    {slot(10, SlotKind::kBegin, 1), slot(20, SlotKind::kBegin, 1)},
                                    files::named_begin(30, "inline"),
                                    files::int_arg("metric.cpu_ns", 7),
                                    {slot(45, SlotKind::kEnd), slot(60, SlotKind::kEnd),
                                     slot(100, SlotKind::kEnd), slot(110, SlotKind::kBegin, 1)},
                                    files::counter(400, "queue", 3)});
  threads[1].thread_index = 1;
  threads[1].tid = 9;
  threads[1].slots = {slot(50, SlotKind::kBegin, 1), slot(70, SlotKind::kBegin, 1),
                      slot(90, SlotKind::kEnd), slot(300, SlotKind::kInstant, 1)};
  expect_streaming_summary_equal(files::file_with_threads(threads), true);
}

TEST(StreamingSummary, ReportsAFileItCannotRead) {
  TemporaryTraceFile file("opsight-streaming-summary", "not an opsight file at all");
  ReportOptions options;
  auto streamed = opsight::report::render_summary_streaming(file.path(), options);
  ASSERT_TRUE(streamed.error.has_value());
  EXPECT_NE(streamed.error->find(file.path()), std::string::npos) << *streamed.error;
  auto missing = opsight::report::render_summary_streaming("/nonexistent/run.opsight", options);
  ASSERT_TRUE(missing.error.has_value());
  EXPECT_NE(missing.error->find("/nonexistent/run.opsight"), std::string::npos);
}

TEST(StreamingSummary, HoldsAboutFourBytesPerSpan) {
  Trace trace;
  auto track = trace.thread_track(1, 1);
  for (int i = 0; i < 200'000; ++i)
    trace.slices.add(int64_t{i} * 100, 50 + i % 40, trace.intern(i % 2 ? "a" : "b"), 0, track);
  trace.finalize();
  TemporaryTraceFile file("opsight-streaming-summary", opsight::io::write_native(trace));
  auto streamed = opsight::report::render_summary_streaming(file.path(), ReportOptions{});
  ASSERT_FALSE(streamed.error.has_value());
  EXPECT_EQ(streamed.slices, 200'000u);
  // Durations under 4.29 s: 4 bytes each, plus the blocks' last partial capacity.
  EXPECT_LE(streamed.column_bytes, 200'000u * 4 + 2 * 4 * (size_t{1} << 16));
  // The largest name's copy for its percentiles: 8 bytes a value, once.
  EXPECT_LE(streamed.largest_name_copy_bytes, 100'000u * 8);
}

}  // namespace
