// An area of the timeline summarized per track and per name, against numbers computed by
// hand: slices partly inside count their clipped part, self time is what children leave,
// a slice ending where the range begins or beginning where it ends is outside, a
// zero-duration slice inside counts with no time.
#include "server/timeline_area.hpp"

#include <gtest/gtest.h>

#include <string>

namespace opsight::server {
namespace {

// Track 0 (thread 1):
//   step [0,100)   > op [10,30), op [40,90) > k [50,60)
//   step [120,200) > op [130,190) > late [150,160)
// Track 1 (thread 2):
//   io [20,60) > edge [30,35);  io [70,80) > mark [75,75)
trace::Trace hand_trace() {
  trace::Trace trace;
  trace::TrackId a = trace.thread_track(1, 1), b = trace.thread_track(1, 2);
  auto add = [&](trace::TrackId track, int64_t ts, int64_t dur, const char* name) {
    trace.slices.add(ts, dur, trace.intern(name), 0, track);
  };
  add(a, 0, 100, "step");
  add(a, 10, 20, "op");
  add(a, 40, 50, "op");
  add(a, 50, 10, "k");
  add(a, 120, 80, "step");
  add(a, 130, 60, "op");
  add(a, 150, 10, "late");
  add(b, 20, 40, "io");
  add(b, 30, 5, "edge");
  add(b, 70, 10, "io");
  add(b, 75, 0, "mark");
  trace.finalize();
  return trace;
}

std::string rendered(const trace::Trace& trace, const AreaSummary& summary) {
  std::string text;
  for (const AreaTrackRow& row : summary.tracks)
    text += "track " + std::to_string(row.track) + ": " + std::to_string(row.slice_count) +
            " slices, busy " + std::to_string(row.busy_ns) + "\n";
  for (const AreaNameRow& row : summary.names)
    text += std::string(trace.str(row.name)) + ": " + std::to_string(row.count) + " wall " +
            std::to_string(row.wall_ns) + " self " + std::to_string(row.self_ns) + "\n";
  return text;
}

TEST(TimelineArea, ClippedTimesPerTrackAndPerNameAreTheHandComputedOnes) {
  trace::Trace trace = hand_trace();
  TimelineIndex index(trace);
  AreaSummary summary = summarize_area(trace, index, {35, 150, {0, 1}});
  // Track 0 in [35,150): step 65 + 30 (busy 95); op [40,90) 50, op [130,190) 20; k 10.
  // Selfs: step 65-50 + 30-20 = 25; op 50-10 + 20 = 60. Track 1: io 25 + 10; mark 0.
  EXPECT_EQ(rendered(trace, summary),
            "track 0: 5 slices, busy 95\n"
            "track 1: 3 slices, busy 35\n"
            "step: 2 wall 95 self 25\n"
            "op: 2 wall 70 self 60\n"
            "io: 2 wall 35 self 35\n"
            "k: 1 wall 10 self 10\n"
            "mark: 1 wall 0 self 0\n");
  EXPECT_EQ(summary.slice_count, 8u);
}

TEST(TimelineArea, OnlyTheChosenTracksCountOnceEach) {
  trace::Trace trace = hand_trace();
  TimelineIndex index(trace);
  EXPECT_EQ(rendered(trace, summarize_area(trace, index, {35, 150, {1, 1}})),
            "track 1: 3 slices, busy 35\n"
            "io: 2 wall 35 self 35\n"
            "mark: 1 wall 0 self 0\n");
  // The whole trace: nothing is clipped, and self times add up to the busy time.
  AreaSummary whole = summarize_area(trace, index, {0, 1000, {0}});
  EXPECT_EQ(rendered(trace, whole),
            "track 0: 7 slices, busy 180\n"
            "step: 2 wall 180 self 50\n"
            "op: 3 wall 130 self 110\n"
            "k: 1 wall 10 self 10\n"
            "late: 1 wall 10 self 10\n");
  EXPECT_TRUE(summarize_area(trace, index, {35, 35, {0, 1}}).names.empty());  // empty range
}

TEST(TimelineArea, AgreesWithABruteForceOnARandomNestedTrace) {
  trace::Trace trace;
  trace::TrackId track = trace.thread_track(1, 1);
  uint64_t state = 42;
  auto next = [&state] { return state = trace::mix64(state); };
  int64_t at = 0;
  const trace::StringId names[3] = {trace.intern("x"), trace.intern("y"), trace.intern("z")};
  for (int i = 0; i < 300; ++i) {  // a root and up to two children, nested
    int64_t dur = 50 + static_cast<int64_t>(next() % 100);
    trace.slices.add(at, dur, names[next() % 3], 0, track);
    trace.slices.add(at + 5, dur / 3, names[next() % 3], 0, track);
    trace.slices.add(at + 6 + dur / 3, dur / 3, names[next() % 3], 0, track);
    at += dur + static_cast<int64_t>(next() % 30);
  }
  trace.finalize();
  TimelineIndex index(trace);
  for (int round = 0; round < 20; ++round) {
    int64_t start = static_cast<int64_t>(next() % static_cast<uint64_t>(at));
    int64_t end = start + static_cast<int64_t>(next() % 5000);
    AreaSummary summary = summarize_area(trace, index, {start, end, {track}});
    // Brute force: clip every slice; self = clipped less the clipped children.
    std::vector<int64_t> clipped(trace.slices.size(), -1);
    for (trace::RowIndex row = 0; row < trace.slices.size(); ++row)
      if (trace.slices.ts[row] < end && trace.slices.end(row) > start)
        clipped[row] = std::min(end, trace.slices.end(row)) - std::max(start, trace.slices.ts[row]);
    std::vector<int64_t> self = clipped;
    for (trace::RowIndex row = 0; row < trace.slices.size(); ++row)
      if (clipped[row] >= 0 && trace.slices.parent[row] != trace::kNoRow)
        self[trace.slices.parent[row]] -= clipped[row];
    for (const AreaNameRow& name : summary.names) {
      uint64_t count = 0;
      int64_t wall = 0, self_sum = 0;
      for (trace::RowIndex row = 0; row < trace.slices.size(); ++row)
        if (clipped[row] >= 0 && trace.slices.name[row] == name.name) {
          ++count;
          wall += clipped[row];
          self_sum += self[row];
        }
      EXPECT_EQ(name, (AreaNameRow{name.name, count, wall, self_sum})) << start << ".." << end;
    }
    uint64_t inside = 0;
    for (int64_t value : clipped) inside += value >= 0 ? 1 : 0;
    EXPECT_EQ(summary.slice_count, inside);
  }
}

}  // namespace
}  // namespace opsight::server
