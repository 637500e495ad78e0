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

namespace {

using opsight::trace::Trace;

Trace sample() {
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
  Trace trace = sample();
  std::string bytes = opsight::io::write_native(trace);
  Totals expected;
  for (size_t row = 0; row < trace.slices.size(); ++row) {
    auto& entry = expected[std::string(trace.str(trace.slices.name[row]))];
    ++entry.first;
    entry.second += trace.slices.dur[row];
  }
  auto path = std::filesystem::temp_directory_path() / ("opsight-tail-" + std::to_string(getpid()));
  for (size_t cut :
       {size_t{0}, size_t{17}, bytes.size() / 3, bytes.size() / 2 + 5, bytes.size() - 1}) {
    std::filesystem::remove(path);
    opsight::io::NativeTail tail(path.string());
    Totals got;
    double rss = 0;
    opsight::io::TailVisitor visitor;
    visitor.on_span = [&](const opsight::io::EndedSpan& span) {
      auto& entry = got[std::string(span.name)];
      ++entry.first;
      entry.second += span.duration_ns;
      EXPECT_EQ(span.pid, 42);
    };
    visitor.on_counter = [&](std::string_view name, int64_t, double value) {
      if (name == "process.rss_bytes") rss = value;
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
    EXPECT_EQ(got, expected) << "cut at " << cut;
    EXPECT_EQ(rss, 3e6);
  }
  std::filesystem::remove(path);
}

// What the tail reports of each thread span is what the whole-file reader shows: the same
// span id, parent id, Unix times and arguments.
TEST(NativeTail, ReportsTheReadersIdsParentsTimesAndArgs) {
  Trace trace = sample();
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
