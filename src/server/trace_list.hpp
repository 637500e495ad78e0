// The traces of a run, as a list the UI's Traces page pages through (issue 33 item 1): a
// run holds many traces (trace::TraceMembership: every root span that joined no trace is
// the root of a trace of its own; a served request is in its caller's trace or a new one).
// One row per trace id, with the span that begins it in this run (its root: a root span,
// or a span that joined or began a trace; the earliest when several roots share one trace
// id, as two requests served for one caller do), when it runs (first begin to last end of
// its spans), how many spans and errors (a span carrying exception.type or error.type, as
// the exporters mark an error status) it has, and its root's process.
//
// Cost: built once per loaded run (LoadedRun::traces(), on first ask) by one
// TraceMembership pass over the slices and one pass over the slices' args (only when the
// trace interned exception.type or error.type): about 24 bytes per slice while building,
// 64 per trace kept. Each order (by duration, start, spans, errors, name) is sorted on its
// first use and kept (4 bytes per trace). A page is then O(offset + limit) without a
// filter, one pass over the traces with one (a root name is tested once per distinct name).
//
// Thread-safety: built by one thread; afterwards every const method may be called from
// any number of threads (the orders sorted on first use are built under std::call_once).
#pragma once

#include <array>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "trace/trace.hpp"

namespace opsight::server {

struct TraceListRow {
  trace::TraceId trace_id;
  trace::RowIndex root = trace::kNoRow;  // the span that begins the trace in this run
  int64_t start_ns = 0;                  // first begin of its spans
  int64_t end_ns = 0;                    // last end of its spans
  uint32_t span_count = 0;
  uint32_t error_count = 0;
  uint32_t root_count = 0;             // spans that begin it here (more than 1: several joined it)
  uint32_t process_count = 0;          // processes its spans ran in
  uint64_t remote_parent_span_id = 0;  // the caller's span its root joined; 0: none

  int64_t duration_ns() const { return end_ns - start_ns; }
};

enum class TraceSort : uint8_t { kDuration, kStart, kSpans, kErrors, kName };
inline constexpr size_t kTraceSortCount = 5;

// "duration", "start", "spans", "errors", "name"; nullopt for any other text.
std::optional<TraceSort> parse_trace_sort(std::string_view text);
std::string_view trace_sort_name(TraceSort sort);
// The order a sort takes when none is asked: longest, most spans and most errors first;
// start and name ascending.
bool trace_sort_descends_by_default(TraceSort sort);

struct TraceListQuery {
  TraceSort sort = TraceSort::kDuration;
  bool descending = true;
  std::string root_name;  // lowercased; empty: every trace (else roots whose name contains it)
  uint64_t offset = 0;
  size_t limit = 100;
};

struct TraceListPage {
  uint64_t matched = 0;                   // traces the filter keeps (all without one)
  std::vector<const TraceListRow*> rows;  // [offset, offset + limit) of them, in order
};

class TraceList {
 public:
  explicit TraceList(const trace::Trace& trace);
  TraceList(const TraceList&) = delete;
  TraceList& operator=(const TraceList&) = delete;

  // Every trace, in the order of its first row (the lowest row of any of its spans).
  const std::vector<TraceListRow>& rows() const { return rows_; }
  size_t size() const { return rows_.size(); }

  TraceListPage page(const TraceListQuery& query) const;

 private:
  // Indexes into rows_ in the sort's default direction (ties: earlier start, then lower
  // root row); a page in the other direction reads it backwards.
  const std::vector<uint32_t>& order(TraceSort sort) const;

  const trace::Trace& trace_;
  std::vector<TraceListRow> rows_;
  mutable std::array<std::once_flag, kTraceSortCount> order_once_;
  mutable std::array<std::vector<uint32_t>, kTraceSortCount> orders_;
};

}  // namespace opsight::server
