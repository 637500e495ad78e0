// NativeTail over a file that grows while it is read: whatever the cut, every span is
// reported once, with the duration the whole-file reader gives it, and nothing from a
// chunk still being written.
#include "io/native/native_tail.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <map>

#include "io/io.hpp"
#include "io/native/native_test_files.hpp"

namespace {

using opsight::trace::Trace;

Trace busy_server_trace() {
  Trace trace;
  trace.run.pid = 42;
  auto main_track = trace.thread_track(42, 42);
  auto lane = trace.async_track(42, 42, 7, "task 7");
  auto queue = trace.process_async_track(42, 99, "queue");
  for (int i = 0; i < 2000; ++i) {
    int64_t ts = i * 1000;
    trace.slices.add(ts, 900, trace.intern("request"), trace.intern("http"), main_track);
    trace.slices.add(ts + 100, 300 + i % 7, trace.intern(i % 2 ? "model" : "tokenize"), 0,
                     main_track);
    if (i % 10 == 0) trace.slices.add(ts, 5000, trace.intern("queued"), 0, queue);
    if (i % 5 == 0) trace.slices.add(ts + 10, 50, trace.intern("task step"), 0, lane);
  }
  trace.counters.add(100, trace.counter_track(42, "process.rss_bytes"), 1e6);
  trace.counters.add(1'000'000, trace.counter_track(42, "process.rss_bytes"), 3e6);
  trace.finalize();
  return trace;
}

// "name -> count, total duration" of the spans of a trace or a tail.
using Totals = std::map<std::string, std::pair<uint64_t, int64_t>>;

TEST(NativeTail, AGrowingFileReportsEverySpanOnceWhereverItIsCut) {
  Trace trace = busy_server_trace();
  std::string bytes = opsight::io::write_native(trace);
  Totals expected;
  for (size_t row = 0; row < trace.slices.size(); ++row) {
    auto& entry = expected[std::string(trace.str(trace.slices.name[row]))];
    ++entry.first;
    entry.second += trace.slices.dur[row];
  }
  auto path = std::filesystem::temp_directory_path() / ("opsight-tail-" + std::to_string(getpid()));
  // The default window holds the file; a 4 KiB one makes poll() read it in many passes.
  for (size_t window : {size_t{8} << 20, size_t{4096}})
    for (size_t cut :
         {size_t{0}, size_t{17}, bytes.size() / 3, bytes.size() / 2 + 5, bytes.size() - 1}) {
      std::filesystem::remove(path);
      opsight::io::NativeTail tail(path.string(), window);
      Totals got;
      double rss = 0;
      opsight::io::TailVisitor visitor;
      visitor.on_span = [&](const opsight::io::EndedSpan& span) {
        auto& entry = got[std::string(span.name)];
        ++entry.first;
        entry.second += span.duration_ns;
        EXPECT_EQ(span.pid, 42);
      };
      visitor.on_counter_sample = [&](const opsight::io::TailCounterSample& sample) {
        if (sample.name == "process.rss_bytes") rss = sample.value;
      };
      EXPECT_FALSE(tail.poll(visitor));  // no file yet: an error, nothing reported
      {
        std::FILE* file = std::fopen(path.c_str(), "wb");
        std::fwrite(bytes.data(), 1, cut, file);
        std::fclose(file);
      }
      EXPECT_TRUE(tail.poll(visitor)) << tail.error();
      EXPECT_LE(tail.bytes_read(), cut);
      {
        std::FILE* file = std::fopen(path.c_str(), "ab");
        std::fwrite(bytes.data() + cut, 1, bytes.size() - cut, file);
        std::fclose(file);
      }
      EXPECT_TRUE(tail.poll(visitor));
      EXPECT_TRUE(tail.poll(visitor));  // nothing new: nothing twice
      EXPECT_EQ(tail.bytes_read(), bytes.size());
      EXPECT_EQ(got, expected) << "cut at " << cut << ", window " << window;
      EXPECT_EQ(rss, 3e6);
    }
  std::filesystem::remove(path);
}

// What the tail reports of each thread span is what the whole-file reader shows: the same
// span id, parent id, Unix times and arguments.
TEST(NativeTail, ReportsTheReadersIdsParentsTimesAndArgs) {
  Trace trace = busy_server_trace();
  trace.slice_args.add(0, trace.intern("batch"), opsight::trace::ArgValue::of_int(8));
  trace.run.has_unix_offset = true;
  trace.run.unix_offset_ns = 1'700'000'000'000'000'000;
  trace.finalize();
  std::string bytes = opsight::io::write_native(trace);
  auto read = opsight::io::read_native(bytes);
  ASSERT_TRUE(read.ok());
  const Trace& whole = read.trace;
  std::map<uint64_t, std::string> expected, got;
  auto describe = [](std::string_view name, uint64_t parent, int64_t start, int64_t end) {
    return std::string(name) + " parent=" + std::to_string(parent) + " " + std::to_string(start) +
           ".." + std::to_string(end);
  };
  for (opsight::trace::RowIndex row = 0; row < whole.slices.size(); ++row) {
    if (whole.tracks[whole.slices.track[row]].kind == opsight::trace::TrackKind::kAsync) continue;
    auto parent = whole.slices.parent[row];
    expected[whole.slices.span_id[row]] =
        describe(whole.str(whole.slices.name[row]),
                 parent == opsight::trace::kNoRow ? 0 : whole.slices.span_id[parent],
                 whole.slices.ts[row] + whole.run.unix_offset_ns,
                 whole.slices.end(row) + whole.run.unix_offset_ns);
  }
  auto path =
      std::filesystem::temp_directory_path() / ("opsight-tail-ids-" + std::to_string(getpid()));
  {
    std::FILE* file = std::fopen(path.c_str(), "wb");
    std::fwrite(bytes.data(), 1, bytes.size(), file);
    std::fclose(file);
  }
  opsight::io::NativeTail tail(path.string());
  int64_t batch = -1;
  opsight::io::TailVisitor visitor;
  visitor.on_span = [&](const opsight::io::EndedSpan& span) {
    if (span.async) return;
    got[span.span_id] =
        describe(span.name, span.parent_span_id, span.start_unix_ns, span.end_unix_ns);
    for (const auto& arg : *span.args)
      if (arg.key == "batch") batch = arg.value.int_value;
  };
  ASSERT_TRUE(tail.poll(visitor));
  EXPECT_TRUE(tail.finished());
  EXPECT_EQ(got, expected);
  EXPECT_EQ(batch, 8);
  std::filesystem::remove(path);
}

TEST(NativeTail, RefusesAFileThatIsNotOpsight) {
  auto path =
      std::filesystem::temp_directory_path() / ("opsight-tail-bad-" + std::to_string(getpid()));
  {
    std::FILE* file = std::fopen(path.c_str(), "wb");
    std::fputs("{\"traceEvents\": []} and more text", file);
    std::fclose(file);
  }
  opsight::io::NativeTail tail(path.string());
  EXPECT_FALSE(tail.poll({}));
  EXPECT_NE(tail.error().find("not an opsight file"), std::string::npos);
  std::filesystem::remove(path);
}

}  // namespace

