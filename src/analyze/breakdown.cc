#include "analyze/breakdown.hpp"

#include <algorithm>
#include <optional>
#include <unordered_map>

#include "analyze/call_tree.hpp"

namespace opsight::analyze {

Breakdown compute_breakdown(const trace::Trace& trace, std::string_view span_name,
                            PhaseGrouping grouping) {
  Breakdown result;
  result.span_name = std::string(span_name);
  std::optional<trace::StringId> name_id = trace.strings.find(span_name);
  if (!name_id) return result;
  const trace::SliceTable& slices = trace.slices;

  std::vector<trace::RowIndex> inferences;
  for (size_t row = 0; row < slices.size(); ++row)
    if (slices.name[row] == *name_id) inferences.push_back(static_cast<trace::RowIndex>(row));
  if (inferences.empty()) return result;
  // Stable order over tracks: by start time.
  std::stable_sort(
      inferences.begin(), inferences.end(),
      [&slices](trace::RowIndex a, trace::RowIndex b) { return slices.ts[a] < slices.ts[b]; });
  const size_t count = inferences.size();
  result.inference_count = count;

  CallForest forest = CallForest::build(trace);
  // Phase columns: key (a StringId of a name or category) -> column index.
  std::unordered_map<trace::StringId, size_t> column_of_key;
  std::vector<trace::StringId> column_keys;
  std::vector<std::vector<int64_t>> columns;  // [column][inference]
  std::vector<uint64_t> present_in, slices_in;
  std::vector<int64_t> totals(count), uncovered(count);
  std::vector<size_t> last_seen_in;  // per column: the last inference that had it (+1)
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
      if (inserted) {
        column_keys.push_back(key);
        columns.emplace_back(count, 0);
        present_in.push_back(0);
        slices_in.push_back(0);
        last_seen_in.push_back(0);
      }
      const size_t column = position->second;
      add_saturating(columns[column][index], slices.dur[child]);
      add_saturating(covered, slices.dur[child]);
      ++slices_in[column];
      if (last_seen_in[column] != index + 1) {
        last_seen_in[column] = index + 1;
        ++present_in[column];
      }
    }
    uncovered[index] = std::max<int64_t>(slices.dur[row] - covered, 0);
  }

  result.total = summarize_distribution(totals);
  const double total_mean = result.total.mean_ns;
  for (size_t column = 0; column < columns.size(); ++column) {
    BreakdownPhase phase;
    std::string_view key_text = trace.str(column_keys[column]);
    phase.name =
        key_text.empty()
            ? std::string(grouping == PhaseGrouping::kChildName ? "(unnamed)" : "(no category)")
            : std::string(key_text);
    phase.present_in = present_in[column];
    phase.slices = slices_in[column];
    phase.per_inference = summarize_distribution(columns[column]);
    phase.share_of_total = total_mean > 0 ? phase.per_inference.mean_ns / total_mean : 0.0;
    result.phases.push_back(std::move(phase));
  }
  BreakdownPhase rest;
  rest.name = "(uncovered)";
  rest.uncovered = true;
  rest.present_in = static_cast<uint64_t>(
      std::count_if(uncovered.begin(), uncovered.end(), [](int64_t value) { return value > 0; }));
  rest.per_inference = summarize_distribution(uncovered);
  rest.share_of_total = total_mean > 0 ? rest.per_inference.mean_ns / total_mean : 0.0;
  result.phases.push_back(std::move(rest));

  result.wall_ns = last_end - first_start;
  result.inferences_per_second =
      result.wall_ns > 0 ? static_cast<double>(count) * 1e9 / static_cast<double>(result.wall_ns)
                         : 0.0;
  return result;
}

}  // namespace opsight::analyze
