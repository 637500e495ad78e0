// The streaming merged tree and breakdown (streaming_views.hpp) against render_merged_tree
// and render_breakdown on the whole trace read from the same file: text, JSON and CSV
// compared byte for byte, with root limits, grouping by name and by category, on files with
// nested spans over several threads, roots and siblings that start together, asyncio
// lanes, process async spans (nested on one id, and as the inferences), recursion, more
// phases than kMaxBreakdownPhases, instants and counters, unmatched begins and ends, a file
// cut short as SIGKILL leaves it, and a file with GPU work (whose breakdown is read whole).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "io/io.hpp"
#include "io/native/native_test_files.hpp"
#include "report/report.hpp"
#include "report/report_test_support.hpp"
#include "report/streaming_summary.hpp"
#include "trace/categories.hpp"

namespace {

using opsight::report::OutputFormat;
using opsight::report::ReportOptions;
using opsight::trace::ArgValue;
using opsight::trace::Trace;
namespace files = opsight::io::native_test_files;
using opsight::report::testing::TemporaryTraceFile;

// Every format, root limits, both groupings and each breakdown span: the streamed output
// equals the whole path's. Returns the streamed texts of the first options (for checks of
// what was compared).
std::vector<std::string> expect_streaming_views_equal(const std::string& bytes, bool expect_damage,
                                                      const std::vector<std::string>& spans) {
  TemporaryTraceFile file("opsight-streaming-views", bytes);
  opsight::io::ReadResult whole = opsight::io::read_native(bytes);
  EXPECT_TRUE(whole.ok());
  EXPECT_EQ(whole.damage.has_value(), expect_damage);
  std::vector<std::string> first;
  for (OutputFormat format : {OutputFormat::kText, OutputFormat::kJson, OutputFormat::kCsv}) {
    for (size_t max_roots : {size_t{0}, size_t{1}, size_t{20}}) {
      for (const std::string& span : spans) {
        for (bool by_category : {false, true}) {
          ReportOptions options;
          options.format = format;
          options.max_roots = max_roots;
          options.source_name = "run.opsight";
          options.breakdown_span = span;
          options.breakdown_by_category = by_category;
          opsight::report::StreamedReport streamed = opsight::report::render_streaming(
              file.path(), {"merged_tree", "breakdown", "summary"}, options);
          EXPECT_FALSE(streamed.error.has_value()) << *streamed.error;
          if (streamed.error) return first;
          EXPECT_EQ(streamed.damage.has_value(), expect_damage);
          EXPECT_EQ(streamed.slices, whole.trace.slices.size());
          EXPECT_EQ(streamed.texts.size(), 3u);
          if (streamed.texts.size() != 3) return first;
          const std::string where = "format " + std::to_string(static_cast<int>(format)) +
                                    ", roots " + std::to_string(max_roots) + ", span '" + span +
                                    "', by category " + std::to_string(by_category);
          EXPECT_EQ(streamed.texts[0], opsight::report::render_merged_tree(whole.trace, options))
              << where;
          EXPECT_EQ(streamed.texts[1], opsight::report::render_breakdown(whole.trace, options))
              << where;
          EXPECT_EQ(streamed.texts[2], opsight::report::render_summary(whole.trace, options))
              << where;
          if (first.empty()) first = streamed.texts;
        }
      }
    }
  }
  return first;
}

// What a run holds: requests on three threads (a name under two categories, the first
// one's the rarer), each with phases, operators below them, and now and then a request
// inside a request; roots on two threads that start at the same time, siblings that start
// together (a zero-length one first); an asyncio lane; process async spans nested on one
// id, and on ids written in another order than the reader's rows; a request whose phases
// are many (beyond kMaxBreakdownPhases); two requests that overlap, the first to start the
// last to end in the file; instants, counters.
Trace streaming_views_model() {
  Trace trace;
  trace.run.pid = 42;
  trace.run.command_line = "python serve.py";
  trace.run.has_unix_offset = true;
  trace.run.unix_offset_ns = 1'700'000'000'000'000'000;
  std::vector<opsight::trace::TrackId> threads = {
      trace.thread_track(42, 42), trace.thread_track(42, 43), trace.thread_track(42, 44)};
  trace.tracks[threads[0]].overhead_ns = 3000;
  auto lane = trace.async_track(42, 42, 7, "task 7");
  auto queue = trace.process_async_track(42, 99, "queue");
  // Written after id 99's track, read before it (ids 3 < 50 < 99 in the reader's rows).
  auto job_late = trace.process_async_track(42, 50, "job 50");
  auto job_early = trace.process_async_track(42, 3, "job 3");
  const auto name = [&trace](const std::string& text) { return trace.intern(text); };
  for (int i = 0; i < 600; ++i) {
    const int64_t ts = 10'000 + i * 1000;
    auto track = threads[static_cast<size_t>(i % 3)];
    trace.slices.add(ts, 900 + (i * 37) % 101, name("request"), name(i % 4 == 0 ? "rpc" : "http"),
                     track);
    trace.slices.add(ts + 100, 300 + i % 7, name(i % 2 ? "model" : "tok"), name("module"), track);
    trace.slices.add(ts + 150, 20 + i % 11, name("aten::mm"), name("cpu_op"), track);
    trace.slices.add(ts + 180, 5 + i % 3, name("aten::add"), name("cpu_op"), track);
    if (i % 5 == 0) {  // a request inside the request: part of the outer inference
      trace.slices.add(ts + 500, 100, name("request"), name("http"), track);
      trace.slices.add(ts + 520, 30, name("tok"), name("module"), track);
    }
    if (i % 9 == 0) trace.slices.add(ts + 700, 0, name("flush"), 0, track);
    if (i % 10 == 0) {
      trace.slices.add(ts, 5000, name("queued"), name("async"), queue);
      trace.slices.add(ts + 100, 2000 + i % 9, name("dequeue"), name("async"), queue);
    }
    if (i % 5 == 0) trace.slices.add(ts + 10, 50, name("task step"), 0, lane);
    if (i % 7 == 0) trace.instants.add(ts + 200, name("cache miss"), 0, track);
    if (i % 50 == 0) trace.counters.add(ts, trace.counter_track(42, "process.rss_bytes"), 1e6 + i);
  }
  // Roots that start together on two threads, and siblings that start together.
  const int64_t late = 10'000 + 600 * 1000;
  trace.slices.add(late, 400, name("warmup"), 0, threads[1]);
  trace.slices.add(late, 300, name("cooldown"), 0, threads[2]);
  trace.slices.add(late + 10, 0, name("mark"), 0, threads[1]);
  trace.slices.add(late + 10, 50, name("step"), 0, threads[1]);
  // A request with 40 phases: the least ones merge into one row.
  trace.slices.add(late + 1000, 100'000, name("request"), name("http"), threads[0]);
  for (int phase = 0; phase < 40; ++phase)
    trace.slices.add(late + 1000 + phase * 2000, 100 + phase * 10,
                     name("phase " + std::to_string(phase)), name(phase % 2 ? "a" : "b"),
                     threads[0]);
  // Async roots: "job" starts with "request" and "queued" (a tie the reader's row order
  // breaks: sync rows, then async ones by id), its first row (id 3's) carries "y".
  trace.slices.add(10'000, 100, name("job"), name("x"), job_late);
  trace.slices.add(30'000, 100, name("job"), name("y"), job_early);
  // Two requests where the one that starts first ends last in the file (an async one: the
  // file holds async events after the threads'): its phases come first, and "common",
  // seen in both, first appears in it.
  const int64_t crossing = late + 200'000;
  auto async_request = trace.process_async_track(42, 60, "async request");
  // (Long enough to stay among the phases shown, not merged into "other phases".)
  trace.slices.add(crossing, 10'000, name("request"), name("http"), async_request);
  trace.slices.add(crossing + 1000, 3000, name("common"), 0, async_request);
  trace.slices.add(crossing + 5000, 3000, name("only a"), 0, async_request);
  trace.slices.add(crossing + 100, 9000, name("request"), name("http"), threads[2]);
  trace.slices.add(crossing + 150, 3000, name("only b"), 0, threads[2]);
  trace.slices.add(crossing + 3200, 3000, name("common"), 0, threads[2]);
  trace.instants.add(5, name("start"), 0, threads[0]);  // the earliest event
  trace.finalize();
  return trace;
}

const std::vector<std::string> kStreamingViewsSpans = {"request", "queued", "model", "missing"};

TEST(StreamingViews, EqualTheWholeTraceViewsOnARun) {
  Trace model = streaming_views_model();
  const std::vector<std::string> texts =
      expect_streaming_views_equal(opsight::io::write_native(model), false, kStreamingViewsSpans);
  ASSERT_EQ(texts.size(), 3u);
  // What was compared holds what it should: paths, phases, the merged phases' row.
  for (const char* expected : {"request", "aten::mm", "queued", "dequeue", "task step", "warmup",
                               "cooldown", "tracer overhead"})
    EXPECT_NE(texts[0].find(expected), std::string::npos) << expected << " in\n" << texts[0];
  for (const char* expected : {"inferences of 'request'", "model", "tok", "other phases", "common",
                               "only a", "only b", "(uncovered)"})
    EXPECT_NE(texts[1].find(expected), std::string::npos) << expected << " in\n" << texts[1];
}

TEST(StreamingViews, EqualTheWholeTraceViewsOnAnEmptyRun) {
  Trace empty;
  empty.finalize();
  expect_streaming_views_equal(opsight::io::write_native(empty), false, {"request"});
}

TEST(StreamingViews, EqualTheWholeTraceViewsOnAFileCutShort) {
  std::string bytes = opsight::io::write_native(streaming_views_model());
  expect_streaming_views_equal(bytes.substr(0, bytes.size() * 2 / 3), true, {"request", "queued"});
}

TEST(StreamingViews, EqualTheWholeTraceViewsWithUnmatchedBeginsAndEnds) {
  using files::slot;
  using opsight::format::SlotKind;
  // Thread 0: an end with no begin, nested spans, an inline-named one, a span never ended.
  // Thread 1: two spans left open. No footer: both paths say so.
  std::vector<files::ThreadEvents> threads(2);
  threads[0].thread_index = 0;
  threads[0].slots = files::concat({{slot(5, SlotKind::kEnd)},
                                    {slot(10, SlotKind::kBegin, 1), slot(20, SlotKind::kBegin, 1)},
                                    files::named_begin(30, "inline"),
                                    {slot(45, SlotKind::kEnd), slot(60, SlotKind::kEnd),
                                     slot(100, SlotKind::kEnd), slot(110, SlotKind::kBegin, 1)},
                                    files::named_begin(120, "inline"),
                                    files::counter(400, "queue", 3)});
  threads[1].thread_index = 1;
  threads[1].tid = 9;
  threads[1].slots = {slot(50, SlotKind::kBegin, 1), slot(70, SlotKind::kBegin, 1),
                      slot(90, SlotKind::kEnd), slot(300, SlotKind::kInstant, 1)};
  expect_streaming_views_equal(files::file_with_threads(threads), true, {"span", "inline"});
}

TEST(StreamingViews, ReadsTheBreakdownOfAFileWithGpuWorkWhole) {
  // A kernel: the whole-file breakdown leaves out inferences on GPU tracks and adds the
  // host/device split, so the stream hands the breakdown to the whole path (and says so).
  Trace trace;
  auto host = trace.thread_track(1, 1);
  auto stream = trace.thread_track(1, 1000);
  for (int i = 0; i < 20; ++i) {
    const int64_t ts = 1000 + i * 1000;
    trace.slices.add(ts, 800, trace.intern("forward"), 0, host);
    trace.slices.add(ts + 10, 100, trace.intern("cudaLaunchKernel"),
                     trace.intern(opsight::trace::kCategoryCudaRuntime), host);
    trace.slices.add(ts + 200, 300, trace.intern("forward"), 0, stream);
    trace.slices.add(ts + 210, 200, trace.intern("gemm"),
                     trace.intern(opsight::trace::kCategoryGpuKernel), stream);
  }
  trace.finalize();
  const std::string bytes = opsight::io::write_native(trace);
  expect_streaming_views_equal(bytes, false, {"forward"});
  TemporaryTraceFile file("opsight-streaming-views", bytes);
  ReportOptions options;
  options.breakdown_span = "forward";
  auto streamed = opsight::report::render_streaming(file.path(), {"breakdown"}, options);
  EXPECT_EQ(streamed.whole_file_views, std::vector<std::string>{"breakdown"});
  EXPECT_NE(streamed.text.find("20 inferences"), std::string::npos) << streamed.text;
}

TEST(StreamingViews, HoldAboutFourBytesPerSpan) {
  // Requests with two phases each, on two threads: the tree's columns hold 4 bytes a span;
  // the breakdown's 4 a phase value, 4 its inference's number, 8 an inference.
  Trace trace;
  std::vector<opsight::trace::TrackId> tracks = {trace.thread_track(1, 1),
                                                 trace.thread_track(1, 2)};
  const int requests = 200'000;
  for (int i = 0; i < requests; ++i) {
    auto track = tracks[static_cast<size_t>(i % 2)];
    const int64_t ts = int64_t{i / 2} * 1000;
    trace.slices.add(ts, 900, trace.intern("request"), 0, track);
    trace.slices.add(ts + 100, 300 + i % 50, trace.intern("tok"), 0, track);
    trace.slices.add(ts + 500, 200 + i % 70, trace.intern("model"), 0, track);
  }
  trace.finalize();
  TemporaryTraceFile file("opsight-streaming-views", opsight::io::write_native(trace));
  const size_t spans = size_t{requests} * 3;
  // Each column's last block may be up to 64 Ki values of spare capacity.
  const size_t block_slack = 4 * (size_t{1} << 16);
  ReportOptions options;
  auto tree = opsight::report::render_streaming(file.path(), {"merged_tree"}, options);
  ASSERT_FALSE(tree.error.has_value());
  EXPECT_EQ(tree.slices, spans);
  EXPECT_LE(tree.column_bytes, spans * 4 + 3 * block_slack);
  EXPECT_GE(tree.column_bytes, spans * 4);
  EXPECT_LE(tree.largest_name_copy_bytes, size_t{requests} * 8);
  options.breakdown_span = "request";
  auto breakdown = opsight::report::render_streaming(file.path(), {"breakdown"}, options);
  ASSERT_FALSE(breakdown.error.has_value());
  EXPECT_LE(breakdown.column_bytes, size_t{requests} * (2 * 8 + 8) + 6 * block_slack);
  EXPECT_GE(breakdown.column_bytes, size_t{requests} * (2 * 8 + 8));
  EXPECT_NE(breakdown.text.find("200000 inferences"), std::string::npos) << breakdown.text;
}

}  // namespace
