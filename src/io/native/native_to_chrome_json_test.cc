// The streaming native -> Chrome JSON converter against the whole-file path: a native file
// read whole (read_native) and its streamed conversion read back (read_chrome_json) hold the
// same slices (name, time, duration, arguments), instants, counter samples and thread
// names; flows are counted as left out; a sink that refuses stops it with an error; a file
// that is not opsight's is an error naming it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <tuple>
#include <vector>

#include "io/io.hpp"

namespace {

using opsight::trace::ArgValue;
using opsight::trace::Trace;

Trace every_kind_of_row_trace() {
  Trace trace;
  trace.run.pid = 42;
  trace.run.command_line = "python serve.py";
  trace.run.has_unix_offset = true;
  trace.run.unix_offset_ns = 1'700'000'000'000'000'000;
  auto main_track = trace.thread_track(42, 42);
  trace.tracks[main_track].name = trace.intern("main");
  auto worker = trace.thread_track(42, 43);
  auto lane = trace.async_track(42, 42, 7, "task 7");
  auto queue = trace.process_async_track(42, 99, "queue");
  for (int i = 0; i < 3000; ++i) {
    int64_t ts = 10'000 + i * 1000;
    auto request =
        trace.slices.add(ts, 900, trace.intern("request"), trace.intern("http"), main_track);
    if (i % 3 == 0) {
      trace.slice_args.add(request, trace.intern("batch"), ArgValue::of_int(i));
      trace.slice_args.add(request, trace.intern("route"),
                           ArgValue::of_string(trace.intern("/v1/predict")));
      trace.slice_args.add(request, trace.intern("ratio"), ArgValue::of_double(0.25 * i));
    }
    auto model = trace.slices.add(ts + 100, 300 + i % 7, trace.intern(i % 2 ? "model" : "tok"), 0,
                                  main_track);
    trace.slices.add(ts + 150, 20, trace.intern("aten::mm"), trace.intern("cpu_op"), main_track);
    auto poll = trace.slices.add(ts + 50, 100, trace.intern("poll"), 0, worker);
    if (i % 10 == 0) trace.slices.add(ts, 5000, trace.intern("queued"), 0, queue);
    if (i % 5 == 0) trace.slices.add(ts + 10, 50, trace.intern("task step"), 0, lane);
    if (i % 7 == 0) {
      auto instant = trace.instants.add(ts + 200, trace.intern("cache miss"), 0, main_track);
      trace.instant_args.add(instant, trace.intern("key"), ArgValue::of_int(i));
    }
    if (i % 100 == 0) trace.flows.add(model, poll, 1000 + i);
    if (i % 50 == 0) trace.counters.add(ts, trace.counter_track(42, "process.rss_bytes"), 1e6 + i);
  }
  trace.finalize();
  return trace;
}

std::string arg_text(const Trace& trace, const opsight::trace::ArgTable& args, size_t arg) {
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

// Every slice as "name ts dur args...", sorted: what both paths must agree on.
std::vector<std::string> slices_of(const Trace& trace) {
  std::vector<std::string> rows;
  std::vector<std::vector<std::string>> args_of(trace.slices.size());
  for (size_t arg = 0; arg < trace.slice_args.size(); ++arg) {
    std::string key(trace.str(trace.slice_args.key[arg]));
    if (!key.starts_with("opsight."))
      args_of[trace.slice_args.owner[arg]].push_back(arg_text(trace, trace.slice_args, arg));
  }
  for (size_t row = 0; row < trace.slices.size(); ++row) {
    std::string text = std::string(trace.str(trace.slices.name[row])) + " " +
                       std::to_string(trace.slices.ts[row] + trace.run.unix_offset_ns) + " " +
                       std::to_string(trace.slices.dur[row]);
    std::vector<std::string>& args = args_of[row];
    std::sort(args.begin(), args.end());
    for (const auto& arg : args) text += " " + arg;
    rows.push_back(text);
  }
  std::sort(rows.begin(), rows.end());
  return rows;
}

std::vector<std::string> instants_of(const Trace& trace) {
  std::vector<std::string> rows;
  for (size_t row = 0; row < trace.instants.size(); ++row) {
    std::string text = std::string(trace.str(trace.instants.name[row])) + " " +
                       std::to_string(trace.instants.ts[row] + trace.run.unix_offset_ns);
    for (size_t arg = 0; arg < trace.instant_args.size(); ++arg)
      if (trace.instant_args.owner[arg] == row)
        text += " " + arg_text(trace, trace.instant_args, arg);
    rows.push_back(text);
  }
  std::sort(rows.begin(), rows.end());
  return rows;
}

std::vector<std::string> counters_of(const Trace& trace) {
  std::vector<std::string> rows;
  for (size_t row = 0; row < trace.counters.size(); ++row)
    rows.push_back(std::to_string(trace.counters.ts[row] + trace.run.unix_offset_ns) + " " +
                   std::to_string(trace.counters.value[row]));
  std::sort(rows.begin(), rows.end());
  return rows;
}

class StreamedConversionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = (std::filesystem::temp_directory_path() /
             ("opsight-streamed-" + std::to_string(::getpid()) + ".opsight"))
                .string();
    bytes_ = opsight::io::write_native(every_kind_of_row_trace());
    std::FILE* file = std::fopen(path_.c_str(), "wb");
    ASSERT_NE(file, nullptr);
    std::fwrite(bytes_.data(), 1, bytes_.size(), file);
    std::fclose(file);
  }
  void TearDown() override { std::filesystem::remove(path_); }
  std::string path_;
  std::string bytes_;
};

