// Level-of-detail summaries of a trace's timeline, so that a viewer asks for what one
// screen shows (a track, a time window, a resolution in ns per pixel) and never gets the
// whole trace: a 10M-slice run answers a zoomed-out tile with a few thousand blocks.
//
// For every track and every depth on it, the slices are disjoint and ordered by start, so
// they form one row of intervals. Level 0 is those slices themselves; level L (L >= 1)
// merges neighbours of level L-1 into blocks at width w_L = kFinestLevelWidthNs *
// kLevelFactor^(L-1): two neighbours merge when the gap between them is below w_L and both
// are narrower than w_L (so a block stays under 2 w_L, and a slice as wide as a pixel is
// never hidden in a block). A level is kept only when it has at most half the blocks of
// the last level kept (sparse rows stop early, so memory stays below twice level 1's).
//
// A tile query at resolution r starts from the coarsest kept level with w_L <= r, finds
// the window by binary search, and merges again at r, so what it returns has at most
// about two items per pixel per depth and costs O(log n + items) however large the trace.
// A block names the row of its longest slice (what a click on it selects, and the name it
// is drawn with) and how many slices it stands for; an item with count 1 is the slice.
//
// Counter tracks keep their samples ordered by time; a counter query returns the samples
// of the window, or when there are more than two per pixel, per pixel the first, minimum,
// maximum and last value.
//
// Thread-safety: built by one thread; afterwards every const method may be called from
// any number of threads. The trace must outlive the index and stay unchanged.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "trace/trace.hpp"

namespace opsight::server {

// One item of a tile: a slice (count 1) or a block of `count` slices merged at the tile's
// resolution, drawn from start_ns to end_ns, named after its longest slice (`row`).
struct TimelineBlock {
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  uint32_t count = 0;
  trace::RowIndex row = trace::kNoRow;

  bool operator==(const TimelineBlock&) const = default;
};

struct TileQuery {
  trace::TrackId track = 0;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  int64_t ns_per_pixel = 1;  // the resolution: >= 1
};

struct Tile {
  // Items per depth: blocks[d] is depth d's row, ordered by start.
  std::vector<std::vector<TimelineBlock>> blocks;
  int64_t level_width_ns = 0;  // the kept level the query started from (0: the slices)
  uint64_t items_scanned = 0;  // blocks of that level read: what the query cost
};

struct CounterQuery {
  uint32_t counter_track = 0;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  int64_t ns_per_pixel = 1;
};

// Per pixel bucket (or per sample, when the window holds few): the first sample's time
// and the values' first, minimum, maximum and last.
struct CounterPoint {
  int64_t ts = 0;
  double first = 0.0, min = 0.0, max = 0.0, last = 0.0;

  bool operator==(const CounterPoint&) const = default;
};

class TimelineIndex {
 public:
  static constexpr int64_t kFinestLevelWidthNs = 1000;  // level 1 merges below 1 µs
  static constexpr int64_t kLevelFactor = 4;

  explicit TimelineIndex(const trace::Trace& trace);

  // The blocks of one track in a window at a resolution (query.track must be a track of
  // the trace; callers check with track_count()). Thread-safe.
  Tile tile(const TileQuery& query) const;
  // The samples of one counter track in a window, bucketed per pixel when dense.
  std::vector<CounterPoint> counter_points(const CounterQuery& query) const;

  size_t track_count() const { return tracks_.size(); }
  size_t counter_track_count() const { return counter_rows_.size(); }
  // Depths in use on a track (1 + the deepest slice's depth; 0 for an empty track).
  uint32_t depth_count(trace::TrackId track) const;
  uint64_t slice_count(trace::TrackId track) const;
  uint64_t sample_count(uint32_t counter_track) const;
  // The rows of one depth of a track, by start (a depth's slices are disjoint, so their
  // ends are in order too).
  const std::vector<trace::RowIndex>& depth_rows(trace::TrackId track, uint32_t depth) const {
    return tracks_.at(track).at(depth).rows;
  }
  // The widths of the levels kept for one depth of a track (0 for the slices), ascending.
  std::vector<int64_t> level_widths(trace::TrackId track, uint32_t depth) const;
  // Bytes the index holds beyond the trace (what the cache weighs).
  uint64_t memory_bytes() const;

 private:
  struct Level {
    int64_t width_ns = 0;
    std::vector<TimelineBlock> blocks;
  };
  // One depth of a track: its slices' rows by start, and the coarser levels kept.
  struct DepthRow {
    std::vector<trace::RowIndex> rows;
    std::vector<Level> levels;
  };
  void build_levels(DepthRow& depth_row) const;

  const trace::Trace& trace_;
  std::vector<std::vector<DepthRow>> tracks_;               // [track][depth]
  std::vector<std::vector<trace::RowIndex>> counter_rows_;  // [counter track] sample rows by ts
};

}  // namespace opsight::server
