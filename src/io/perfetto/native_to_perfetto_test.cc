// The streaming native -> Perfetto converter against write_perfetto of the whole trace: both
// outputs read back by read_perfetto hold the same slices (track, name, category, time,
// duration, depth, parent, arguments), instants and counter samples; flows are counted as
// left out; a refused sink and a file that is not opsight's are errors naming why.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "io/io.hpp"

namespace {

using opsight::trace::ArgValue;
using opsight::trace::Trace;

// Nested spans on two threads, an asyncio lane, a process async id with nested spans,
// arguments of each type, instants of each scope, counters, a flow, and a span never ended.
Trace streamed_pftrace_model() {
  Trace trace;
  trace.run.pid = 42;
  trace.run.command_line = "python serve.py";
  trace.run.has_unix_offset = true;
  trace.run.unix_offset_ns = 1'700'000'000'000'000'000;
  auto main_track = trace.thread_track(42, 42);
  trace.tracks[main_track].name = trace.intern("main");
  auto worker = trace.thread_track(42, 43);
  auto lane = trace.async_track(42, 42, 7, "task 7");
  auto queue = trace.process_async_track(42, 99, "queued");
  for (int i = 0; i < 1500; ++i) {
    const int64_t ts = 10'000 + i * 1000;
    auto request =
        trace.slices.add(ts, 900, trace.intern("request"), trace.intern("http"), main_track);
    if (i % 3 == 0) {
      trace.slice_args.add(request, trace.intern("batch"), ArgValue::of_int(i));
      trace.slice_args.add(request, trace.intern("route"),
                           ArgValue::of_string(trace.intern("/v1/" + std::to_string(i))));
      trace.slice_args.add(request, trace.intern("ratio"), ArgValue::of_double(0.25 * i));
      trace.slice_args.add(request, trace.intern("hit"), ArgValue::of_bool(i % 2 == 0));
    }
    auto model = trace.slices.add(ts + 100, 300 + i % 7, trace.intern(i % 2 ? "model" : "tok"), 0,
                                  main_track);
    trace.slices.add(ts + 100, 20, trace.intern("aten::mm"), trace.intern("cpu_op"), main_track);
    auto poll = trace.slices.add(ts + 50, 100, trace.intern("poll"), 0, worker);
    if (i % 10 == 0) {
      trace.slices.add(ts, 5000, trace.intern("queued"), 0, queue);
      trace.slices.add(ts + 10, 200, trace.intern("dequeue"), 0, queue);
    }
    if (i % 5 == 0) trace.slices.add(ts + 10, 50, trace.intern("task step"), 0, lane);
    if (i % 7 == 0) {
      auto scope = static_cast<opsight::trace::InstantScope>(i % 3);
      auto instant = trace.instants.add(ts + 200, trace.intern("cache miss"), 0, main_track, scope);
      trace.instant_args.add(instant, trace.intern("key"), ArgValue::of_int(i));
    }
    if (i % 100 == 0) trace.flows.add(model, poll, 1000 + i);
    if (i % 50 == 0) trace.counters.add(ts, trace.counter_track(42, "process.rss_bytes"), 1e6 + i);
  }
  auto open = trace.slices.add(2'000'000, 500, trace.intern("never ended"), 0, worker);
  trace.slices.flags[open] |= opsight::trace::kSliceUnfinished;
  trace.finalize();
  return trace;
}

std::string pftrace_arg_text(const Trace& trace, const opsight::trace::ArgTable& args, size_t arg) {
  const ArgValue& value = args.value[arg];
  std::string text = std::string(trace.str(args.key[arg])) + "=";
  switch (value.type) {
    case opsight::trace::ArgType::kInt:
      return text + std::to_string(value.int_value);
    case opsight::trace::ArgType::kDouble:
      return text + std::to_string(value.double_value);
    case opsight::trace::ArgType::kBool:
      return text + (value.int_value ? "true" : "false");
    case opsight::trace::ArgType::kString:
      return text + std::string(trace.str(value.string_value));
  }
  return text;
}

std::string pftrace_track_text(const Trace& trace, opsight::trace::TrackId track) {
  const auto& row = trace.tracks[track];
  return std::to_string(row.pid) + "/" + std::to_string(row.tid) + "/" +
         std::to_string(static_cast<int>(row.kind)) + "/" + trace.track_label(track);
}

// Every slice as "track name category ts dur depth parent args...", sorted.
std::vector<std::string> pftrace_slices_of(const Trace& trace) {
  std::vector<std::vector<std::string>> args_of(trace.slices.size());
  for (size_t arg = 0; arg < trace.slice_args.size(); ++arg)
    args_of[trace.slice_args.owner[arg]].push_back(pftrace_arg_text(trace, trace.slice_args, arg));
  std::vector<std::string> rows;
  const auto& slices = trace.slices;
  for (size_t row = 0; row < slices.size(); ++row) {
    std::string text = pftrace_track_text(trace, slices.track[row]) + " " +
                       std::string(trace.str(slices.name[row])) + " " +
                       std::string(trace.str(slices.category[row])) + " " +
                       std::to_string(slices.ts[row]) + " " + std::to_string(slices.dur[row]) +
                       " " + std::to_string(slices.depth[row]) + " " +
                       (slices.parent[row] == opsight::trace::kNoRow
                            ? std::string("-")
                            : std::string(trace.str(slices.name[slices.parent[row]])));
    std::sort(args_of[row].begin(), args_of[row].end());
    for (const auto& arg : args_of[row]) text += " " + arg;
    rows.push_back(text);
  }
  std::sort(rows.begin(), rows.end());
  return rows;
}

std::vector<std::string> pftrace_instants_of(const Trace& trace) {
  std::vector<std::string> rows;
  for (size_t row = 0; row < trace.instants.size(); ++row) {
    std::string text = pftrace_track_text(trace, trace.instants.track[row]) + " " +
                       std::string(trace.str(trace.instants.name[row])) + " " +
                       std::to_string(trace.instants.ts[row]) + " " +
                       std::to_string(static_cast<int>(trace.instants.scope[row]));
    for (size_t arg = 0; arg < trace.instant_args.size(); ++arg)
      if (trace.instant_args.owner[arg] == row)
        text += " " + pftrace_arg_text(trace, trace.instant_args, arg);
    rows.push_back(text);
  }
  std::sort(rows.begin(), rows.end());
  return rows;
}

std::vector<std::string> pftrace_counters_of(const Trace& trace) {
  std::vector<std::string> rows;
  for (size_t row = 0; row < trace.counters.size(); ++row)
    rows.push_back(
        std::string(trace.str(trace.counter_tracks[trace.counters.counter_track[row]].name)) + " " +
        std::to_string(trace.counters.ts[row]) + " " + std::to_string(trace.counters.value[row]));
  std::sort(rows.begin(), rows.end());
  return rows;
}

class StreamedPerfettoTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = (std::filesystem::temp_directory_path() /
             ("opsight-streamed-pftrace-" + std::to_string(::getpid()) + ".opsight"))
                .string();
    bytes_ = opsight::io::write_native(streamed_pftrace_model());
    std::FILE* file = std::fopen(path_.c_str(), "wb");
    ASSERT_NE(file, nullptr);
    std::fwrite(bytes_.data(), 1, bytes_.size(), file);
    std::fclose(file);
  }
  void TearDown() override { std::filesystem::remove(path_); }
  std::string path_;
  std::string bytes_;
};

