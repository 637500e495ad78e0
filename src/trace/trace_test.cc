// The trace model: interning, tracks, and what finalize() guarantees to every reader.
#include "trace/trace.hpp"

#include <gtest/gtest.h>

#include <set>

namespace {

// Columns use their own allocator; compare their contents as plain vectors.
template <typename ColumnType>
std::vector<typename ColumnType::value_type> values(const ColumnType& column) {
  return {column.begin(), column.end()};
}

using opsight::trace::ArgValue;
using opsight::trace::kNoRow;
using opsight::trace::Trace;

TEST(StringTable, InternsOnceAndSurvivesGrowth) {
  opsight::trace::StringTable strings;
  EXPECT_EQ(strings.get(0), "");
  EXPECT_EQ(strings.intern(""), 0u);
  std::vector<opsight::trace::StringId> ids;
  for (int i = 0; i < 5000; ++i) ids.push_back(strings.intern("name " + std::to_string(i)));
  for (int i = 0; i < 5000; ++i) {
    EXPECT_EQ(strings.intern("name " + std::to_string(i)), ids[i]);  // short strings: SSO
    EXPECT_EQ(strings.get(ids[i]), "name " + std::to_string(i));
  }
  EXPECT_EQ(strings.size(), 5001u);
  EXPECT_FALSE(strings.find("absent").has_value());
}

TEST(Trace, TracksAndProcessesAreCreatedOnce) {
  Trace trace;
  auto first = trace.thread_track(1, 10);
  EXPECT_EQ(trace.thread_track(1, 10), first);
  EXPECT_NE(trace.thread_track(1, 11), first);
  EXPECT_NE(trace.thread_track(2, 10), first);
  EXPECT_EQ(trace.processes.size(), 2u);
  EXPECT_EQ(trace.counter_track(1, "rss"), trace.counter_track(1, "rss"));
  EXPECT_NE(trace.counter_track(1, "rss"), trace.counter_track(2, "rss"));
}

TEST(Trace, FinalizeSortsPerTrackAndNests) {
  Trace trace;
  auto a = trace.thread_track(1, 1);
  auto b = trace.thread_track(1, 2);
  auto name = [&](const char* text) { return trace.intern(text); };
  // Out of order, interleaved tracks, a tie on start (longer must become the parent).
  trace.slices.add(300, 100, name("child2"), 0, a);
  trace.slices.add(100, 50, name("other"), 0, b);
  trace.slices.add(100, 400, name("root"), 0, a);
  trace.slices.add(100, 150, name("child1"), 0, a);
  trace.slices.add(120, 10, name("grandchild"), 0, a);
  trace.slice_args.add(0, name("k"), ArgValue::of_int(7));  // on child2
  trace.finalize();

  std::vector<std::string> order;
  for (size_t row = 0; row < trace.slices.size(); ++row)
    order.emplace_back(trace.str(trace.slices.name[row]));
  EXPECT_EQ(order, (std::vector<std::string>{"root", "child1", "grandchild", "child2", "other"}));
  EXPECT_EQ(values(trace.slices.depth), (std::vector<uint16_t>{0, 1, 2, 1, 0}));
  EXPECT_EQ(values(trace.slices.parent), (std::vector<uint32_t>{kNoRow, 0, 1, 0, kNoRow}));
  // The arg followed its slice through the sort.
  ASSERT_EQ(trace.slices.args_begin.size(), 6u);
  EXPECT_EQ(trace.slices.args_begin[3], 0u);
  EXPECT_EQ(trace.slices.args_begin[4], 1u);
  EXPECT_EQ(trace.slice_args.value[0].int_value, 7);
  for (size_t row : {0, 1, 2, 4})
    EXPECT_EQ(trace.slices.args_begin[row], trace.slices.args_begin[row + 1]);
  std::set<uint64_t> ids(trace.slices.span_id.begin(), trace.slices.span_id.end());
  EXPECT_EQ(ids.size(), 5u);
  EXPECT_EQ(ids.count(0), 0u);
}

TEST(Trace, OverlappingSlicesAreClippedToTheirParentAndCounted) {
  Trace trace;
  auto track = trace.thread_track(1, 1);
  trace.slices.add(0, 100, trace.intern("parent"), 0, track);
  trace.slices.add(50, 100, trace.intern("overlaps"), 0, track);  // ends at 150 > 100
  trace.finalize();
  EXPECT_EQ(trace.slices.parent[1], 0u);
  EXPECT_EQ(trace.slices.end(1), 100);
  EXPECT_EQ(trace.clipped_slices, 1u);
}

TEST(Trace, AdjacentSlicesDoNotNestAndAMarkerAtAStartNestsInIt) {
  Trace trace;
  auto track = trace.thread_track(1, 1);
  trace.slices.add(0, 100, trace.intern("first"), 0, track);
  trace.slices.add(100, 0, trace.intern("marker"), 0, track);
  trace.slices.add(100, 50, trace.intern("second"), 0, track);
  trace.finalize();
  // Order: first, second (longer first on a tie), marker: inside second, not inside first.
  EXPECT_EQ(trace.str(trace.slices.name[2]), "marker");
  EXPECT_EQ(values(trace.slices.parent), (std::vector<uint32_t>{kNoRow, kNoRow, 1}));
}

TEST(Trace, TimeBoundsCoverEveryTable) {
  Trace trace;
  EXPECT_EQ(trace.time_bounds(), std::make_pair(int64_t{0}, int64_t{0}));
  auto track = trace.thread_track(1, 1);
  trace.slices.add(100, 50, trace.intern("s"), 0, track);
  trace.instants.add(20, trace.intern("i"), 0, track);
  trace.counters.add(400, trace.counter_track(1, "c"), 1.0);
  trace.finalize();
  EXPECT_EQ(trace.time_bounds(), std::make_pair(int64_t{20}, int64_t{400}));
}

TEST(Trace, IdsPrintAsW3CHex) {
  opsight::trace::TraceId id{0x4bf92f3577b34da6ULL, 0xa3ce929d0e0e4736ULL};
  EXPECT_EQ(id.to_hex(), "4bf92f3577b34da6a3ce929d0e0e4736");
  EXPECT_EQ(opsight::trace::span_id_to_hex(0x00f067aa0ba902b7ULL), "00f067aa0ba902b7");
}

}  // namespace
