// Which trace each span of a run is in (issue 33 item 1). A run holds many traces: a span
// that joined or began a trace (Trace::span_contexts) is in that trace together with what
// it encloses, and every root span that joined none is the root of a trace of its own
// (root_trace_id). The exporters (exporting::SpanView) and the UI server both ask here.
#pragma once

#include <cstdint>
#include <vector>

#include "trace/trace.hpp"

namespace opsight::trace {

// One row's place in its trace, as an exporter sends it.
struct RowTraceIdentity {
  TraceId trace_id;
  uint8_t trace_flags = 1;
  int32_t context = -1;         // row of Trace::span_contexts the span carries, -1 for none
  uint64_t parent_span_id = 0;  // the remote parent of a span with a context, else the
                                // enclosing span's id; 0: the span begins its trace
};

class TraceMembership {
 public:
  // The same rules for one row, without a pass over the trace: its ancestors (depth) and
  // one scan of Trace::span_contexts (sparse), for a viewer asking about one slice.
  static RowTraceIdentity of_row(const Trace& trace, RowIndex row);

  // One pass over the trace's rows (each row settled once, walking up to the nearest
  // ancestor that is settled, carries a context, or is a root).
  explicit TraceMembership(const Trace& trace);

  // The trace of `row`: its own context's, else its parent's; a root without a context
  // is the root of a trace of its own (root_trace_id of its span id).
  TraceId trace_id(RowIndex row) const { return trace_ids_[trace_of_row_[row]]; }
  // W3C trace flags of that trace (bit 0: sampled); 1 for a trace of a root's own.
  uint8_t trace_flags(RowIndex row) const { return trace_flags_[trace_of_row_[row]]; }
  // The row of Trace::span_contexts that `row` carries, -1 for none.
  int32_t context_of(RowIndex row) const { return context_of_row_[row]; }
  // An index into the traces found: rows with the same index are in one trace. (Two
  // spans that each joined the same remote trace get two indexes with equal trace ids.)
  uint32_t trace_index(RowIndex row) const { return trace_of_row_[row]; }
  size_t trace_index_count() const { return trace_ids_.size(); }
  TraceId trace_id_at(uint32_t index) const { return trace_ids_[index]; }
  size_t row_count() const { return trace_of_row_.size(); }

 private:
  std::vector<int32_t> context_of_row_;  // row of Trace::span_contexts, -1 for none
  std::vector<TraceId> trace_ids_;       // [0]: the run's (rows settle elsewhere in practice)
  std::vector<uint8_t> trace_flags_;
  std::vector<uint32_t> trace_of_row_;  // index into trace_ids_
};

}  // namespace opsight::trace
