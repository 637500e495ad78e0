// Per-name statistics over a trace's slices, and the tracer's own overhead.
//
// compute_name_statistics() groups every slice by its interned name (a vector indexed by
// StringId, never a hash of strings) and gives, per distinct name, the Distribution of its
// durations (distribution.hpp: count, inclusive total, min, mean, exact percentiles, max,
// population standard deviation) with its self time, the most common category, and the
// share of traced time.
//
// Definitions (docs/reports.md repeats them for users; those of the Distribution are in
// distribution.hpp):
//   - self time of a slice = its duration minus the durations of its direct children (the
//     slices whose `parent` is that slice). After Trace::finalize() children nest inside
//     their parent and do not overlap each other, so this is the time not covered by them.
//   - share of traced time = total_ns / traced_time_ns(trace). Nested names each count
//     their inclusive time, so shares of different names can add up to more than 1.
//
// Thread-safety: every function here is pure: it reads the trace (which must not be
// modified meanwhile) and returns a new value; concurrent calls are safe.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "analyze/distribution.hpp"
#include "analyze/metrics.hpp"
#include "trace/trace.hpp"

namespace opsight::analyze {

// The percentiles the summary report shows, in percent, ascending (a subset of
// kDistributionPercentiles).
inline constexpr std::array<double, 6> kSummaryPercentiles = {50.0, 90.0, 95.0, 97.0, 99.0, 99.9};

// Statistics of every slice that carries one name: the Distribution of their durations
// (total_ns inclusive: the sum of durations), and what only a name has.
struct NameStatistics : Distribution {
  trace::StringId name = 0;
  trace::StringId category = 0;  // the most common category among its slices
  int64_t self_ns = 0;           // sum of self times (see the definitions above)
  double share_of_traced = 0.0;  // total_ns / traced time, a fraction (0.25 = 25%)
};

struct TraceStatistics {
  // One entry per distinct slice name, ordered by StringId (the order names were first
  // interned); reports sort them as they need.
  std::vector<NameStatistics> names;
  uint64_t slice_count = 0;
  int64_t traced_ns = 0;  // the denominator of share_of_traced (see traced_time_ns)
};

// Per-name statistics of all slices of a finalized trace. Linear time in the number of
// slices plus a selection per name; one temporary array of durations (8 bytes a slice).
TraceStatistics compute_name_statistics(const trace::Trace& trace);

// Self time of every slice, indexed by row: duration minus the durations of its direct
// children, never negative.
std::vector<int64_t> compute_self_times(const trace::Trace& trace);

// The traced time of a trace: run.traced_ns when the recorder wrote it, otherwise the
// span of Trace::time_bounds() (last end minus first start).
int64_t traced_time_ns(const trace::Trace& trace);

// What an export did with the run's spans (RunInfo::extra "export:<target>").
struct ExportOutcome {
  std::string target;  // "otlp http://127.0.0.1:4318/v1/traces"
  uint64_t spans = 0;
  uint64_t sent = 0;
  uint64_t dropped = 0;
};

// Every "export:<target>" = "<spans> <sent> <dropped>" of `run.extra`, in order; malformed
// values are skipped.
std::vector<ExportOutcome> parse_export_outcomes(const trace::RunInfo& run);

// What the tracer cost, as every report shows it (HiQ's "transparent" tracing).
// What sampling kept (RunInfo::extra "sampling", "sampling_units",
// "sampling_units_recorded"): every count of a sampled trace is of the recorded units.
struct SamplingSummary {
  std::string policy;  // "1 in 100 of 'handle_request' spans"; empty: not sampled
  uint64_t units = 0;
  uint64_t recorded = 0;
  bool sampled() const { return !policy.empty(); }
};
SamplingSummary parse_sampling(const trace::RunInfo& run);

// What a flight recorder's dump says of its ring (RunInfo::extra "ring_*", "dump_trigger";
// docs/production.md); empty: the run was not recorded through a ring.
struct RingSummary {
  int64_t max_age_ns = 0;
  uint64_t max_bytes = 0;
  int64_t held_ns = 0;  // how far back the ring reached when it was dumped
  uint64_t events_dropped = 0;
  std::string trigger;
  bool present() const { return max_bytes != 0; }
};
RingSummary parse_ring(const trace::RunInfo& run);

struct OverheadSummary {
  // run.overhead_ns, or the sum of the tracks' overhead_ns when the run total is 0.
  int64_t overhead_ns = 0;
  // Whether the trace says anything about overhead at all: false for foreign traces
  // (Chrome JSON, PyTorch profiler...) that recorded no overhead, where 0 would mislead.
  bool overhead_known = false;
  int64_t traced_ns = 0;        // traced_time_ns(trace)
  double share = 0.0;           // overhead_ns / traced_ns as a fraction; 0 when traced_ns is 0
  uint64_t events_dropped = 0;  // run.events_dropped, or the sum over tracks if it is 0
  // What metrics cost (RunInfo::extra "metric_cost.*"); empty when the trace has no such
  // figures. The per-span groups are part of overhead_ns; the sampler is not.
  MetricCost metric_cost;
  // What each export target got (drops included); empty when nothing was exported.
  std::vector<ExportOutcome> exports;
  SamplingSummary sampling;
  RingSummary ring;
};

OverheadSummary summarize_overhead(const trace::Trace& trace);

}  // namespace opsight::analyze