// The reader and the tail decode every slot through one decoder and must agree on each
// span the file holds: its id (thread spans and async spans), its parent, its times, its
// name (also an empty inline one), its arguments (not those of an instant before them, even
// with a counter between), whether it ended, and which events are stale (written before
// the session's first clock sync). Each form below is one the disagreement came from.
TEST(NativeTail, AgreesWithTheWholeFileReaderOnEverySpan) {
  using namespace opsight::io::native_test_files;
  using opsight::format::SlotKind;
  std::string async_job_begin(16, '\0');
  uint64_t job_id = 5;
  std::memcpy(async_job_begin.data(), &job_id, sizeof(job_id));
  async_job_begin += "job";
  ThreadEvents first{
      0, 7, 8,
      concat({
          {slot(100, SlotKind::kBegin, 1)},
          int_arg("a", 1),
          named_begin(150, ""),  // an unnamed span
          {slot(160, SlotKind::kInstant, 1)},
          counter(170, "c", 2.0),
          int_arg("after_instant", 5),  // the instant's, not the span's
          {slot(200, SlotKind::kEnd)},
          {packed_slot(SlotKind::kAsyncBeginPacked, 1 | (uint64_t{77} << 24), 210)},
          with_bytes(slot(220, SlotKind::kAsyncBegin, 3, opsight::format::kAsyncNameBytes),
                     async_job_begin),  // never ends
          {slot(300, SlotKind::kEnd)},
          track_switch(42, "task A"),
          {slot(310, SlotKind::kBegin, 1)},
          track_switch(42, "task A again"),  // the key is reused: the span at 310 never ends
          track_switch(0),
          {slot(400, SlotKind::kBegin, 1),
           slot(500, SlotKind::kEnd, 0, opsight::format::kEndIsLate)},
      })};
  ThreadEvents second{
      1, 7, 9,
      concat({
          {slot(10, SlotKind::kBegin, 1)},
          int_arg("stale", 1),                                // before the session: stale
          {packed_slot(SlotKind::kAsyncEndPacked, 77, 600)},  // ends the span begun on thread 0
          {slot(610, SlotKind::kBegin, 1)},                   // open at the end
          counter(700, "c", 3.0),
      })};
  std::string bytes = file_with_threads({first, second}, 1, 50, "0123456789abcdef0123456789abcdef");

  auto read = opsight::io::read_native(bytes);
  ASSERT_TRUE(read.error == std::nullopt);
  const Trace& whole = read.trace;
  auto describe = [](std::string_view name, uint64_t parent, int64_t start, int64_t end,
                     bool unfinished, std::string args) {
    return "'" + std::string(name) + "' parent=" + std::to_string(parent) + " " +
           std::to_string(start) + ".." + std::to_string(end) + (unfinished ? " unfinished" : "") +
           args;
  };
  std::map<uint64_t, std::string> expected, got;
  for (opsight::trace::RowIndex row = 0; row < whole.slices.size(); ++row) {
    std::string args;
    for (size_t arg = 0; arg < whole.slice_args.size(); ++arg)
      if (whole.slice_args.owner[arg] == row)
        args += " " + std::string(whole.str(whole.slice_args.key[arg])) + "=" +
                std::to_string(whole.slice_args.value[arg].int_value);
    auto parent = whole.slices.parent[row];
    expected[whole.slices.span_id[row]] =
        describe(whole.str(whole.slices.name[row]),
                 parent == opsight::trace::kNoRow ? 0 : whole.slices.span_id[parent],
                 whole.slices.ts[row] + whole.run.unix_offset_ns,
                 whole.slices.end(row) + whole.run.unix_offset_ns,
                 whole.slices.flags[row] & opsight::trace::kSliceUnfinished, args);
  }
  ASSERT_EQ(expected.size(), 7u);  // 5 thread spans (one stale is not), 2 async

  auto path =
      std::filesystem::temp_directory_path() / ("opsight-tail-agree-" + std::to_string(getpid()));
  {
    std::FILE* file = std::fopen(path.c_str(), "wb");
    std::fwrite(bytes.data(), 1, bytes.size(), file);
    std::fclose(file);
  }
  opsight::io::NativeTail tail(path.string());
  opsight::io::TailVisitor visitor;
  visitor.on_span = [&](const opsight::io::EndedSpan& span) {
    std::string args;
    for (const auto& arg : *span.args)
      args += " " + arg.key + "=" + std::to_string(arg.value.int_value);
    EXPECT_TRUE(
        got.emplace(span.span_id, describe(span.name, span.parent_span_id, span.start_unix_ns,
                                           span.end_unix_ns, span.unfinished, args))
            .second)
        << "span id reported twice: " << span.span_id;
  };
  ASSERT_TRUE(tail.poll(visitor)) << tail.error();
  tail.finish(visitor);
  EXPECT_EQ(got, expected);
  std::filesystem::remove(path);
}
