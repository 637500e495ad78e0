// The slices open on one lane while a reader pairs begins with ends: the one rule both the
// native reader (a thread's Begin/End per lane, as decoded; async begins and ends per
// (process, id), once every thread is read) and the Chrome JSON reader (B/E and b/e per
// track, in time order, once the file is read) build slices by.
//
//   a begin   -> its slice (added by the reader, duration 0) opens inside the innermost
//                open one; with `fill_nesting` its parent and depth are set here (the
//                native reader: Trace::nesting_filled_by_reader), else Trace::finalize
//                finds them (the Chrome JSON reader, whose name-matched pairs may overlap)
//   an end    -> closes the innermost open slice it matches (any, in the native reader;
//                by name and category, in the Chrome JSON one); the slices opened inside
//                that one and still open close at the same time, marked unfinished
//   no begin  -> the reader counts the end (close_* returns kNoRow)
//   no end    -> close_all_unfinished at the lane's (or the trace's) last time, marked
//                unfinished
// Durations are end - start, never negative, saturated on damaged times.
//
// What stays each reader's own (and why): which lane an event belongs to (a thread's track
// and its async lanes; Chrome's async tracks per (pid or global, category, id)); when the
// pairing runs (the native file is in time order per thread, so as decoded; a Chrome file
// need not be, so after a stable sort by time); where args go (native args follow their
// event, to the innermost open slice or the instant just before; a Chrome E carries its own,
// merged into the slice it closes); and flows (bound to slice rows and joined by id in the
// native reader, chained by time or span id in the Chrome JSON one: different rules for an
// arrival before any departure and for ends left open).
//
// Thread-safety: none; one per lane, used by one thread.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#include "trace/trace.hpp"

namespace opsight::io {

class OpenSlices {
 public:
  // end - start, at least 0, saturated: a damaged file's times may be 2^63 apart.
  static int64_t duration(int64_t start, int64_t end) {
    int64_t result = 0;
    if (end <= start) return 0;
    if (__builtin_sub_overflow(end, start, &result)) return std::numeric_limits<int64_t>::max();
    return result;
  }

  bool empty() const { return rows_.empty(); }
  size_t size() const { return rows_.size(); }
  // The innermost open slice's row (not empty()).
  trace::RowIndex innermost() const { return rows_.back(); }
  // The outermost open slice's row: the root of what is open (not empty()).
  trace::RowIndex outermost() const { return rows_.front(); }

  // Opens `row`, a slice just added at its begin, inside the innermost open one.
  __attribute__((always_inline)) void open(trace::SliceTable& slices, trace::RowIndex row,
                                           bool fill_nesting) {
    if (fill_nesting && !rows_.empty()) {
      slices.parent[row] = rows_.back();
      slices.depth[row] = static_cast<uint16_t>(std::min<size_t>(rows_.size(), 0xFFFF));
    }
    rows_.push_back(row);
  }

  // Opens `row`, a slice just added with its parent (innermost(), or kNoRow when empty())
  // and depth (size()) already set: open() with fill_nesting, for a reader that writes
  // both as it adds the row.
  void open_nested(trace::RowIndex row) { rows_.push_back(row); }

  // Takes the innermost open slice off the stack without closing it: its row, or kNoRow
  // when none is open (the caller sets its duration, as close_innermost does).
  trace::RowIndex pop_innermost() {
    if (rows_.empty()) return trace::kNoRow;
    trace::RowIndex row = rows_.back();
    rows_.pop_back();
    return row;
  }

  // Closes the innermost open slice at `end_ns`: its row, or kNoRow when none is open.
  __attribute__((always_inline)) trace::RowIndex close_innermost(trace::SliceTable& slices,
                                                                 int64_t end_ns) {
    if (rows_.empty()) return trace::kNoRow;
    trace::RowIndex row = rows_.back();
    rows_.pop_back();
    slices.dur[row] = duration(slices.ts[row], end_ns);
    return row;
  }

  // Closes the innermost open slice for which `matches(row)` holds, at `end_ns`; those opened
  // inside it and still open close at the same time, marked unfinished, and are added to
  // `closed_inside`. Returns its row, or kNoRow when none matches (nothing changes).
  template <typename Matches>
  trace::RowIndex close_matching(trace::SliceTable& slices, int64_t end_ns, Matches&& matches,
                                 uint64_t& closed_inside) {
    size_t match = rows_.size();
    for (size_t position = rows_.size(); position-- > 0;) {
      if (matches(rows_[position])) {
        match = position;
        break;
      }
    }
    if (match == rows_.size()) return trace::kNoRow;
    for (size_t inner = match + 1; inner < rows_.size(); ++inner) {
      slices.dur[rows_[inner]] = duration(slices.ts[rows_[inner]], end_ns);
      slices.flags[rows_[inner]] |= trace::kSliceUnfinished;
      ++closed_inside;
    }
    trace::RowIndex row = rows_[match];
    slices.dur[row] = duration(slices.ts[row], end_ns);
    rows_.resize(match);
    return row;
  }

  // Closes every open slice at `end_ns`, marked unfinished (they had no end); returns how
  // many there were.
  size_t close_all_unfinished(trace::SliceTable& slices, int64_t end_ns) {
    for (trace::RowIndex row : rows_) {
      slices.dur[row] = duration(slices.ts[row], end_ns);
      slices.flags[row] |= trace::kSliceUnfinished;
    }
    size_t closed = rows_.size();
    rows_.clear();
    return closed;
  }

  void clear() { rows_.clear(); }

 private:
  std::vector<trace::RowIndex> rows_;
};

}  // namespace opsight::io