TEST_F(StreamedPerfettoTest, ReadsBackAsTheWholeTracesPerfettoFile) {
  opsight::io::StringSink sink;
  opsight::io::StreamedConversion counts;
  ASSERT_EQ(opsight::io::convert_native_to_perfetto(path_, sink, &counts), std::nullopt);
  auto native = opsight::io::read_native(bytes_);
  ASSERT_TRUE(native.ok());
  auto whole = opsight::io::read_perfetto(opsight::io::write_perfetto(native.trace));
  ASSERT_TRUE(whole.ok());
  auto streamed = opsight::io::read_perfetto(sink.out);
  ASSERT_TRUE(streamed.ok()) << streamed.error->to_string("streamed");
  EXPECT_FALSE(streamed.damage) << streamed.damage->to_string("streamed");

  EXPECT_EQ(pftrace_slices_of(streamed.trace), pftrace_slices_of(whole.trace));
  EXPECT_EQ(pftrace_instants_of(streamed.trace), pftrace_instants_of(whole.trace));
  EXPECT_EQ(pftrace_counters_of(streamed.trace), pftrace_counters_of(whole.trace));
  EXPECT_EQ(streamed.trace.run.unix_offset_ns, whole.trace.run.unix_offset_ns);
  EXPECT_EQ(counts.slices + counts.async_slices, native.trace.slices.size());
  EXPECT_EQ(counts.instants, native.trace.instants.size());
  EXPECT_EQ(counts.counter_samples, native.trace.counters.size());
  EXPECT_EQ(counts.flows_left_out, 2 * native.trace.flows.size());  // an event per end
  EXPECT_TRUE(counts.complete);
}

TEST_F(StreamedPerfettoTest, ASinkThatRefusesStopsItWithAnError) {
  class Refusing final : public opsight::io::ByteSink {
   public:
    bool write(std::string_view) override { return false; }
  } sink;
  auto problem = opsight::io::convert_native_to_perfetto(path_, sink);
  ASSERT_TRUE(problem.has_value());
  EXPECT_NE(problem->find("refused"), std::string::npos) << *problem;
}

TEST_F(StreamedPerfettoTest, AFileThatIsNotOpsightsIsAnErrorNamingIt) {
  std::FILE* file = std::fopen(path_.c_str(), "wb");
  std::fputs("{\"traceEvents\": []}", file);
  std::fclose(file);
  opsight::io::StringSink sink;
  auto problem = opsight::io::convert_native_to_perfetto(path_, sink);
  ASSERT_TRUE(problem.has_value());
  EXPECT_NE(problem->find(path_), std::string::npos) << *problem;
}

}  // namespace
