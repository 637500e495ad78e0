#include "analyze/critical_path.hpp"

#include <algorithm>
#include <optional>

#include "analyze/call_tree.hpp"
#include "analyze/distribution.hpp"
#include "trace/categories.hpp"

namespace opsight::analyze {

CriticalPath compute_critical_path(const trace::Trace& trace) {
  CriticalPath path;
  const trace::SliceTable& slices = trace.slices;
  if (slices.size() == 0) return path;
  CallForest forest = CallForest::build(trace);

  // Roots by end, latest first (ties: the longer one, then the lower row). A profiler's
  // own span (PyTorch's "PyTorch Profiler (0)") marks the recording window, not work.
  const std::optional<trace::StringId> profiler = trace.strings.find(trace::kCategoryProfiler);
  std::vector<trace::RowIndex> roots;
  for (trace::RowIndex root : forest.roots())
    if (!profiler || slices.category[root] != *profiler) roots.push_back(root);
  if (roots.empty()) return path;
  std::sort(roots.begin(), roots.end(), [&slices](trace::RowIndex a, trace::RowIndex b) {
    if (slices.end(a) != slices.end(b)) return slices.end(a) > slices.end(b);
    if (slices.dur[a] != slices.dur[b]) return slices.dur[a] > slices.dur[b];
    return a < b;
  });
  int64_t cursor = slices.end(roots.front());
  path.end_ns = cursor;
  bool first = true;
  for (trace::RowIndex root : roots) {
    if (!first && slices.end(root) > cursor) {
      ++path.concurrent_roots_skipped;
      continue;
    }
    if (!first) add_saturating(path.idle_ns, cursor - slices.end(root));
    first = false;
    path.roots.push_back(root);
    cursor = slices.ts[root];
  }
  path.start_ns = cursor;
  path.length_ns = path.end_ns - path.start_ns;
  std::reverse(path.roots.begin(), path.roots.end());

  // Every descendant of a chained root, depth-first in start order.
  std::vector<int64_t> on_path_by_name(trace.strings.size(), 0);
  std::vector<uint64_t> count_by_name(trace.strings.size(), 0);
  std::vector<std::pair<trace::RowIndex, uint32_t>> stack;
  for (trace::RowIndex root : path.roots) {
    stack.push_back({root, 0});
    while (!stack.empty()) {
      auto [row, depth] = stack.back();
      stack.pop_back();
      path.steps.push_back({row, depth, forest.self_ns(row)});
      const trace::StringId name = slices.name[row];
      if (name >= on_path_by_name.size()) {
        on_path_by_name.resize(name + 1, 0);
        count_by_name.resize(name + 1, 0);
      }
      add_saturating(on_path_by_name[name], forest.self_ns(row));
      ++count_by_name[name];
      std::span<const trace::RowIndex> children = forest.children(row);
      for (auto child = children.rbegin(); child != children.rend(); ++child)
        stack.push_back({*child, depth + 1});
    }
  }
  for (size_t name = 0; name < count_by_name.size(); ++name) {
    if (count_by_name[name] == 0) continue;
    CriticalPathByName entry;
    entry.name = static_cast<trace::StringId>(name);
    entry.count = count_by_name[name];
    entry.on_path_ns = on_path_by_name[name];
    entry.share = path.length_ns > 0
                      ? static_cast<double>(entry.on_path_ns) / static_cast<double>(path.length_ns)
                      : 0.0;
    path.by_name.push_back(entry);
  }
  std::sort(path.by_name.begin(), path.by_name.end(),
            [](const CriticalPathByName& a, const CriticalPathByName& b) {
              if (a.on_path_ns != b.on_path_ns) return a.on_path_ns > b.on_path_ns;
              return a.name < b.name;
            });
  return path;
}

}  // namespace opsight::analyze
