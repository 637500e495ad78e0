#include "trace/trace_membership.hpp"

#include <algorithm>

namespace opsight::trace {

TraceMembership::TraceMembership(const Trace& trace) {
  const SliceTable& slices = trace.slices;
  context_of_row_.assign(slices.size(), -1);
  trace_ids_.push_back(trace.run.trace_id);
  trace_flags_.push_back(1);
  for (size_t context = 0; context < trace.span_contexts.size(); ++context) {
    RowIndex row = trace.span_contexts.slice[context];
    if (row >= slices.size()) continue;
    context_of_row_[row] = static_cast<int32_t>(context);
  }
  constexpr uint32_t kUnsettled = UINT32_MAX;
  trace_of_row_.assign(slices.size(), kUnsettled);
  std::vector<RowIndex> path;
  for (RowIndex start = 0; start < slices.size(); ++start) {
    RowIndex row = start;
    uint32_t settled = 0;
    while (row != kNoRow && trace_of_row_[row] == kUnsettled) {
      if (int32_t context = context_of_row_[row]; context >= 0) {
        trace_ids_.push_back(trace.span_contexts.trace_id[static_cast<size_t>(context)]);
        trace_flags_.push_back(trace.span_contexts.trace_flags[static_cast<size_t>(context)]);
        trace_of_row_[row] = static_cast<uint32_t>(trace_ids_.size() - 1);
        break;
      }
      path.push_back(row);
      RowIndex parent = slices.parent[row];
      if (parent == kNoRow || parent >= slices.size()) {  // a root of a trace of its own
        trace_ids_.push_back(root_trace_id(slices.span_id[row]));
        trace_flags_.push_back(1);
        trace_of_row_[row] = static_cast<uint32_t>(trace_ids_.size() - 1);
        path.pop_back();
        break;
      }
      row = parent;
    }
    if (row != kNoRow) settled = trace_of_row_[row];
    for (RowIndex on_path : path) trace_of_row_[on_path] = settled;
    path.clear();
  }
}

RowTraceIdentity TraceMembership::of_row(const Trace& trace, RowIndex row) {
  const SliceTable& slices = trace.slices;
  RowTraceIdentity identity;
  if (row >= slices.size()) return identity;
  std::vector<RowIndex> ancestors;  // row first, then up to its root
  for (RowIndex at = row; at != kNoRow && at < slices.size() && ancestors.size() <= slices.size();
       at = slices.parent[at])
    ancestors.push_back(at);
  // The nearest ancestor carrying a context (the last context given for a row wins, as in
  // the whole pass).
  size_t nearest = ancestors.size();
  int32_t nearest_context = -1;
  for (size_t context = 0; context < trace.span_contexts.size(); ++context) {
    auto found = std::find(ancestors.begin(), ancestors.end(), trace.span_contexts.slice[context]);
    if (found == ancestors.end()) continue;
    auto depth = static_cast<size_t>(found - ancestors.begin());
    if (depth <= nearest) {
      nearest = depth;
      nearest_context = static_cast<int32_t>(context);
    }
  }
  if (nearest_context >= 0) {
    auto context = static_cast<size_t>(nearest_context);
    identity.trace_id = trace.span_contexts.trace_id[context];
    identity.trace_flags = trace.span_contexts.trace_flags[context];
  } else {
    identity.trace_id = root_trace_id(slices.span_id[ancestors.back()]);
  }
  if (nearest == 0) {
    identity.context = nearest_context;
    identity.parent_span_id =
        trace.span_contexts.parent_span_id[static_cast<size_t>(nearest_context)];
  } else if (ancestors.size() > 1) {
    identity.parent_span_id = slices.span_id[ancestors[1]];
  }
  return identity;
}

}  // namespace opsight::trace
