// Per-inference breakdown (Qualcomm's system-level split, the Furiosa profiler's
// inference view): given the name of the span that marks one inference, every such span
// is split into phases, the time of its direct children grouped by child name (or by
// child category), plus the time no child covers. Each phase gets a distribution over the
// inferences (mean, min, p50, p75, p90, p95, p99, max), and the whole gets inferences per
// second.
//
// Definitions (docs/reports.md repeats them):
//   - an inference contributes 0 to a phase it does not have, so that for the means
//     sum(phase means) + uncovered mean == total mean exactly; `present_in` counts the
//     inferences that had the phase;
//   - uncovered = the inference's duration minus its children's durations, never negative
//     (children nest inside their parent and do not overlap after Trace::finalize(); the
//     Furiosa profiler prints an unsigned underflow here);
//   - inferences per second = count / (last inference end - first inference start);
//     for inferences run back to back it is 1 / mean latency;
//   - a span of that name inside another one (recursion) is part of the outer inference,
//     not an inference of its own; nor is one on a GPU track (see inference_slices);
//   - beyond kMaxBreakdownPhases phases (names that carry a request id, say), the phases
//     with the least total time merge into one "(N other phases)" row.
// Memory: in proportion to the children of the inferences, not phases × inferences.
//
// Thread-safety: pure functions over a finalized trace.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "analyze/distribution.hpp"
#include "trace/trace.hpp"

namespace opsight::analyze {

enum class PhaseGrouping { kChildName, kChildCategory };

inline constexpr size_t kMaxBreakdownPhases = 32;

struct BreakdownPhase {
  std::string name;  // child name or category; "(uncovered)" for the time no child covers
  bool uncovered = false;
  uint64_t other_phases = 0;    // > 0 for the row that merges the phases beyond the limit
  uint64_t present_in = 0;      // inferences with at least one such child
  uint64_t slices = 0;          // children counted into the phase (several per inference allowed)
  Distribution per_inference;   // one value per inference (0 where absent)
  double share_of_total = 0.0;  // phase mean / total mean
};

struct Breakdown {
  std::string span_name;
  uint64_t inference_count = 0;
  Distribution total;                  // the inference spans' durations
  std::vector<BreakdownPhase> phases;  // in order of first appearance, uncovered last
  double inferences_per_second = 0.0;
  int64_t wall_ns = 0;  // first inference start to last inference end
};

// Each single inference of a breakdown (the UI's stacked bar per inference): its slice
// row, in time order, and each phase's time in it, phases in Breakdown::phases' order
// (0 where it lacks the phase). phases x inferences values: asked for only when wanted.
struct BreakdownSamples {
  std::vector<trace::RowIndex> inferences;
  std::vector<std::vector<int64_t>> phase_values;  // [phase][inference]
};

// The inferences of a breakdown: the slices named `span_name` that no other slice of that
// name encloses and that are not on a GPU track (a track holding kernels, copies or
// memsets: there a span of that name is PyTorch's projection of the host's range), in time
// order.
std::vector<trace::RowIndex> inference_slices(const trace::Trace& trace,
                                              std::string_view span_name);

// The breakdown of every slice named `span_name`. inference_count is 0 if there is none.
// With `samples`, also each inference's phase times (whose means are the phases' means).
Breakdown compute_breakdown(const trace::Trace& trace, std::string_view span_name,
                            PhaseGrouping grouping = PhaseGrouping::kChildName,
                            BreakdownSamples* samples = nullptr);

// What a breakdown is computed from, however it was collected (compute_breakdown from the
// trace's rows, the streaming breakdown from a file's spans as they end): the inferences'
// count and time bounds, and per phase, in order of first appearance (the inferences in
// time order, each one's children in row order), its key, counts and total; the values
// come through the callbacks, so that a collector may hold them compactly.
struct BreakdownPhaseColumn {
  trace::StringId key = 0;  // child name or category
  uint64_t present_in = 0;  // inferences with at least one such child
  uint64_t slices = 0;      // children counted into it
  int64_t total_ns = 0;
};
struct BreakdownColumns {
  uint64_t inference_count = 0;
  int64_t first_start_ns = 0;  // of the first inference
  int64_t last_end_ns = 0;     // the latest inference end
  std::vector<BreakdownPhaseColumn> phases;
  // Fills `out` (empty) with one value per inference: its duration, and its time no child
  // covers; in any order, the same for both.
  std::function<void(std::vector<int64_t>& out)> totals;
  std::function<void(std::vector<int64_t>& out)> uncovered;
  // Adds phase `phase`'s time per inference into `dense` (inference_count values, indexed
  // as `totals` orders the inferences).
  std::function<void(size_t phase, std::vector<int64_t>& dense)> add_phase;
};

// The breakdown from collected columns, with the phases beyond kMaxBreakdownPhases merged;
// `strings` names the keys. compute_breakdown ends here.
Breakdown finish_breakdown(const trace::Trace& strings, std::string_view span_name,
                           PhaseGrouping grouping, const BreakdownColumns& columns,
                           BreakdownSamples* samples = nullptr);

}  // namespace opsight::analyze
