// An area of the timeline, a time range on a set of tracks (what a drag over the tracks
// marks, as in Perfetto), summarized like Perfetto's "Slices" tab of an area selection:
// per track, how many slices the area touches and how long the track was busy in it; per
// name, how many slices, their wall time and their self time inside the range.
//
// Exact, and clipped: the range is [start, end); a slice counts when it overlaps it (a
// slice of zero duration when it begins inside it), and only its part inside the range
// counts toward wall, self and busy times. A slice's self time inside the range is its
// clipped time less its children's clipped times. A track is busy when a slice of its top
// depth is open (those slices are disjoint, so busy is their clipped sum).
//
// Cost: per track and depth, a binary search for the first slice that reaches the range
// (TimelineIndex keeps each depth's rows by start), then the slices inside it, so an area
// costs O(tracks x depths x log n + slices inside) however large the trace. Children are
// matched to their parents by walking both depths in time order together.
//
// Thread-safety: a free function over a const trace and index.
#pragma once

#include <cstdint>
#include <vector>

#include "server/timeline_index.hpp"
#include "trace/trace.hpp"

namespace opsight::server {

struct AreaQuery {
  int64_t start_ns = 0;
  int64_t end_ns = 0;                  // exclusive; >= start_ns
  std::vector<trace::TrackId> tracks;  // each a track of the trace; duplicates are ignored
};

struct AreaTrackRow {
  trace::TrackId track = 0;
  uint64_t slice_count = 0;  // slices overlapping the range, all depths
  int64_t busy_ns = 0;       // clipped time of its top depth's slices

  bool operator==(const AreaTrackRow&) const = default;
};

struct AreaNameRow {
  trace::StringId name = 0;
  uint64_t count = 0;
  int64_t wall_ns = 0;  // clipped durations, summed
  int64_t self_ns = 0;  // clipped self times, summed

  bool operator==(const AreaNameRow&) const = default;
};

struct AreaSummary {
  std::vector<AreaTrackRow> tracks;  // in the query's order
  std::vector<AreaNameRow> names;    // by wall time, longest first (ties: by name)
  uint64_t slice_count = 0;
};

AreaSummary summarize_area(const trace::Trace& trace, const TimelineIndex& index,
                           const AreaQuery& query);

}  // namespace opsight::server
