#include "server/timeline_area.hpp"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

namespace opsight::server {
namespace {

// A slice of the area at one depth: its row, its time inside the range and what is left
// of it once its children's time inside the range is taken away.
struct AreaSlice {
  trace::RowIndex row;
  int64_t clipped_ns;
  int64_t self_ns;
};

constexpr size_t kDenseNameLimit = size_t{1} << 20;

struct NameTotals {
  uint64_t count = 0;
  int64_t wall_ns = 0;
  int64_t self_ns = 0;
};

}  // namespace

AreaSummary summarize_area(const trace::Trace& trace, const TimelineIndex& index,
                           const AreaQuery& query) {
  AreaSummary summary;
  const auto& slices = trace.slices;
  const int64_t start = query.start_ns, end = query.end_ns;
  // Totals per name: in a table by string id when the trace has few strings (one lookup
  // per slice), else in a hash map.
  const bool dense = trace.strings.size() <= kDenseNameLimit;
  std::vector<NameTotals> by_name_id(dense ? trace.strings.size() : 0);
  std::unordered_map<trace::StringId, NameTotals> by_name;
  auto add_to_names = [&](const std::vector<AreaSlice>& depth) {
    for (const AreaSlice& slice : depth) {
      const trace::StringId name = slices.name[slice.row];
      NameTotals& totals = dense ? by_name_id[name] : by_name[name];
      ++totals.count;
      totals.wall_ns += slice.clipped_ns;
      totals.self_ns += std::max<int64_t>(0, slice.self_ns);
    }
  };
  std::unordered_set<trace::TrackId> seen;
  for (trace::TrackId track : query.tracks) {
    if (!seen.insert(track).second) continue;
    AreaTrackRow track_row{track, 0, 0};
    std::vector<AreaSlice> parents, current;
    const uint32_t depth_count = index.depth_count(track);
    for (uint32_t depth = 0; depth < depth_count && start < end; ++depth) {
      const auto& rows = index.depth_rows(track, depth);
      // The first slice that reaches into the range (ends after start, or begins at it
      // with no duration); the slices of a depth are disjoint, so ends are in order.
      auto first = std::partition_point(rows.begin(), rows.end(), [&](trace::RowIndex row) {
        const int64_t slice_end = slices.end(row);
        return slice_end < start || (slice_end == start && slices.dur[row] > 0);
      });
      current.clear();
      size_t parent_at = 0;
      for (auto row = first; row != rows.end() && slices.ts[*row] < end; ++row) {
        const int64_t clipped = std::min(end, slices.end(*row)) - std::max(start, slices.ts[*row]);
        current.push_back({*row, clipped, clipped});
        // Its parent is on the depth above, in the same time order: walk along to it.
        const trace::RowIndex parent = slices.parent[*row];
        size_t at = parent_at;
        while (at < parents.size() && parents[at].row != parent &&
               slices.ts[parents[at].row] <= slices.ts[*row])
          ++at;
        if (at < parents.size() && parents[at].row == parent) {
          parents[at].self_ns -= clipped;
          parent_at = at;
        }
      }
      add_to_names(parents);
      track_row.slice_count += current.size();
      if (depth == 0)
        for (const AreaSlice& slice : current) track_row.busy_ns += slice.clipped_ns;
      std::swap(parents, current);
    }
    add_to_names(parents);
    summary.slice_count += track_row.slice_count;
    summary.tracks.push_back(track_row);
  }
  for (trace::StringId name = 0; name < by_name_id.size(); ++name)
    if (by_name_id[name].count > 0) by_name[name] = by_name_id[name];
  summary.names.reserve(by_name.size());
  for (const auto& [name, totals] : by_name)
    summary.names.push_back({name, totals.count, totals.wall_ns, totals.self_ns});
  std::sort(summary.names.begin(), summary.names.end(),
            [&](const AreaNameRow& a, const AreaNameRow& b) {
              if (a.wall_ns != b.wall_ns) return a.wall_ns > b.wall_ns;
              return trace.str(a.name) < trace.str(b.name);
            });
  return summary;
}

}  // namespace opsight::server
