// The recorder on its own: the byte stream it produces is well-formed native format.
// (Decoding it into a trace is tested in src/session/session_test.cc.)
#include "record/recorder.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "format/chunk_codec.hpp"
#include "opsight/opsight.hpp"
#include "record/clock.hpp"
#include "record/slow_sink_for_tests.hpp"

namespace {

using opsight::format::ChunkType;

std::vector<ChunkType> chunk_types(std::string_view bytes) {
  std::vector<ChunkType> types;
  uint64_t offset = sizeof(opsight::format::FileHeader);
  std::string problem;
  while (offset < bytes.size()) {
    auto chunk = opsight::format::read_chunk(bytes, offset, &problem);
    EXPECT_TRUE(chunk.has_value()) << problem << " at " << offset;
    if (!chunk) break;
    types.push_back(chunk->type);
    offset = chunk->payload_offset + chunk->payload.size();
  }
  return types;
}

TEST(Recorder, StreamStartsWithHeaderAndEndsWithStatsThenTheIndex) {
  auto sink = std::make_unique<opsight::record::MemorySink>();
  ASSERT_FALSE(opsight::record::start_recording([&](std::string*) { return std::move(sink); }, {})
                   .has_value());
  EXPECT_TRUE(opsight::recording());
  { OPSIGHT_SPAN("a"); }
  auto result = opsight::record::stop_recording();
  EXPECT_FALSE(opsight::recording());
  ASSERT_TRUE(result.sink);
  auto& bytes = static_cast<opsight::record::MemorySink&>(*result.sink).bytes();
  ASSERT_GE(bytes.size(), 16u);
  EXPECT_EQ(std::memcmp(bytes.data(), opsight::format::kFileMagic, 8), 0);
  auto types = chunk_types(bytes);
  ASSERT_FALSE(types.empty());
  EXPECT_EQ(types.front(), ChunkType::kRunInfo);
  // The footer, then the time index of every chunk before it and the trailer that points
  // at it (docs/native-format.md, "Time index").
  ASSERT_GE(types.size(), 3u);
  EXPECT_EQ(types[types.size() - 3], ChunkType::kStats);
  EXPECT_EQ(types[types.size() - 2], ChunkType::kIndex);
  EXPECT_EQ(types.back(), ChunkType::kIndexTrailer);
  EXPECT_NE(std::find(types.begin(), types.end(), ChunkType::kEvents), types.end());
  EXPECT_NE(std::find(types.begin(), types.end(), ChunkType::kNames), types.end());
}

TEST(Recorder, SecondStartIsRefusedAndStopWithoutStartIsHarmless) {
  EXPECT_FALSE(opsight::record::stop_recording().sink);
  ASSERT_FALSE(opsight::record::start_recording(
      [](std::string*) { return std::make_unique<opsight::record::MemorySink>(); }, {}));
  auto refused = opsight::record::start_recording(
      [](std::string*) { return std::make_unique<opsight::record::MemorySink>(); }, {});
  ASSERT_TRUE(refused.has_value());
  EXPECT_NE(refused->find("already"), std::string::npos);
  opsight::record::stop_recording();
}

TEST(Recorder, ClockSyncIsMonotonicAndTicksAdvance) {
  auto first = opsight::record::take_clock_sync();
  std::this_thread::sleep_for(std::chrono::milliseconds(1));
  auto second = opsight::record::take_clock_sync();
  EXPECT_GT(second.ticks, first.ticks);
  EXPECT_GE(second.monotonic_ns - first.monotonic_ns, 1'000'000);
  EXPECT_GT(second.realtime_ns, 1'600'000'000'000'000'000);  // after 2020
  double rate = opsight::record::measure_ticks_per_second(1'000'000);
  EXPECT_GT(rate, 1e8);
  EXPECT_LT(rate, 1e11);
}

void flood() {
  for (int i = 0; i < 50000; ++i) {
    OPSIGHT_SPAN("flood");
  }
}

// The SessionStats of every chunk of `type`, in file order.
std::vector<opsight::format::SessionStats> stats_chunks(std::string_view bytes, ChunkType type) {
  std::vector<opsight::format::SessionStats> found;
  uint64_t offset = sizeof(opsight::format::FileHeader);
  std::string problem;
  while (auto chunk = opsight::format::read_chunk(bytes, offset, &problem)) {
    if (chunk->type == type) {
      opsight::format::SessionStats stats{};
      std::memcpy(&stats, chunk->payload.data(), sizeof(stats));
      found.push_back(stats);
    }
    offset = chunk->payload_offset + chunk->payload.size();
  }
  return found;
}

TEST(Recorder, ASlowWriterMakesThreadsDropAndEveryDropIsCountedEvenOfExitedThreads) {
  opsight::record::RecordingOptions options;
  options.buffer_bytes = 1;  // the minimum: two chunks in flight
  options.flush_interval_ms = 1;
  ASSERT_FALSE(opsight::record::start_recording(
      [](std::string*) { return std::make_unique<opsight::record::SlowSinkForTests>(); }, options));
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) threads.emplace_back(flood);
  for (auto& thread : threads) thread.join();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the writer forgets them
  uint64_t dropped_while_running = opsight::record::events_dropped_so_far();
  auto result = opsight::record::stop_recording();
  ASSERT_TRUE(result.sink);
  EXPECT_GT(dropped_while_running, 0u);
  EXPECT_EQ(result.events_dropped, dropped_while_running);
  std::string_view bytes = static_cast<opsight::record::MemorySink&>(*result.sink).bytes();
  auto footer = stats_chunks(bytes, ChunkType::kStats);
  ASSERT_EQ(footer.size(), 1u);
  EXPECT_EQ(footer[0].events_dropped, dropped_while_running);
  EXPECT_GE(footer[0].thread_count, 4u);
  // The drops were also written as they grew, for a file whose footer never comes: counts
  // that only rise, each below or at the final one.
  auto so_far = stats_chunks(bytes, ChunkType::kDropsSoFar);
  ASSERT_FALSE(so_far.empty());
  EXPECT_GT(so_far.front().events_dropped, 0u);
  for (size_t i = 1; i < so_far.size(); ++i)
    EXPECT_GT(so_far[i].events_dropped, so_far[i - 1].events_dropped);
  EXPECT_LE(so_far.back().events_dropped, dropped_while_running);
}

TEST(Recorder, FileSinkReportsUnwritablePath) {
  std::string error;
  EXPECT_EQ(opsight::record::open_file_sink("/nonexistent-dir/x.opsight", &error), nullptr);
  EXPECT_NE(error.find("/nonexistent-dir/x.opsight"), std::string::npos);
}

}  // namespace
