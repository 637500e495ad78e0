#include "analyze/breakdown.hpp"

#include <algorithm>
#include <numeric>
#include <optional>
#include <unordered_map>

#include "analyze/call_tree.hpp"
#include "trace/categories.hpp"

namespace opsight::analyze {

namespace {

// One phase while it is being collected: its time per inference, stored sparsely (an
// inference appears only if it has the phase), so that many distinct child names (names
// that carry a request id, say) cost memory in proportion to the children, not to
// phases × inferences.
struct PhaseColumn {
  trace::StringId key = 0;
  std::vector<std::pair<uint32_t, int64_t>> entries;  // (inference index, time), by index
  uint64_t slices = 0;
  int64_t total_ns = 0;
};

// The slices named `name` that no other slice of that name encloses: a recursive
// "forward" inside "forward" is part of one inference, not a second one.
std::vector<trace::RowIndex> outermost_slices_named(const trace::SliceTable& slices,
                                                    trace::StringId name) {
  std::vector<trace::RowIndex> rows;
  bool any = false;
  for (size_t row = 0; row < slices.size() && !any; ++row) any = slices.name[row] == name;
  if (!any) return rows;
  // inside[row]: some ancestor of row carries the name. Parents come before their children
  // in row order after Trace::finalize(); otherwise walk up (bounded by the depth).
  std::vector<uint8_t> inside(slices.size(), 0);
  for (size_t row = 0; row < slices.size(); ++row) {
    const trace::RowIndex parent = slices.parent[row];
    if (parent == trace::kNoRow) continue;
    if (parent < row) {
      inside[row] = slices.name[parent] == name || inside[parent];
    } else {
      for (trace::RowIndex up = parent; up != trace::kNoRow; up = slices.parent[up]) {
        if (slices.name[up] == name) {
          inside[row] = 1;
          break;
        }
      }
    }
  }
  for (size_t row = 0; row < slices.size(); ++row)
    if (slices.name[row] == name && !inside[row]) rows.push_back(static_cast<trace::RowIndex>(row));
  return rows;
}

// Per track, whether it holds GPU work (a kernel, copy or memset: docs/gpu.md); empty when
// the trace has none.
std::vector<uint8_t> gpu_tracks(const trace::Trace& trace) {
  std::vector<trace::StringId> gpu_categories;
  for (std::string_view category :
       {trace::kCategoryGpuKernel, trace::kCategoryGpuMemcpy, trace::kCategoryGpuMemset})
    if (auto id = trace.strings.find(category)) gpu_categories.push_back(*id);
  std::vector<uint8_t> is_gpu_track;
  if (gpu_categories.empty()) return is_gpu_track;
  for (size_t row = 0; row < trace.slices.size(); ++row) {
    const trace::StringId category = trace.slices.category[row];
    if (std::find(gpu_categories.begin(), gpu_categories.end(), category) == gpu_categories.end())
      continue;
    if (is_gpu_track.empty()) is_gpu_track.assign(trace.tracks.size(), 0);
    is_gpu_track[trace.slices.track[row]] = 1;
  }
  return is_gpu_track;
}

}  // namespace

std::vector<trace::RowIndex> inference_slices(const trace::Trace& trace,
                                              std::string_view span_name) {
  std::optional<trace::StringId> name_id = trace.strings.find(span_name);
  if (!name_id) return {};
  const trace::SliceTable& slices = trace.slices;
  std::vector<trace::RowIndex> inferences = outermost_slices_named(slices, *name_id);
  // A span of that name on a GPU track (PyTorch's projection of a record_function range onto
  // the stream that ran its kernels) is a copy of the host's inference, not one of its own.
  std::vector<uint8_t> is_gpu_track = gpu_tracks(trace);
  if (!is_gpu_track.empty())
    std::erase_if(inferences, [&](trace::RowIndex row) { return is_gpu_track[slices.track[row]]; });
  std::stable_sort(
      inferences.begin(), inferences.end(),
      [&slices](trace::RowIndex a, trace::RowIndex b) { return slices.ts[a] < slices.ts[b]; });
  return inferences;
}

Breakdown compute_breakdown(const trace::Trace& trace, std::string_view span_name,
                            PhaseGrouping grouping, BreakdownSamples* samples) {
  Breakdown result;
  result.span_name = std::string(span_name);
  const trace::SliceTable& slices = trace.slices;
  std::vector<trace::RowIndex> inferences = inference_slices(trace, span_name);
  if (inferences.empty()) return result;
  const size_t count = inferences.size();

  CallForest forest = CallForest::build(trace);
  std::unordered_map<trace::StringId, size_t> column_of_key;
  std::vector<PhaseColumn> columns;
  std::vector<int64_t> totals(count), uncovered(count);
  int64_t first_start = slices.ts[inferences[0]];
  int64_t last_end = slices.end(inferences[0]);

  for (size_t index = 0; index < count; ++index) {
    const trace::RowIndex row = inferences[index];
    totals[index] = slices.dur[row];
    first_start = std::min(first_start, slices.ts[row]);
    last_end = std::max(last_end, slices.end(row));
    int64_t covered = 0;
    for (trace::RowIndex child : forest.children(row)) {
      const trace::StringId key =
          grouping == PhaseGrouping::kChildName ? slices.name[child] : slices.category[child];
      auto [position, inserted] = column_of_key.try_emplace(key, columns.size());
      if (inserted) columns.push_back({key, {}, 0, 0});
      PhaseColumn& column = columns[position->second];
      const auto inference = static_cast<uint32_t>(index);
      if (column.entries.empty() || column.entries.back().first != inference)
        column.entries.emplace_back(inference, 0);
      add_saturating(column.entries.back().second, slices.dur[child]);
      add_saturating(column.total_ns, slices.dur[child]);
      add_saturating(covered, slices.dur[child]);
      ++column.slices;
    }
    uncovered[index] = std::max<int64_t>(slices.dur[row] - covered, 0);
  }

  BreakdownColumns collected;
  collected.inference_count = count;
  collected.first_start_ns = first_start;
  collected.last_end_ns = last_end;
  for (const PhaseColumn& column : columns)
    collected.phases.push_back({column.key, column.entries.size(), column.slices, column.total_ns});
  collected.totals = [&totals](std::vector<int64_t>& out) { out = totals; };
  collected.uncovered = [&uncovered](std::vector<int64_t>& out) { out = uncovered; };
  collected.add_phase = [&columns](size_t phase, std::vector<int64_t>& dense) {
    for (const auto& entry : columns[phase].entries)
      add_saturating(dense[entry.first], entry.second);
  };
  result = finish_breakdown(trace, span_name, grouping, collected, samples);
  if (samples != nullptr) samples->inferences = inferences;
  return result;
}

Breakdown finish_breakdown(const trace::Trace& trace, std::string_view span_name,
                           PhaseGrouping grouping, const BreakdownColumns& collected,
                           BreakdownSamples* samples) {
  Breakdown result;
  result.span_name = std::string(span_name);
  const size_t count = collected.inference_count;
  if (count == 0) return result;
  result.inference_count = count;
  const std::vector<BreakdownPhaseColumn>& columns = collected.phases;

  // Beyond kMaxBreakdownPhases phases, the ones with least time merge into one.
  std::vector<size_t> order(columns.size());
  std::iota(order.begin(), order.end(), 0);
  std::vector<size_t> merged;
  if (columns.size() > kMaxBreakdownPhases) {
    std::stable_sort(order.begin(), order.end(), [&columns](size_t a, size_t b) {
      return columns[a].total_ns > columns[b].total_ns;
    });
    merged.assign(order.begin() + (kMaxBreakdownPhases - 1), order.end());
    order.resize(kMaxBreakdownPhases - 1);
    std::sort(order.begin(), order.end());  // back to first-appearance order
  }

  std::vector<int64_t> values;
  collected.totals(values);
  result.total = summarize_distribution(values);
  std::vector<int64_t>().swap(values);
  const double total_mean = result.total.mean_ns;
  std::vector<int64_t> dense(count);
  auto summarize = [&](BreakdownPhase& phase, const std::vector<size_t>& sources) {
    std::fill(dense.begin(), dense.end(), 0);
    for (size_t source : sources) {
      phase.slices += columns[source].slices;
      collected.add_phase(source, dense);
    }
    phase.present_in = static_cast<uint64_t>(
        std::count_if(dense.begin(), dense.end(), [](int64_t value) { return value != 0; }));
    if (sources.size() == 1) phase.present_in = columns[sources[0]].present_in;
    // Kept before summarize_distribution, which sorts the values.
    if (samples != nullptr) samples->phase_values.push_back(dense);
    phase.per_inference = summarize_distribution(dense);
    phase.share_of_total = total_mean > 0 ? phase.per_inference.mean_ns / total_mean : 0.0;
  };
  for (size_t column : order) {
    BreakdownPhase phase;
    std::string_view key_text = trace.str(columns[column].key);
    phase.name =
        key_text.empty()
            ? std::string(grouping == PhaseGrouping::kChildName ? "(unnamed)" : "(no category)")
            : std::string(key_text);
    summarize(phase, {column});
    result.phases.push_back(std::move(phase));
  }
  if (!merged.empty()) {
    BreakdownPhase other;
    other.name = "(" + std::to_string(merged.size()) + " other phases)";
    other.other_phases = merged.size();
    summarize(other, merged);
    result.phases.push_back(std::move(other));
  }
  std::vector<int64_t>().swap(dense);
  BreakdownPhase rest;
  rest.name = "(uncovered)";
  rest.uncovered = true;
  collected.uncovered(values);
  rest.present_in = static_cast<uint64_t>(
      std::count_if(values.begin(), values.end(), [](int64_t value) { return value > 0; }));
  if (samples != nullptr) samples->phase_values.push_back(values);  // before it is sorted
  rest.per_inference = summarize_distribution(values);
  rest.share_of_total = total_mean > 0 ? rest.per_inference.mean_ns / total_mean : 0.0;
  result.phases.push_back(std::move(rest));

  result.wall_ns = collected.last_end_ns - collected.first_start_ns;
  result.inferences_per_second =
      result.wall_ns > 0 ? static_cast<double>(count) * 1e9 / static_cast<double>(result.wall_ns)
                         : 0.0;
  return result;
}

}  // namespace opsight::analyze
