#include "analyze/aggregate_tree.hpp"

#include <algorithm>
#include <numeric>

namespace opsight::analyze {

namespace {

// Open-addressing hash table from (parent node, name) to node: a few hundred distinct
// paths in a typical trace, looked up once per slice, so it stays in cache. Key and value
// share a slot, so a probe touches one cache line.
class PathTable {
 public:
  PathTable() { resize(1024); }

  // The node for (parent, name), created as `next_node` when new (*created set).
  uint32_t find_or_insert(uint32_t parent, trace::StringId name, uint32_t next_node,
                          bool* created) {
    const uint64_t key = (static_cast<uint64_t>(parent) << 32) | name;
    size_t slot = static_cast<size_t>(trace::mix64(key)) & mask_;
    while (true) {
      Slot& entry = slots_[slot];
      if (entry.node == kNoNode) {
        entry = {key, next_node};
        *created = true;
        if (++size_ * 2 > slots_.size()) grow();
        return next_node;
      }
      if (entry.key == key) {
        *created = false;
        return entry.node;
      }
      slot = (slot + 1) & mask_;
    }
  }

 private:
  struct Slot {
    uint64_t key = 0;
    uint32_t node = kNoNode;
  };

  void resize(size_t capacity) {
    slots_.assign(capacity, Slot{});
    mask_ = capacity - 1;
  }
  void grow() {
    std::vector<Slot> old_slots = std::move(slots_);
    resize(old_slots.size() * 2);
    for (const Slot& old : old_slots) {
      if (old.node == kNoNode) continue;
      size_t slot = static_cast<size_t>(trace::mix64(old.key)) & mask_;
      while (slots_[slot].node != kNoNode) slot = (slot + 1) & mask_;
      slots_[slot] = old;
    }
  }

  std::vector<Slot> slots_;
  size_t mask_ = 0;
  size_t size_ = 0;
};

// Rows in an order where every parent comes before its children: row order itself after
// Trace::finalize() (slices sorted by track, start, longer first), otherwise by depth.
std::vector<trace::RowIndex> parent_first_order(const trace::SliceTable& slices) {
  const size_t count = slices.size();
  bool row_order_works = true;
  for (size_t row = 0; row < count && row_order_works; ++row)
    row_order_works = slices.parent[row] == trace::kNoRow || slices.parent[row] < row;
  if (row_order_works) return {};
  std::vector<trace::RowIndex> order(count);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&slices](trace::RowIndex a, trace::RowIndex b) {
    return slices.depth[a] < slices.depth[b];
  });
  return order;
}

}  // namespace

AggregateTree AggregateTree::build(const trace::Trace& trace, bool keep_durations) {
  const trace::SliceTable& slices = trace.slices;
  const size_t slice_count = slices.size();
  AggregateTree tree;
  if (slice_count == 0) {
    if (keep_durations) tree.duration_begin_.assign(1, 0);
    return tree;
  }

  // Pass 1: the node of every row, and per node its count, self time and first start.
  std::vector<AggregatePath> building;
  trace::Column<uint32_t> node_of_row(slice_count, kNoNode);  // huge pages: see trace.hpp
  PathTable paths;
  std::vector<trace::RowIndex> order = parent_first_order(slices);
  for (size_t position = 0; position < slice_count; ++position) {
    const trace::RowIndex row =
        order.empty() ? static_cast<trace::RowIndex>(position) : order[position];
    const trace::RowIndex parent_row = slices.parent[row];
    const uint32_t parent_node = parent_row == trace::kNoRow ? kNoNode : node_of_row[parent_row];
    bool created = false;
    const uint32_t node = paths.find_or_insert(parent_node, slices.name[row],
                                               static_cast<uint32_t>(building.size()), &created);
    if (created)
      building.push_back(
          {parent_node, slices.name[row], slices.category[row], 0, 0, slices.ts[row]});
    node_of_row[row] = node;
    AggregatePath& entry = building[node];
    ++entry.count;
    add_saturating(entry.self_ns, slices.dur[row]);
    entry.first_start_ns = std::min(entry.first_start_ns, slices.ts[row]);
    if (parent_node != kNoNode) add_saturating(building[parent_node].self_ns, -slices.dur[row]);
  }
  const size_t node_count = building.size();

  // Pass 2: durations grouped by node (counting sort).
  std::vector<uint64_t> group_begin(node_count + 1, 0);
  for (size_t node = 0; node < node_count; ++node)
    group_begin[node + 1] = group_begin[node] + building[node].count;
  trace::Column<int64_t> grouped(slice_count);
  {
    std::vector<uint64_t> cursor(group_begin.begin(), group_begin.end() - 1);
    for (size_t row = 0; row < slice_count; ++row)
      grouped[cursor[node_of_row[row]]++] = slices.dur[row];
  }
  trace::Column<uint32_t>().swap(node_of_row);
  return from_paths(
      building,
      [&](uint32_t node) {
        return std::span<int64_t>(grouped.data() + group_begin[node],
                                  static_cast<size_t>(building[node].count));
      },
      keep_durations);
}

