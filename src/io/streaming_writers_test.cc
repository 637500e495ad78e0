// The writers' streaming forms (into a ByteSink) against their string forms: the same
// bytes, handed over in pieces of about 1 MiB; a sink that refuses stops the write; and
// write_trace_file, which streams through a FileSink, never leaves a torn file.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "io/io.hpp"

namespace {

using opsight::io::ByteSink;
using opsight::trace::ArgValue;
using opsight::trace::Trace;

// Several MiB in every format: requests > forward > two operators on four threads, an
// argument per request, an instant and a counter sample every 64 requests.
Trace large_trace(int requests_per_thread) {
  Trace trace;
  trace.run.command_line = "python serve.py";
  const auto request_name = trace.intern("handle_request");
  const auto forward_name = trace.intern("forward");
  const auto linear = trace.intern("aten::linear");
  const auto relu = trace.intern("aten::relu");
  const auto category = trace.intern("python");
  const auto batch = trace.intern("batch");
  const auto miss = trace.intern("cache miss");
  for (int thread = 0; thread < 4; ++thread) {
    auto track = trace.thread_track(42, 100 + thread);
    int64_t t = 1000;
    for (int request = 0; request < requests_per_thread; ++request, t += 100) {
      auto row = trace.slices.add(t, 90, request_name, category, track);
      trace.slice_args.add(row, batch, ArgValue::of_int(request));
      trace.slices.add(t + 5, 80, forward_name, category, track);
      trace.slices.add(t + 10, 30, linear, 0, track);
      trace.slices.add(t + 45, 30, relu, 0, track);
      if (request % 64 == 0) {
        trace.instants.add(t + 95, miss, 0, track);
        trace.counters.add(t, trace.counter_track(42, "rss_bytes", "bytes"), 1.0 * request);
      }
    }
  }
  trace.finalize();
  return trace;
}

// Keeps every piece it is given; refuses (returns false) from piece `refuse_from` on.
class PieceSink final : public ByteSink {
 public:
  explicit PieceSink(size_t refuse_from = SIZE_MAX) : refuse_from_(refuse_from) {}
  bool write(std::string_view bytes) override {
    if (pieces.size() >= refuse_from_) return false;
    pieces.emplace_back(bytes);
    return true;
  }
  std::string joined() const {
    std::string all;
    for (const auto& piece : pieces) all += piece;
    return all;
  }
  std::vector<std::string> pieces;

 private:
  size_t refuse_from_;
};

struct Writer {
  const char* name;
  std::function<std::string(const Trace&)> to_string;
  std::function<bool(const Trace&, ByteSink&)> to_sink;
  const char* extension;
};

std::vector<Writer> writers() {
  return {
      {"native", [](const Trace& t) { return opsight::io::write_native(t); },
       [](const Trace& t, ByteSink& s) { return opsight::io::write_native(t, s); }, ".opsight"},
      {"chrome_json", [](const Trace& t) { return opsight::io::write_chrome_json(t); },
       [](const Trace& t, ByteSink& s) { return opsight::io::write_chrome_json(t, s); }, ".json"},
      {"perfetto", [](const Trace& t) { return opsight::io::write_perfetto(t); },
       [](const Trace& t, ByteSink& s) { return opsight::io::write_perfetto(t, s); }, ".pftrace"},
  };
}

constexpr size_t kMiB = size_t{1} << 20;

TEST(StreamingWriters, SinkFormGivesTheStringFormsBytesInBoundedPieces) {
  const Trace trace = large_trace(40'000);  // 640 k slices
  for (const auto& writer : writers()) {
    SCOPED_TRACE(writer.name);
    const std::string whole = writer.to_string(trace);
    ASSERT_GT(whole.size(), 4 * kMiB);
    PieceSink sink;
    ASSERT_TRUE(writer.to_sink(trace, sink));
    EXPECT_EQ(sink.joined(), whole);
    EXPECT_GE(sink.pieces.size(), whole.size() / (2 * kMiB));
    for (const auto& piece : sink.pieces) EXPECT_LE(piece.size(), kMiB + 64 * 1024);
  }
}

TEST(StreamingWriters, ARefusingSinkStopsTheWriteAfterAPrefix) {
  const Trace trace = large_trace(40'000);
  for (const auto& writer : writers()) {
    SCOPED_TRACE(writer.name);
    const std::string whole = writer.to_string(trace);
    PieceSink sink(/*refuse_from=*/2);
    EXPECT_FALSE(writer.to_sink(trace, sink));
    ASSERT_EQ(sink.pieces.size(), 2u);
    const std::string prefix = sink.joined();
    EXPECT_LT(prefix.size(), whole.size());
    EXPECT_EQ(whole.compare(0, prefix.size(), prefix), 0);
  }
}

TEST(StreamingWriters, WriteTraceFileWritesWhatTheStringFormWrites) {
  const Trace trace = large_trace(10'000);
  const auto folder =
      std::filesystem::temp_directory_path() / ("opsight-streaming-" + std::to_string(::getpid()));
  std::filesystem::create_directories(folder);
  for (const auto& writer : writers()) {
    SCOPED_TRACE(writer.name);
    const std::string path = (folder / (std::string("out") + writer.extension)).string();
    ASSERT_EQ(opsight::io::write_trace_file(trace, path), std::nullopt);
    std::string error;
    auto bytes = opsight::io::read_file_bytes(path, &error);
    ASSERT_TRUE(bytes) << error;
    EXPECT_EQ(*bytes, writer.to_string(trace));
  }
  std::filesystem::remove_all(folder);
}

// A disk that fills mid-write (a file size limit: write() fails with EFBIG) leaves the old
// file as it was, no temporary beside it, and an error that names the path.
TEST(StreamingWriters, AFailedWriteLeavesTheOldFileAndNoTemporary) {
  const Trace trace = large_trace(40'000);
  const auto folder = std::filesystem::temp_directory_path() /
                      ("opsight-streaming-full-" + std::to_string(::getpid()));
  std::filesystem::create_directories(folder);
  const std::string path = (folder / "out.json").string();
  ASSERT_EQ(opsight::io::write_file_bytes(path, "old"), std::nullopt);

  struct rlimit previous {};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &previous), 0);
  auto previous_handler = std::signal(SIGXFSZ, SIG_IGN);
  struct rlimit small = previous;
  small.rlim_cur = 2 * kMiB;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  auto error = opsight::io::write_trace_file(trace, path);
  ::setrlimit(RLIMIT_FSIZE, &previous);
  std::signal(SIGXFSZ, previous_handler);

  ASSERT_TRUE(error.has_value());
  EXPECT_NE(error->find(path), std::string::npos) << *error;
  EXPECT_NE(error->find("cannot write"), std::string::npos) << *error;
  std::string read_error;
  EXPECT_EQ(opsight::io::read_file_bytes(path, &read_error), std::optional<std::string>("old"));
  size_t entries = 0;
  for (const auto& entry : std::filesystem::directory_iterator(folder)) {
    static_cast<void>(entry);
    ++entries;
  }
  EXPECT_EQ(entries, 1u) << "a temporary was left beside " << path;
  std::filesystem::remove_all(folder);
}

}  // namespace
