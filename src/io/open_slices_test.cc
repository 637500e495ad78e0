// OpenSlices, the stack both the native and the Chrome JSON readers pair begins and ends on:
// nesting, closing the innermost (native) or the innermost that matches (Chrome JSON, with
// the slices inside it closed unfinished), slices never ended, and damaged times.
#include "io/open_slices.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>

namespace {

using opsight::io::OpenSlices;
using opsight::trace::kNoRow;
using opsight::trace::kSliceUnfinished;
using opsight::trace::RowIndex;
using opsight::trace::SliceTable;

RowIndex begin(SliceTable& slices, int64_t ts, opsight::trace::StringId name = 1) {
  return slices.add(ts, 0, name, 0, 0);
}

TEST(OpenSlices, NestsAndClosesTheInnermost) {
  SliceTable slices;
  OpenSlices open;
  EXPECT_EQ(open.close_innermost(slices, 5), kNoRow);  // an end with no begin: the reader's count
  RowIndex outer = begin(slices, 10);
  open.open(slices, outer, true);
  RowIndex inner = begin(slices, 20);
  open.open(slices, inner, true);
  EXPECT_EQ(slices.parent[inner], outer);
  EXPECT_EQ(slices.depth[inner], 1);
  EXPECT_EQ(slices.parent[outer], kNoRow);
  EXPECT_EQ(open.innermost(), inner);
  EXPECT_EQ(open.close_innermost(slices, 25), inner);
  EXPECT_EQ(open.close_innermost(slices, 40), outer);
  EXPECT_TRUE(open.empty());
  EXPECT_EQ(slices.dur[inner], 5);
  EXPECT_EQ(slices.dur[outer], 30);
  EXPECT_EQ(slices.flags[inner] | slices.flags[outer], 0);
}

TEST(OpenSlices, LeavesNestingToFinalizeWhenAsked) {
  SliceTable slices;
  OpenSlices open;
  open.open(slices, begin(slices, 10), false);
  RowIndex inner = begin(slices, 20);
  open.open(slices, inner, false);
  EXPECT_EQ(slices.parent[inner], kNoRow);
  EXPECT_EQ(slices.depth[inner], 0);
}

TEST(OpenSlices, AMatchedEndClosesTheSlicesInsideItUnfinished) {
  SliceTable slices;
  OpenSlices open;
  RowIndex a = begin(slices, 10, 1);
  RowIndex b = begin(slices, 20, 2);
  RowIndex c = begin(slices, 30, 3);
  for (RowIndex row : {a, b, c}) open.open(slices, row, false);
  uint64_t closed_inside = 0;
  auto named = [&](opsight::trace::StringId name) {
    return [&slices, name](RowIndex row) { return slices.name[row] == name; };
  };
  EXPECT_EQ(open.close_matching(slices, 50, named(9), closed_inside), kNoRow);
  EXPECT_EQ(open.size(), 3u);  // no match: nothing changes
  EXPECT_EQ(open.close_matching(slices, 50, named(2), closed_inside), b);
  EXPECT_EQ(closed_inside, 1u);
  EXPECT_EQ(slices.dur[b], 30);
  EXPECT_EQ(slices.flags[b], 0);
  EXPECT_EQ(slices.dur[c], 20);
  EXPECT_EQ(slices.flags[c], kSliceUnfinished);
  EXPECT_EQ(open.size(), 1u);
  EXPECT_EQ(open.innermost(), a);
}

TEST(OpenSlices, SlicesNeverEndedCloseUnfinishedWithSaturatedDurations) {
  SliceTable slices;
  OpenSlices open;
  RowIndex early = begin(slices, std::numeric_limits<int64_t>::min());
  RowIndex late = begin(slices, 100);
  open.open(slices, early, true);
  open.open(slices, late, true);
  EXPECT_EQ(open.close_all_unfinished(slices, 50), 2u);
  EXPECT_TRUE(open.empty());
  EXPECT_EQ(slices.dur[late], 0);  // an end before the begin: never negative
  EXPECT_EQ(slices.dur[early], std::numeric_limits<int64_t>::max());
  EXPECT_EQ(slices.flags[early], kSliceUnfinished);
  EXPECT_EQ(slices.flags[late], kSliceUnfinished);
}

}  // namespace
