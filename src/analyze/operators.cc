#include "analyze/operators.hpp"

#include <algorithm>
#include <optional>
#include <unordered_map>

#include "analyze/statistics.hpp"
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
  std::vector<bool> is_operator_category(trace.strings.size(), false);
  for (const std::string& category : categories)
    if (auto id = trace.strings.find(category)) is_operator_category[*id] = true;
  const std::optional<trace::StringId> op_name_key = trace.strings.find("op_name");

  std::vector<int64_t> self_times = compute_self_times(trace);
  // Row key: the StringId of op_name's value, else of the slice name.
  std::unordered_map<trace::StringId, size_t> row_of_key;
  std::vector<std::vector<int64_t>> durations;
  for (size_t row = 0; row < slices.size(); ++row) {
    const trace::StringId category = slices.category[row];
    if (category >= is_operator_category.size() || !is_operator_category[category]) continue;
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
    auto [position, inserted] = row_of_key.try_emplace(key, table.rows.size());
    if (inserted) {
      OperatorRow entry;
      entry.name = std::string(trace.str(key));
      entry.category = std::string(trace.str(category));
      table.rows.push_back(std::move(entry));
      durations.emplace_back();
    }
    OperatorRow& entry = table.rows[position->second];
    durations[position->second].push_back(slices.dur[row]);
    add_saturating(entry.self_ns, self_times[row]);
    add_saturating(table.total_self_ns, self_times[row]);
    ++table.operator_slices;
  }
  for (size_t index = 0; index < table.rows.size(); ++index) {
    table.rows[index].duration = summarize_distribution(durations[index]);
    table.rows[index].share = table.total_self_ns > 0
                                  ? static_cast<double>(table.rows[index].self_ns) /
                                        static_cast<double>(table.total_self_ns)
                                  : 0.0;
  }
  std::sort(table.rows.begin(), table.rows.end(), [](const OperatorRow& a, const OperatorRow& b) {
    if (a.self_ns != b.self_ns) return a.self_ns > b.self_ns;
    return a.name < b.name;
  });
  return table;
}

}  // namespace opsight::analyze
