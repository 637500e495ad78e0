#include "report/streaming_views.hpp"

#include <algorithm>
#include <numeric>
#include <span>

#include "analyze/distribution.hpp"
#include "trace/categories.hpp"

namespace opsight::report::internal {

namespace {

// A row's rank as the whole-file reader orders rows (streaming_views.hpp).
StreamRowRank stream_row_rank(bool async, int64_t pid, uint64_t async_id, int64_t start_ns,
                              uint64_t begin) {
  if (!async) return StreamRowRank{0, 0, 0, 0, begin};
  return StreamRowRank{1, pid, async_id, start_ns, begin};
}

}  // namespace

StreamingPathViews::StreamingPathViews(trace::Trace& context, bool merged_tree,
                                       std::string breakdown_span, analyze::PhaseGrouping grouping)
    : context_(context),
      merged_tree_(merged_tree),
      breakdown_span_(std::move(breakdown_span)),
      grouping_(grouping) {}

StreamingPathViews::Stack& StreamingPathViews::stack_of(bool async, int64_t pid, uint64_t async_id,
                                                        uint64_t lane_serial) {
  if (async) return async_[AsyncKey{pid, async_id}];
  if (cached_stack_ == nullptr || cached_serial_ != lane_serial) {
    cached_stack_ = &lanes_[lane_serial];  // stays valid: unordered_map nodes do not move
    cached_serial_ = lane_serial;
  }
  return *cached_stack_;
}

uint32_t StreamingPathViews::node_of(uint32_t parent_node, trace::StringId name, bool* created) {
  std::array<uint32_t, 2>& recent =
      parent_node == analyze::kNoNode ? recent_roots_ : recent_children_[parent_node];
  for (uint32_t candidate : recent)
    if (candidate != analyze::kNoNode && nodes_[candidate].name == name) {
      *created = false;
      return candidate;
    }
  const uint64_t path = (static_cast<uint64_t>(parent_node) << 32) | name;
  auto found = node_of_path_.try_emplace(path, static_cast<uint32_t>(nodes_.size()));
  *created = found.second;
  const uint32_t node = found.first->second;
  recent[1] = recent[0];
  recent[0] = node;
  return node;
}

// An async id's or a task lane's stack goes once empty (there may be millions over a run);
// a thread's own lane stays.
void StreamingPathViews::release_stack(bool async, int64_t pid, uint64_t async_id, uint64_t lane,
                                       uint64_t serial) {
  if (async) {
    async_.erase(AsyncKey{pid, async_id});
  } else if (lane != 0) {
    if (serial == cached_serial_) cached_stack_ = nullptr;
    lanes_.erase(serial);
  }
}

bool StreamingPathViews::is_breakdown_name(trace::StringId name) {
  if (name >= breakdown_name_.size()) breakdown_name_.resize(size_t{name} + 1, -1);
  int8_t& known = breakdown_name_[name];
  if (known < 0) known = context_.str(name) == breakdown_span_ ? 1 : 0;
  return known == 1;
}

bool StreamingPathViews::is_gpu_category(trace::StringId category) {
  if (category >= gpu_category_.size()) gpu_category_.resize(size_t{category} + 1, -1);
  int8_t& known = gpu_category_[category];
  if (known < 0) {
    const std::string_view text = context_.str(category);
    known = text == trace::kCategoryGpuKernel || text == trace::kCategoryGpuMemcpy ||
                    text == trace::kCategoryGpuMemset
                ? 1
                : 0;
  }
  return known == 1;
}

void StreamingPathViews::on_begin(const io::BegunSpan& span, trace::StringId name,
                                  trace::StringId category) {
  const uint64_t begin = next_begin_++;
  Stack& stack = stack_of(span.async, span.pid, span.async_id, span.lane_serial);
  OpenEntry entry;
  entry.begin = begin;
  const OpenEntry* parent = stack.empty() ? nullptr : &stack.back();
  if (merged_tree_) {
    const uint32_t parent_node = parent != nullptr ? parent->node : analyze::kNoNode;
    bool created = false;
    const uint32_t node_index = node_of(parent_node, name, &created);
    const StreamRowRank rank =
        stream_row_rank(span.async, span.pid, span.async_id, span.start_unix_ns, begin);
    if (created) {
      nodes_.push_back({parent_node, name, category, 0, 0, span.start_unix_ns});
      node_rank_.push_back(rank);
      node_durations_.emplace_back();
      recent_children_.push_back({analyze::kNoNode, analyze::kNoNode});
    } else {
      analyze::AggregatePath& node = nodes_[node_index];
      node.first_start_ns = std::min(node.first_start_ns, span.start_unix_ns);
      if (rank < node_rank_[node_index]) {  // an async span's earlier row, or a sync one
        node_rank_[node_index] = rank;      // on an async root's path
        node.category = category;
      }
    }
    entry.node = node_index;
  }
  if (!breakdown_span_.empty()) {
    entry.inside = parent != nullptr && (parent->inside || parent->named);
    entry.named = is_breakdown_name(name);
    if (entry.named && !entry.inside) {
      if (free_inferences_.empty()) {
        free_inferences_.push_back(static_cast<uint32_t>(open_inferences_.size()));
        open_inferences_.emplace_back();
      }
      entry.inference = free_inferences_.back();
      free_inferences_.pop_back();
      OpenInference& inference = open_inferences_[entry.inference];
      inference.start_ns = span.start_unix_ns;
      inference.rank =
          stream_row_rank(span.async, span.pid, span.async_id, span.start_unix_ns, begin);
      inference.covered = 0;
      inference.phases.clear();
    }
  }
  stack.push_back(entry);
}

void StreamingPathViews::on_span(const io::EndedSpan& span, trace::StringId name,
                                 trace::StringId category) {
  Stack& stack = stack_of(span.async, span.pid, span.async_id, span.lane_serial);
  if (stack.empty()) {
    ++unmatched_ends_;
    return;
  }
  const OpenEntry entry = stack.back();
  stack.pop_back();
  const OpenEntry* parent = stack.empty() ? nullptr : &stack.back();
  const int64_t duration = span.end_unix_ns - span.start_unix_ns;
  if (merged_tree_) {
    analyze::AggregatePath& node = nodes_[entry.node];
    ++node.count;
    analyze::add_saturating(node.self_ns, duration);
    node_durations_[entry.node].append(duration);
    if (parent != nullptr) analyze::add_saturating(nodes_[parent->node].self_ns, -duration);
  }
  if (!breakdown_span_.empty()) {
    if (!saw_gpu_work_ && is_gpu_category(category)) saw_gpu_work_ = true;
    if (parent != nullptr && parent->inference != kNone) {
      // A direct child of an open inference: into its phase.
      OpenInference& inference = open_inferences_[parent->inference];
      const trace::StringId key = grouping_ == analyze::PhaseGrouping::kChildName ? name : category;
      const StreamRowRank rank =
          stream_row_rank(span.async, span.pid, span.async_id, span.start_unix_ns, entry.begin);
      auto phase =
          std::find_if(inference.phases.begin(), inference.phases.end(),
                       [key](const InferencePhase& candidate) { return candidate.key == key; });
      if (phase == inference.phases.end()) {
        inference.phases.push_back({key, 0, 0, rank});
        phase = inference.phases.end() - 1;
      }
      analyze::add_saturating(phase->sum, duration);
      ++phase->children;
      phase->first_child = std::min(phase->first_child, rank);
      analyze::add_saturating(inference.covered, duration);
    }
    if (entry.inference != kNone) {
      end_inference(open_inferences_[entry.inference], duration, span.end_unix_ns);
      free_inferences_.push_back(entry.inference);
    }
  }
  if (stack.empty())
    release_stack(span.async, span.pid, span.async_id, span.lane, span.lane_serial);
}

void StreamingPathViews::end_inference(OpenInference& inference, int64_t duration, int64_t end_ns) {
  const uint64_t number = inference_count_++;
  if (number == 0) {
    first_start_ns_ = inference.start_ns;
    last_end_ns_ = end_ns;
  }
  first_start_ns_ = std::min(first_start_ns_, inference.start_ns);
  last_end_ns_ = std::max(last_end_ns_, end_ns);
  totals_.append(duration);
  uncovered_.append(std::max<int64_t>(duration - inference.covered, 0));
  for (const InferencePhase& phase : inference.phases) {
    auto [found, created] =
        phase_of_key_.try_emplace(phase.key, static_cast<uint32_t>(phases_.size()));
    const PhaseKey key{inference.start_ns, inference.rank, phase.first_child};
    if (created) {
      phases_.emplace_back();
      phases_.back().key = phase.key;
      phases_.back().first = key;
    }
    PhaseState& state = phases_[found->second];
    state.values.append(phase.sum);
    state.inferences.append(static_cast<int64_t>(number));
    ++state.present_in;
    state.slices += phase.children;
    analyze::add_saturating(state.total_ns, phase.sum);
    state.first = std::min(state.first, key);
  }
  inference.phases.clear();
}

uint64_t StreamingPathViews::column_bytes() const {
  uint64_t bytes = totals_.bytes() + uncovered_.bytes();
  for (const analyze::DurationColumn& column : node_durations_) bytes += column.bytes();
  for (const PhaseState& phase : phases_) bytes += phase.values.bytes() + phase.inferences.bytes();
  return bytes;
}

analyze::AggregateTree StreamingPathViews::take_tree(uint64_t* largest_copy_bytes) {
  // Renumbered in the order of their first rows, as build() numbers them.
  std::vector<uint32_t> order(nodes_.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [this](uint32_t a, uint32_t b) { return node_rank_[a] < node_rank_[b]; });
  std::vector<uint32_t> new_index(nodes_.size());
  for (uint32_t position = 0; position < order.size(); ++position)
    new_index[order[position]] = position;
  std::vector<analyze::AggregatePath> paths;
  paths.reserve(nodes_.size());
  for (uint32_t old : order) {
    analyze::AggregatePath path = nodes_[old];
    if (path.parent != analyze::kNoNode) path.parent = new_index[path.parent];
    paths.push_back(path);
  }
  std::vector<int64_t> durations;
  return analyze::AggregateTree::from_paths(paths, [&](uint32_t node) {
    analyze::DurationColumn& column = node_durations_[order[node]];
    durations.clear();
    column.copy_to(durations);
    column.clear();
    *largest_copy_bytes = std::max<uint64_t>(*largest_copy_bytes, durations.capacity() * 8);
    return std::span<int64_t>(durations);
  });
}

analyze::Breakdown StreamingPathViews::take_breakdown(uint64_t* largest_copy_bytes) {
  analyze::BreakdownColumns columns;
  columns.inference_count = inference_count_;
  columns.first_start_ns = first_start_ns_;
  columns.last_end_ns = last_end_ns_;
  std::vector<uint32_t> order(phases_.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(),
            [this](uint32_t a, uint32_t b) { return phases_[a].first < phases_[b].first; });
  for (uint32_t phase : order) {
    const PhaseState& state = phases_[phase];
    columns.phases.push_back({state.key, state.present_in, state.slices, state.total_ns});
  }
  auto copy_out = [largest_copy_bytes](analyze::DurationColumn& column, std::vector<int64_t>& out) {
    column.copy_to(out);
    column.clear();
    *largest_copy_bytes = std::max<uint64_t>(*largest_copy_bytes, out.capacity() * 8);
  };
  columns.totals = [&](std::vector<int64_t>& out) { copy_out(totals_, out); };
  columns.uncovered = [&](std::vector<int64_t>& out) { copy_out(uncovered_, out); };
  // Each phase is added once (alone or into the merged row): its columns go then. The
  // inference numbers pass through a 4-byte copy, the values are read in place.
  std::vector<uint32_t> numbers;
  columns.add_phase = [&](size_t phase, std::vector<int64_t>& dense) {
    PhaseState& state = phases_[order[phase]];
    numbers.clear();
    numbers.reserve(state.inferences.size());
    state.inferences.for_each(
        [&numbers](int64_t number) { numbers.push_back(static_cast<uint32_t>(number)); });
    *largest_copy_bytes = std::max<uint64_t>(*largest_copy_bytes, numbers.capacity() * 4);
    state.inferences.clear();
    size_t position = 0;
    state.values.for_each([&](int64_t value) {
      if (position < numbers.size() && numbers[position] < dense.size())
        analyze::add_saturating(dense[numbers[position]], value);
      ++position;
    });
    state.values.clear();
  };
  analyze::Breakdown breakdown =
      analyze::finish_breakdown(context_, breakdown_span_, grouping_, columns);
  for (PhaseState& state : phases_) {
    state.values.clear();
    state.inferences.clear();
  }
  return breakdown;
}

}  // namespace opsight::report::internal
