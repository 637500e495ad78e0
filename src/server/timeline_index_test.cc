// Golden tests of the timeline's level-of-detail index: small traces in, the exact blocks
// of each tile out (rendered as text), plus properties checked on a random nested trace.
#include "server/timeline_index.hpp"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <tuple>
#include <vector>

namespace opsight::server {
namespace {

using SliceSpec = std::tuple<int64_t, int64_t, std::string>;  // ts, dur, name

trace::Trace trace_of(const std::vector<SliceSpec>& slices) {
  trace::Trace trace;
  trace::TrackId track = trace.thread_track(1, 1);
  for (const auto& [ts, dur, name] : slices)
    trace.slices.add(ts, dur, trace.intern(name), 0, track);
  trace.finalize();
  return trace;
}

// "d0: [0,1100) s x6 | [1200,1900) s x4" per depth, one line each.
std::string render(const trace::Trace& trace, const Tile& tile) {
  std::string text;
  for (size_t depth = 0; depth < tile.blocks.size(); ++depth) {
    text += "d" + std::to_string(depth) + ":";
    for (size_t i = 0; i < tile.blocks[depth].size(); ++i) {
      const TimelineBlock& block = tile.blocks[depth][i];
      text += std::string(i == 0 ? " " : " | ") + "[" + std::to_string(block.start_ns) + "," +
              std::to_string(block.end_ns) + ") " +
              std::string(trace.str(trace.slices.name[block.row])) + " x" +
              std::to_string(block.count);
    }
    text += "\n";
  }
  return text;
}

TEST(TimelineIndex, FinestResolutionGivesEverySliceByDepth) {
  trace::Trace trace =
      trace_of({{0, 1000, "A"}, {100, 100, "b"}, {300, 100, "c"}, {5000, 50, "D"}});
  TimelineIndex index(trace);
  Tile tile = index.tile({0, 0, 10'000, 1});
  EXPECT_EQ(render(trace, tile),
            "d0: [0,1000) A x1 | [5000,5050) D x1\n"
            "d1: [100,200) b x1 | [300,400) c x1\n");
  EXPECT_EQ(tile.level_width_ns, 0);
  EXPECT_EQ(index.depth_count(0), 2u);
  EXPECT_EQ(index.slice_count(0), 4u);
}

// Ten 100 ns slices every 200 ns, then a 5 µs one.
std::vector<SliceSpec> dense_then_wide() {
  std::vector<SliceSpec> slices;
  for (int i = 0; i < 10; ++i) slices.emplace_back(i * 200, 100, "s");
  slices.emplace_back(3000, 5000, "big");
  return slices;
}

TEST(TimelineIndex, GoldenLevelsOfDenseSlices) {
  trace::Trace trace = trace_of(dense_then_wide());
  TimelineIndex index(trace);
  // Level 1 (1 µs) has 3 blocks (kept: at most half of 11); level 2 (4 µs) has 2 (not
  // half of 3: skipped); level 3 (16 µs) has 1 and covers the whole row.
  EXPECT_EQ(index.level_widths(0, 0), (std::vector<int64_t>{0, 1000, 16000}));
  EXPECT_EQ(render(trace, index.tile({0, 0, 8000, 1000})),
            "d0: [0,1100) s x6 | [1200,1900) s x4 | [3000,8000) big x1\n");
  EXPECT_EQ(render(trace, index.tile({0, 0, 8000, 4000})),
            "d0: [0,1900) s x10 | [3000,8000) big x1\n");
  Tile coarsest = index.tile({0, 0, 8000, 16000});
  EXPECT_EQ(render(trace, coarsest), "d0: [0,8000) big x11\n");
  EXPECT_EQ(coarsest.level_width_ns, 16000);
  EXPECT_EQ(coarsest.items_scanned, 1u);
}

TEST(TimelineIndex, GoldenWindowKeepsOnlyWhatItTouches) {
  trace::Trace trace = trace_of(dense_then_wide());
  TimelineIndex index(trace);
  EXPECT_EQ(render(trace, index.tile({0, 1250, 1650, 1})),
            "d0: [1200,1300) s x1 | [1400,1500) s x1 | [1600,1700) s x1\n");
  EXPECT_EQ(render(trace, index.tile({0, 8001, 9000, 1})), "d0:\n");
  // A slice that starts before the window and ends inside it is part of it.
  EXPECT_EQ(render(trace, index.tile({0, 7000, 9000, 10})), "d0: [3000,8000) big x1\n");
}

TEST(TimelineIndex, SparseRowsKeepNoLevels) {
  trace::Trace trace = trace_of({{0, 10, "a"}, {100'000, 10, "b"}, {200'000, 10, "c"}});
  TimelineIndex index(trace);
  EXPECT_EQ(index.level_widths(0, 0), (std::vector<int64_t>{0, 256'000}));
  EXPECT_EQ(render(trace, index.tile({0, 0, 300'000, 500})),
            "d0: [0,10) a x1 | [100000,100010) b x1 | [200000,200010) c x1\n");
}

TEST(TimelineIndex, GoldenCounterPoints) {
  trace::Trace trace;
  uint32_t counter = trace.counter_track(1, "rss", "bytes");
  for (int i = 0; i <= 10; ++i) trace.counters.add(i * 10, counter, i);
  trace.finalize();
  TimelineIndex index(trace);
  // Few samples: each one, plus the one before and the one after the window.
  auto raw = index.counter_points({counter, 25, 55, 1});
  ASSERT_EQ(raw.size(), 5u);
  EXPECT_EQ(raw.front(), (CounterPoint{20, 2, 2, 2, 2}));
  EXPECT_EQ(raw.back(), (CounterPoint{60, 6, 6, 6, 6}));
  // Dense: per 20 ns bucket, first / min / max / last.
  auto buckets = index.counter_points({counter, 0, 100, 20});
  std::vector<CounterPoint> expected = {{0, 0, 0, 1, 1},  {20, 2, 2, 3, 3}, {40, 4, 4, 5, 5},
                                        {60, 6, 6, 7, 7}, {80, 8, 8, 9, 9}, {100, 10, 10, 10, 10}};
  EXPECT_EQ(buckets, expected);
}

// A random nested trace: roots with random gaps, each with random children, to depth 4.
void add_random_slices(std::mt19937_64& random, trace::Trace& trace, trace::TrackId track,
                       int64_t begin, int64_t end, int depth) {
  int64_t at = begin;
  std::uniform_int_distribution<int64_t> gap(0, 3000), width(1, 20'000);
  while (true) {
    at += gap(random);
    int64_t dur = std::min(width(random) >> (depth * 2), end - at);
    if (dur <= 0 || at + dur > end) break;
    trace.slices.add(at, dur, trace.intern("n" + std::to_string(depth)), 0, track);
    if (depth < 4) add_random_slices(random, trace, track, at, at + dur, depth + 1);
    at += dur;
  }
}

TEST(TimelineIndex, TilesOfARandomTraceKeepEverySliceAndEveryWideOne) {
  std::mt19937_64 random(7);
  trace::Trace trace;
  trace::TrackId track = trace.thread_track(1, 1);
  add_random_slices(random, trace, track, 0, 20'000'000, 0);
  trace.finalize();
  ASSERT_GT(trace.slices.size(), 1000u);
  TimelineIndex index(trace);
  auto [first, last] = trace.time_bounds();
  for (int64_t resolution : {1, 100, 999, 1000, 3000, 4000, 50'000, 1'000'000}) {
    Tile tile = index.tile({track, first, last, resolution});
    uint64_t covered = 0;
    for (size_t depth = 0; depth < tile.blocks.size(); ++depth) {
      const auto& blocks = tile.blocks[depth];
      for (size_t i = 0; i < blocks.size(); ++i) {
        covered += blocks[i].count;
        if (i > 0) {
          EXPECT_LE(blocks[i - 1].end_ns, blocks[i].start_ns);
        }
      }
      int64_t pixels = (last - first) / resolution + 1;
      EXPECT_LE(static_cast<int64_t>(blocks.size()), 2 * pixels + 2) << "resolution " << resolution;
    }
    EXPECT_EQ(covered, trace.slices.size()) << "resolution " << resolution;
    // A slice at least a pixel wide is always its own item.
    std::vector<bool> shown(trace.slices.size(), false);
    for (const auto& blocks : tile.blocks)
      for (const TimelineBlock& block : blocks)
        if (block.count == 1) shown[block.row] = true;
    for (trace::RowIndex row = 0; row < trace.slices.size(); ++row)
      if (trace.slices.dur[row] >= resolution) {
        EXPECT_TRUE(shown[row]) << "row " << row << " at resolution " << resolution;
      }
  }
  // A window in the middle holds every slice that touches it.
  const int64_t window_start = 5'000'000, window_end = 5'200'000;
  Tile tile = index.tile({track, window_start, window_end, 1});
  uint64_t touching = 0;
  for (trace::RowIndex row = 0; row < trace.slices.size(); ++row)
    if (trace.slices.end(row) >= window_start && trace.slices.ts[row] <= window_end) ++touching;
  uint64_t returned = 0;
  for (const auto& blocks : tile.blocks) returned += blocks.size();
  EXPECT_EQ(returned, touching);
}

}  // namespace
}  // namespace opsight::server
