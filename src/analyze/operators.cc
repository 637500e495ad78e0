#include "analyze/operators.hpp"

#include <algorithm>
#include <map>
#include <optional>
#include <utility>

#include "trace/categories.hpp"

namespace opsight::analyze {

std::vector<std::string> default_operator_categories() {
  return {std::string(trace::kCategoryOperator), std::string(trace::kCategoryGpuKernel)};
}

OperatorTable compute_operator_table(const trace::Trace& trace,
                                     const std::vector<std::string>& categories) {
  OperatorTable table;
  table.categories = categories;
  const trace::SliceTable& slices = trace.slices;
  const size_t slice_count = slices.size();
  std::vector<bool> is_operator_category(trace.strings.size(), false);
  for (const std::string& category : categories)
    if (auto id = trace.strings.find(category)) is_operator_category[*id] = true;
  auto is_operator = [&](size_t row) {
    const trace::StringId category = slices.category[row];
    return category < is_operator_category.size() && is_operator_category[category];
  };
  const std::optional<trace::StringId> op_name_key = trace.strings.find("op_name");

  // Self time of an operator: its duration minus that of the operators nested in it
  // (the nearest ones, through any spans that are not operators), so time spent in a
  // child that is not an operator (a kernel launch, a Python callback) stays with the
  // operator that made it and every nanosecond of operator time is in exactly one row.
  std::vector<trace::RowIndex> nearest_operator_above(slice_count, trace::kNoRow);
  std::vector<int64_t> self_times(slice_count, 0);
  for (size_t row = 0; row < slice_count; ++row) {
    const trace::RowIndex parent = slices.parent[row];
    if (parent == trace::kNoRow) continue;
    if (parent < row) {
      nearest_operator_above[row] = is_operator(parent) ? parent : nearest_operator_above[parent];
    } else {  // not in parent-first order: walk up
      for (trace::RowIndex up = parent; up != trace::kNoRow; up = slices.parent[up])
        if (is_operator(up)) {
          nearest_operator_above[row] = up;
          break;
        }
    }
  }
  for (size_t row = 0; row < slice_count; ++row) {
    if (!is_operator(row)) continue;
    add_saturating(self_times[row], slices.dur[row]);
    if (nearest_operator_above[row] != trace::kNoRow)
      add_saturating(self_times[nearest_operator_above[row]], -slices.dur[row]);
  }

  // Rows keyed on (category, op_name or name): a CPU operator and a GPU kernel of the same
  // name stay apart, since their times overlap.
  std::map<std::pair<trace::StringId, trace::StringId>, size_t> row_of_key;
  std::vector<std::vector<int64_t>> durations;
  std::map<trace::StringId, int64_t> self_by_category;
  for (size_t row = 0; row < slice_count; ++row) {
    if (!is_operator(row)) continue;
    const trace::StringId category = slices.category[row];
    trace::StringId key = slices.name[row];
    if (op_name_key && row + 1 < slices.args_begin.size()) {
      for (trace::RowIndex arg = slices.args_begin[row]; arg < slices.args_begin[row + 1]; ++arg) {
        if (trace.slice_args.key[arg] == *op_name_key &&
            trace.slice_args.value[arg].type == trace::ArgType::kString) {
          key = trace.slice_args.value[arg].string_value;
          break;
        }
      }
    }
    auto [position, inserted] = row_of_key.try_emplace({category, key}, table.rows.size());
    if (inserted) {
      OperatorRow entry;
      entry.name = std::string(trace.str(key));
      entry.category = std::string(trace.str(category));
      table.rows.push_back(std::move(entry));
      durations.emplace_back();
    }
    OperatorRow& entry = table.rows[position->second];
    durations[position->second].push_back(slices.dur[row]);
    const int64_t self = std::max<int64_t>(self_times[row], 0);
    add_saturating(entry.self_ns, self);
    add_saturating(table.total_self_ns, self);
    add_saturating(self_by_category[category], self);
    ++table.operator_slices;
  }
  for (size_t index = 0; index < table.rows.size(); ++index) {
    OperatorRow& row = table.rows[index];
    row.duration = summarize_distribution(durations[index]);
    const int64_t category_total = self_by_category[*trace.strings.find(row.category)];
    row.share = category_total > 0
                    ? static_cast<double>(row.self_ns) / static_cast<double>(category_total)
                    : 0.0;
  }
  std::sort(table.rows.begin(), table.rows.end(), [](const OperatorRow& a, const OperatorRow& b) {
    if (a.self_ns != b.self_ns) return a.self_ns > b.self_ns;
    if (a.name != b.name) return a.name < b.name;
    return a.category < b.category;
  });
  return table;
}

}  // namespace opsight::analyze
