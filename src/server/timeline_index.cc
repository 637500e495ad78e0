#include "server/timeline_index.hpp"

#include <algorithm>

namespace opsight::server {
namespace {

// Merges a row of disjoint items, ordered by start, at one width (the rule of the header):
// items narrower than the width whose gap is below it become one block named after the
// longest slice. Width 0 merges nothing.
class BlockMerger {
 public:
  BlockMerger(const trace::Trace& trace, int64_t width_ns, std::vector<TimelineBlock>& out)
      : durations_(trace.slices.dur), width_ns_(width_ns), out_(out) {}

  void add(const TimelineBlock& item) {
    if (open_ && item.start_ns - current_.end_ns < width_ns_ &&
        current_.end_ns - current_.start_ns < width_ns_ &&
        item.end_ns - item.start_ns < width_ns_) {
      current_.end_ns = std::max(current_.end_ns, item.end_ns);
      current_.count += item.count;
      if (durations_[item.row] > durations_[current_.row]) current_.row = item.row;
      return;
    }
    if (open_) out_.push_back(current_);
    current_ = item;
    open_ = true;
  }
  void finish() {
    if (open_) out_.push_back(current_);
    open_ = false;
  }

 private:
  const trace::Column<int64_t>& durations_;
  int64_t width_ns_;
  std::vector<TimelineBlock>& out_;
  TimelineBlock current_;
  bool open_ = false;
};

TimelineBlock block_of_slice(const trace::Trace& trace, trace::RowIndex row) {
  return {trace.slices.ts[row], trace.slices.end(row), 1, row};
}

constexpr int kMaxLevels = 24;

}  // namespace

TimelineIndex::TimelineIndex(const trace::Trace& trace) : trace_(trace) {
  tracks_.resize(trace.tracks.size());
  const auto& slices = trace.slices;
  for (trace::RowIndex row = 0; row < slices.size(); ++row) {
    trace::TrackId track = slices.track[row];
    if (track >= tracks_.size()) continue;  // a finalized trace has none
    auto& depths = tracks_[track];
    uint16_t depth = slices.depth[row];
    if (depths.size() <= depth) depths.resize(depth + 1u);
    depths[depth].rows.push_back(row);
  }
  for (auto& depths : tracks_)
    for (auto& depth_row : depths) build_levels(depth_row);

  counter_rows_.resize(trace.counter_tracks.size());
  for (trace::RowIndex row = 0; row < trace.counters.size(); ++row) {
    uint32_t counter = trace.counters.counter_track[row];
    if (counter < counter_rows_.size()) counter_rows_[counter].push_back(row);
  }
  for (auto& rows : counter_rows_)
    std::stable_sort(rows.begin(), rows.end(), [&](trace::RowIndex a, trace::RowIndex b) {
      return trace.counters.ts[a] < trace.counters.ts[b];
    });
}

void TimelineIndex::build_levels(DepthRow& depth_row) const {
  const auto& rows = depth_row.rows;
  if (rows.size() < 2) return;
  const int64_t span_ns = trace_.slices.end(rows.back()) - trace_.slices.ts[rows.front()];
  size_t last_kept_size = rows.size();
  std::vector<TimelineBlock> input;  // the previous level, kept or not
  int64_t width_ns = kFinestLevelWidthNs;
  for (int level = 1; level <= kMaxLevels; ++level, width_ns *= kLevelFactor) {
    std::vector<TimelineBlock> merged;
    BlockMerger merger(trace_, width_ns, merged);
    if (level == 1) {
      for (trace::RowIndex row : rows) merger.add(block_of_slice(trace_, row));
    } else {
      for (const TimelineBlock& block : input) merger.add(block);
    }
    merger.finish();
    const size_t merged_size = merged.size();
    if (merged_size * 2 <= last_kept_size) {
      last_kept_size = merged_size;
      depth_row.levels.push_back({width_ns, merged});
    }
    input = std::move(merged);
    if (merged_size <= 1 || width_ns > span_ns) break;
  }
}

Tile TimelineIndex::tile(const TileQuery& query) const {
  Tile tile;
  const auto& depths = tracks_.at(query.track);
  tile.blocks.resize(depths.size());
  const int64_t resolution = std::max<int64_t>(1, query.ns_per_pixel);
  const auto& slices = trace_.slices;
  for (size_t depth = 0; depth < depths.size(); ++depth) {
    const DepthRow& depth_row = depths[depth];
    BlockMerger merger(trace_, resolution, tile.blocks[depth]);
    const Level* level = nullptr;
    for (const Level& candidate : depth_row.levels)
      if (candidate.width_ns <= resolution) level = &candidate;
    if (level != nullptr) {
      tile.level_width_ns = std::max(tile.level_width_ns, level->width_ns);
      auto first = std::partition_point(
          level->blocks.begin(), level->blocks.end(),
          [&](const TimelineBlock& block) { return block.end_ns < query.start_ns; });
      for (auto block = first; block != level->blocks.end() && block->start_ns <= query.end_ns;
           ++block) {
        merger.add(*block);
        ++tile.items_scanned;
      }
    } else {
      auto first = std::partition_point(
          depth_row.rows.begin(), depth_row.rows.end(),
          [&](trace::RowIndex row) { return slices.end(row) < query.start_ns; });
      for (auto row = first; row != depth_row.rows.end() && slices.ts[*row] <= query.end_ns;
           ++row) {
        merger.add(block_of_slice(trace_, *row));
        ++tile.items_scanned;
      }
    }
    merger.finish();
  }
  return tile;
}

std::vector<CounterPoint> TimelineIndex::counter_points(const CounterQuery& query) const {
  const auto& rows = counter_rows_.at(query.counter_track);
  const auto& ts = trace_.counters.ts;
  const auto& values = trace_.counters.value;
  // One sample before the window and one after it, so a line drawn through the points
  // enters and leaves the window at the right height.
  auto first = std::partition_point(rows.begin(), rows.end(),
                                    [&](trace::RowIndex row) { return ts[row] < query.start_ns; });
  if (first != rows.begin()) --first;
  auto last = std::partition_point(rows.begin(), rows.end(),
                                   [&](trace::RowIndex row) { return ts[row] <= query.end_ns; });
  if (last != rows.end()) ++last;
  std::vector<CounterPoint> points;
  const int64_t resolution = std::max<int64_t>(1, query.ns_per_pixel);
  const int64_t pixels = std::max<int64_t>(1, (query.end_ns - query.start_ns) / resolution);
  if (last - first <= 2 * pixels) {
    for (auto row = first; row != last; ++row) {
      double value = values[*row];
      points.push_back({ts[*row], value, value, value, value});
    }
    return points;
  }
  int64_t bucket = 0;
  for (auto row = first; row != last; ++row) {
    int64_t time = ts[*row];
    double value = values[*row];
    int64_t this_bucket =
        time < query.start_ns ? -1 : (time - query.start_ns) / resolution;  // floor for >= 0
    if (points.empty() || this_bucket != bucket) {
      points.push_back({time, value, value, value, value});
      bucket = this_bucket;
      continue;
    }
    CounterPoint& point = points.back();
    point.min = std::min(point.min, value);
    point.max = std::max(point.max, value);
    point.last = value;
  }
  return points;
}

uint32_t TimelineIndex::depth_count(trace::TrackId track) const {
  return static_cast<uint32_t>(tracks_.at(track).size());
}

uint64_t TimelineIndex::slice_count(trace::TrackId track) const {
  uint64_t count = 0;
  for (const DepthRow& depth_row : tracks_.at(track)) count += depth_row.rows.size();
  return count;
}

uint64_t TimelineIndex::sample_count(uint32_t counter_track) const {
  return counter_rows_.at(counter_track).size();
}

std::vector<int64_t> TimelineIndex::level_widths(trace::TrackId track, uint32_t depth) const {
  std::vector<int64_t> widths = {0};
  for (const Level& level : tracks_.at(track).at(depth).levels) widths.push_back(level.width_ns);
  return widths;
}

uint64_t TimelineIndex::memory_bytes() const {
  uint64_t bytes = 0;
  for (const auto& depths : tracks_)
    for (const DepthRow& depth_row : depths) {
      bytes += depth_row.rows.capacity() * sizeof(trace::RowIndex);
      for (const Level& level : depth_row.levels)
        bytes += level.blocks.capacity() * sizeof(TimelineBlock);
    }
  for (const auto& rows : counter_rows_) bytes += rows.capacity() * sizeof(trace::RowIndex);
  return bytes;
}

}  // namespace opsight::server
