// The critical path of a trace: the chain of spans that sets its end-to-end time.
//
// Walking back from the end of the trace (as Jaeger's critical path does for a request):
// the root span (of any thread, process or asyncio task) that ends last is on the path;
// before its start, the root that ends last at or before that start; and so on back to
// the beginning. Spans of the canonical "profiler" category (a profiler's own span over
// its recording window) are left out. Roots that overlap the chosen one without ending before its
// start ran concurrently and did not set the end-to-end time. Time between two chained roots that
// no span covers is idle (waiting on something untraced).
//
// Inside a root, spans of one track nest and never overlap, so every descendant is on the
// path, each for its self time; steps() lists them all, and the per-name totals say where
// the end-to-end time went.
//
// Thread-safety: pure functions over a finalized trace.
#pragma once

#include <cstdint>
#include <vector>

#include "trace/trace.hpp"

namespace opsight::analyze {

struct CriticalStep {
  trace::RowIndex row = trace::kNoRow;
  uint32_t depth = 0;      // 0 for a root
  int64_t on_path_ns = 0;  // its self time (what it adds to the path itself)
};

struct CriticalPathByName {
  trace::StringId name = 0;
  uint64_t count = 0;      // its slices on the path
  int64_t on_path_ns = 0;  // their self time
  double share = 0.0;      // on_path_ns / path length
};

struct CriticalPath {
  int64_t start_ns = 0;                     // first start of the chain's first root
  int64_t end_ns = 0;                       // end of the last root
  int64_t length_ns = 0;                    // end_ns - start_ns
  int64_t idle_ns = 0;                      // gaps between chained roots
  std::vector<trace::RowIndex> roots;       // the chained roots, in time order
  std::vector<CriticalStep> steps;          // depth-first, in time order
  std::vector<CriticalPathByName> by_name;  // by on_path_ns, descending
  uint64_t concurrent_roots_skipped = 0;    // roots not on the path
};

CriticalPath compute_critical_path(const trace::Trace& trace);

}  // namespace opsight::analyze