TEST_F(StreamedConversionTest, HoldsWhatTheWholeFilePathHolds) {
  opsight::io::StringSink sink;
  opsight::io::StreamedConversion counts;
  ASSERT_EQ(opsight::io::convert_native_to_chrome_json(path_, sink, &counts), std::nullopt);
  auto whole = opsight::io::read_native(bytes_);
  ASSERT_TRUE(whole.ok());
  auto streamed = opsight::io::read_chrome_json(sink.out);
  ASSERT_TRUE(streamed.ok()) << streamed.error->to_string("streamed");
  EXPECT_FALSE(streamed.damage) << streamed.damage->to_string("streamed");

  EXPECT_EQ(slices_of(streamed.trace), slices_of(whole.trace));
  EXPECT_EQ(instants_of(streamed.trace), instants_of(whole.trace));
  EXPECT_EQ(counters_of(streamed.trace), counters_of(whole.trace));
  EXPECT_EQ(counts.slices + counts.async_slices, whole.trace.slices.size());
  EXPECT_EQ(counts.instants, whole.trace.instants.size());
  EXPECT_EQ(counts.counter_samples, whole.trace.counters.size());
  EXPECT_EQ(counts.flows_left_out, 2 * whole.trace.flows.size());  // an event per end
  EXPECT_TRUE(counts.complete);
  EXPECT_EQ(streamed.trace.run.command_line, "python serve.py");

  std::vector<std::string> thread_names;
  for (const auto& track : streamed.trace.tracks)
    if (track.name != 0) thread_names.push_back(std::string(streamed.trace.str(track.name)));
  EXPECT_NE(std::find(thread_names.begin(), thread_names.end(), "main"), thread_names.end());
  EXPECT_NE(std::find(thread_names.begin(), thread_names.end(), "task 7"), thread_names.end());
}

TEST_F(StreamedConversionTest, ASinkThatRefusesStopsItWithAnError) {
  class Refusing final : public opsight::io::ByteSink {
   public:
    bool write(std::string_view) override { return false; }
  } sink;
  auto problem = opsight::io::convert_native_to_chrome_json(path_, sink);
  ASSERT_TRUE(problem.has_value());
  EXPECT_NE(problem->find("refused"), std::string::npos) << *problem;
}

TEST_F(StreamedConversionTest, AFileThatIsNotOpsightsIsAnErrorNamingIt) {
  std::FILE* file = std::fopen(path_.c_str(), "wb");
  std::fputs("{\"traceEvents\": []}", file);
  std::fclose(file);
  opsight::io::StringSink sink;
  auto problem = opsight::io::convert_native_to_chrome_json(path_, sink);
  ASSERT_TRUE(problem.has_value());
  EXPECT_NE(problem->find(path_), std::string::npos) << *problem;
  EXPECT_NE(problem->find("not an opsight file"), std::string::npos) << *problem;
  auto missing = opsight::io::convert_native_to_chrome_json(path_ + ".missing", sink);
  ASSERT_TRUE(missing.has_value());
  EXPECT_NE(missing->find("cannot open"), std::string::npos) << *missing;
}

}  // namespace
