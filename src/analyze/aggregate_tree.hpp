// Aggregated call trees: every invocation of the same code path merged into one node
// (a thousand inferences, one tree), each node carrying its call count and the
// distribution of its durations (exact percentiles), its self time and its share of its
// parent.
//
// A code path is the sequence of span names from a root down to a slice: slices with the
// same path merge, whatever thread, process or root invocation they ran in. Children are
// ordered by their first start, so a pipeline reads in the order it runs.
//
// Built in linear time: one pass assigns every slice its node through a flat hash table
// keyed by (parent node, name), one pass scatters durations by node (a counting sort),
// then a selection per node gives the percentiles. Memory: 4 bytes per slice for the node
// of each row plus 8 for the grouped durations, during the build only.
//
// Thread-safety: built by one thread; afterwards const methods may be called from any
// number of threads. Nodes refer to string ids of the trace they were built from.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "analyze/distribution.hpp"
#include "trace/trace.hpp"

namespace opsight::analyze {

inline constexpr uint32_t kNoNode = std::numeric_limits<uint32_t>::max();

struct AggregateNode {
  uint32_t parent = kNoNode;  // index in AggregateTree::nodes(), kNoNode for a root
  uint32_t depth = 0;
  trace::StringId name = 0;
  trace::StringId category = 0;  // the category of its first slice
  Distribution duration;         // inclusive durations of its slices
  int64_t self_ns = 0;           // sum of self times (duration minus direct children)
  int64_t first_start_ns = 0;
  // count / the parent's count: calls per call of the parent (1 for a root).
  double calls_per_parent_call = 1.0;
  // duration.total_ns / the parent's total (1 for a root or a parent with no time).
  double share_of_parent = 1.0;
  uint32_t child_count = 0;
};

// A code path as a builder collects it, before the tree is laid out: what build() gathers
// from the trace's rows and the streaming merged tree (report/streaming_views.hpp) from the
// spans of a file as they end.
struct AggregatePath {
  uint32_t parent = kNoNode;  // index in the builder's list of paths, kNoNode for a root
  trace::StringId name = 0;
  trace::StringId category = 0;  // the category of its first slice
  uint64_t count = 0;
  int64_t self_ns = 0;  // its durations minus its direct children's (clamped at 0 later)
  int64_t first_start_ns = 0;
};

class AggregateTree {
 public:
  // Aggregates every slice of a finalized trace. With keep_durations, durations(node)
  // returns each node's durations sorted ascending (what comparisons need).
  static AggregateTree build(const trace::Trace& trace, bool keep_durations = false);

  // Lays out collected paths: children and roots by first start, ties by the lower index
  // in `paths` (build() numbers paths in the order of their first row).
  // `durations_of(path)` gives the path's `count` durations, in any order (they may be
  // reordered); it is asked once per path, in output order.
  static AggregateTree from_paths(const std::vector<AggregatePath>& paths,
                                  const std::function<std::span<int64_t>(uint32_t)>& durations_of,
                                  bool keep_durations = false);

  // Depth-first pre-order: a node before its children, children by first start, roots by
  // first start.
  std::span<const AggregateNode> nodes() const { return nodes_; }
  std::span<const uint32_t> roots() const { return roots_; }
  // Durations of a node's slices, ascending; empty unless built with keep_durations.
  std::span<const int64_t> durations(uint32_t node) const;
  // "main / infer / encoder" for a node (names joined by " / ").
  std::string path(const trace::Trace& trace, uint32_t node) const;

 private:
  std::vector<AggregateNode> nodes_;
  std::vector<uint32_t> roots_;
  std::vector<uint64_t> duration_begin_;  // nodes + 1 offsets, when durations are kept
  std::vector<int64_t> durations_;
};

}  // namespace opsight::analyze