AggregateTree AggregateTree::from_paths(
    const std::vector<AggregatePath>& building,
    const std::function<std::span<int64_t>(uint32_t)>& durations_of, bool keep_durations) {
  AggregateTree tree;
  const size_t node_count = building.size();
  if (node_count == 0) {
    if (keep_durations) tree.duration_begin_.assign(1, 0);
    return tree;
  }
  uint64_t slice_count = 0;
  for (const AggregatePath& path : building) slice_count += path.count;

  // Children of every node (compressed rows), ordered by first start, then a depth-first
  // walk that numbers nodes in output order.
  std::vector<uint32_t> child_begin(node_count + 1, 0);
  std::vector<uint32_t> roots;
  for (size_t node = 0; node < node_count; ++node) {
    if (building[node].parent == kNoNode)
      roots.push_back(static_cast<uint32_t>(node));
    else
      ++child_begin[building[node].parent + 1];
  }
  for (size_t node = 0; node < node_count; ++node) child_begin[node + 1] += child_begin[node];
  std::vector<uint32_t> children(child_begin[node_count]);
  {
    std::vector<uint32_t> cursor(child_begin.begin(), child_begin.end() - 1);
    for (size_t node = 0; node < node_count; ++node)
      if (building[node].parent != kNoNode)
        children[cursor[building[node].parent]++] = static_cast<uint32_t>(node);
  }
  auto by_first_start = [&building](uint32_t a, uint32_t b) {
    if (building[a].first_start_ns != building[b].first_start_ns)
      return building[a].first_start_ns < building[b].first_start_ns;
    return a < b;
  };
  std::sort(roots.begin(), roots.end(), by_first_start);
  for (size_t node = 0; node < node_count; ++node)
    std::sort(children.begin() + child_begin[node], children.begin() + child_begin[node + 1],
              by_first_start);

  tree.nodes_.reserve(node_count);
  if (keep_durations) {
    tree.duration_begin_.reserve(node_count + 1);
    tree.duration_begin_.push_back(0);
    tree.durations_.reserve(slice_count);
  }
  struct Pending {
    uint32_t old_node;
    uint32_t new_parent;
    uint32_t depth;
  };
  std::vector<Pending> stack;
  for (auto root = roots.rbegin(); root != roots.rend(); ++root)
    stack.push_back({*root, kNoNode, 0});
  while (!stack.empty()) {
    Pending pending = stack.back();
    stack.pop_back();
    const AggregatePath& source = building[pending.old_node];
    const auto new_index = static_cast<uint32_t>(tree.nodes_.size());
    AggregateNode node;
    node.parent = pending.new_parent;
    node.depth = pending.depth;
    node.name = source.name;
    node.category = source.category;
    node.self_ns = std::max<int64_t>(source.self_ns, 0);
    node.first_start_ns = source.first_start_ns;
    std::span<int64_t> durations = durations_of(pending.old_node);
    node.duration = summarize_distribution(durations);
    if (keep_durations) {
      std::sort(durations.begin(), durations.end());
      tree.durations_.insert(tree.durations_.end(), durations.begin(), durations.end());
      tree.duration_begin_.push_back(tree.durations_.size());
    }
    node.child_count = child_begin[pending.old_node + 1] - child_begin[pending.old_node];
    if (pending.new_parent == kNoNode) {
      tree.roots_.push_back(new_index);
    } else {
      const AggregateNode& parent = tree.nodes_[pending.new_parent];
      node.calls_per_parent_call = parent.duration.count > 0
                                       ? static_cast<double>(node.duration.count) /
                                             static_cast<double>(parent.duration.count)
                                       : 1.0;
      node.share_of_parent = parent.duration.total_ns > 0
                                 ? static_cast<double>(node.duration.total_ns) /
                                       static_cast<double>(parent.duration.total_ns)
                                 : 1.0;
    }
    tree.nodes_.push_back(node);
    for (uint32_t child = child_begin[pending.old_node + 1];
         child-- > child_begin[pending.old_node];)
      stack.push_back({children[child], new_index, pending.depth + 1});
  }
  return tree;
}

std::span<const int64_t> AggregateTree::durations(uint32_t node) const {
  if (static_cast<size_t>(node) + 1 >= duration_begin_.size()) return {};
  return {durations_.data() + duration_begin_[node],
          static_cast<size_t>(duration_begin_[node + 1] - duration_begin_[node])};
}

std::string AggregateTree::path(const trace::Trace& trace, uint32_t node) const {
  std::vector<std::string_view> names;
  for (uint32_t current = node; current != kNoNode && current < nodes_.size();
       current = nodes_[current].parent)
    names.push_back(trace.str(nodes_[current].name));
  std::string text;
  for (auto name = names.rbegin(); name != names.rend(); ++name) {
    if (!text.empty()) text += " / ";
    text += *name;
  }
  return text;
}

}  // namespace opsight::analyze
