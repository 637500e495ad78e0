// The time index of files the recorder writes (docs/native-format.md, "Time index"): a
// session that stops ends its file with the index; a process killed with SIGKILL leaves
// none, and a window read rebuilds it by a scan. Either way a window read equals the whole
// file read and cut to the window.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <set>
#include <string>
#include <thread>

#include "format/chunk_index.hpp"
#include "io/io.hpp"
#include "opsight/opsight.hpp"

namespace {

using opsight::io::ReadResult;
using opsight::io::TimeWindow;
using opsight::trace::Trace;

std::string run_extra(const Trace& trace, std::string_view key) {
  for (const auto& [name, value] : trace.run.extra)
    if (name == key) return value;
  return {};
}

// Every slice by content (track ids aside: a window read creates tracks in another order).
std::multiset<std::string> slices_of(const Trace& trace) {
  std::multiset<std::string> slices;
  for (size_t row = 0; row < trace.slices.size(); ++row) {
    const auto parent = trace.slices.parent[row];
    slices.insert(
        std::to_string(trace.tracks[trace.slices.track[row]].tid) + " " +
        std::string(trace.str(trace.slices.name[row])) + " " +
        std::to_string(trace.slices.ts[row]) + "+" + std::to_string(trace.slices.dur[row]) +
        " depth " + std::to_string(trace.slices.depth[row]) + " parent " +
        (parent == opsight::trace::kNoRow ? "-" : std::to_string(trace.slices.ts[parent])) +
        " id " + std::to_string(trace.slices.span_id[row]) + " flags " +
        std::to_string(trace.slices.flags[row]));
  }
  return slices;
}

void expect_windows_equal_the_whole_read_cut(const std::string& bytes, bool indexed) {
  ReadResult whole = opsight::io::read_native(bytes);
  ASSERT_TRUE(whole.ok());
  auto [first, last] = whole.trace.time_bounds();
  int64_t span = last - first;
  ASSERT_GT(span, 0);
  // Not every window need hold a span (a loaded machine can pause both recording threads
  // for longer than a window: it happened under ASan at a load of 8), but together they do,
  // or the comparison below proves nothing.
  size_t compared = 0;
  for (int part = 0; part < 10; part += 3) {
    TimeWindow window{span * part / 10, span * part / 10 + span / 20};
    SCOPED_TRACE(std::to_string(window.from_ns) + ".." + std::to_string(window.to_ns));
    ReadResult in_window = opsight::io::read_native(bytes, window);
    ASSERT_TRUE(in_window.ok());
    std::string note = run_extra(in_window.trace, "native_index");
    if (indexed)
      EXPECT_EQ(note, "read");
    else
      EXPECT_EQ(note.rfind("rebuilt by a scan", 0), 0u) << note;
    Trace expected = opsight::io::read_native(bytes).trace;
    opsight::trace::keep_time_window(expected, first + window.from_ns, first + window.to_ns,
                                     opsight::trace::WindowRule::kOverlaps);
    EXPECT_EQ(slices_of(in_window.trace), slices_of(expected));
    EXPECT_EQ(in_window.trace.instants.size(), expected.instants.size());
    compared += expected.slices.size();
  }
  EXPECT_GT(compared, 0u);
}

void record_nested_spans(int rounds) {
  for (int round = 0; round < rounds || rounds < 0; ++round) {
    OPSIGHT_SPAN("outer");
    for (int i = 0; i < 50; ++i) {
      OPSIGHT_SPAN("inner");
      if (i % 10 == 0) {
        OPSIGHT_SPAN("leaf");
      }
    }
    if (rounds < 0) std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

TEST(NativeIndexSession, AStoppedSessionEndsItsFileWithTheIndex) {
  auto path = std::filesystem::temp_directory_path() /
              ("opsight_index_stopped_" + std::to_string(getpid()) + ".opsight");
  {
    opsight::SessionOptions options;
    options.output = path.string();
    options.flush_interval_ms = 5;  // many flush rounds: many chunks per thread
    opsight::Session session(options);
    ASSERT_TRUE(session.ok());
    std::thread worker([] { record_nested_spans(400); });
    for (int i = 0; i < 20; ++i) {
      record_nested_spans(20);
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    worker.join();
    ASSERT_TRUE(session.stop());
  }
  std::string error;
  auto bytes = opsight::io::read_file_bytes(path.string(), &error);
  ASSERT_TRUE(bytes) << error;
  std::string problem;
  auto index = opsight::format::read_index(*bytes, &problem);
  ASSERT_TRUE(index) << problem;
  size_t events_chunks = 0;
  for (const auto& entry : *index)
    events_chunks += entry.type == static_cast<uint32_t>(opsight::format::ChunkType::kEvents);
  EXPECT_GT(events_chunks, 2u);
  expect_windows_equal_the_whole_read_cut(*bytes, true);
  std::filesystem::remove(path);
}

TEST(NativeIndexSession, TheIndexIsRebuiltByAScanAfterSigkill) {
  auto path = std::filesystem::temp_directory_path() /
              ("opsight_index_killed_" + std::to_string(getpid()) + ".opsight");
  std::filesystem::remove(path);
  pid_t child = fork();
  if (child == 0) {
    opsight::SessionOptions options;
    options.output = path.string();
    options.flush_interval_ms = 5;
    opsight::Session session(options);
    if (!session.ok()) _exit(3);
    record_nested_spans(-1);  // until killed
    _exit(4);
  }
  ASSERT_GT(child, 0);
  // Until the file holds several flush rounds, then kill it where it stands.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  std::error_code size_error;
  while (std::chrono::steady_clock::now() < deadline &&
         (!std::filesystem::exists(path) ||
          std::filesystem::file_size(path, size_error) < (size_t{256} << 10)))
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  ASSERT_EQ(kill(child, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status)) << "the child ended on its own, status " << status;

  std::string error;
  auto bytes = opsight::io::read_file_bytes(path.string(), &error);
  ASSERT_TRUE(bytes) << error;
  std::string problem;
  EXPECT_FALSE(opsight::format::read_index(*bytes, &problem));
  ReadResult whole = opsight::io::read_native(*bytes);
  EXPECT_FALSE(whole.trace.run.complete);
  expect_windows_equal_the_whole_read_cut(*bytes, false);
  std::filesystem::remove(path);
}

}  // namespace
