#include "trace/trace_membership.hpp"

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

}  // namespace opsight::trace
