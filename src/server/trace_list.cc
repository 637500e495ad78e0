#include "server/trace_list.hpp"

#include <algorithm>
#include <limits>
#include <numeric>
#include <set>
#include <unordered_map>
#include <utility>

#include "server/timeline_search.hpp"
#include "trace/trace_membership.hpp"

namespace opsight::server {
namespace {

struct TraceListIdHash {
  size_t operator()(const trace::TraceId& id) const noexcept {
    return static_cast<size_t>(trace::mix64(id.high ^ trace::mix64(id.low)));
  }
};

constexpr std::array<std::string_view, kTraceSortCount> kTraceSortNames = {
    "duration", "start", "spans", "errors", "name"};

}  // namespace

std::optional<TraceSort> parse_trace_sort(std::string_view text) {
  for (size_t i = 0; i < kTraceSortNames.size(); ++i)
    if (kTraceSortNames[i] == text) return static_cast<TraceSort>(i);
  return std::nullopt;
}

std::string_view trace_sort_name(TraceSort sort) {
  return kTraceSortNames[static_cast<size_t>(sort)];
}

bool trace_sort_descends_by_default(TraceSort sort) {
  return sort == TraceSort::kDuration || sort == TraceSort::kSpans || sort == TraceSort::kErrors;
}

TraceList::TraceList(const trace::Trace& trace) : trace_(trace) {
  const trace::SliceTable& slices = trace.slices;
  if (slices.size() == 0) return;
  const trace::TraceMembership membership(trace);
  constexpr uint32_t kNone = std::numeric_limits<uint32_t>::max();
  // A trace index of the membership -> its row here; equal trace ids share one row.
  std::vector<uint32_t> row_of_index(membership.trace_index_count(), kNone);
  std::unordered_map<trace::TraceId, uint32_t, TraceListIdHash> row_of_id;
  std::vector<trace::RowIndex> earliest;  // per trace: its earliest span (a root's fallback)
  std::vector<int64_t> first_pid;         // per trace: the pid of its first span seen
  std::set<std::pair<uint32_t, int64_t>> other_pids;
  // Errors as the exporters mark them (exporting::SpanView::has_error).
  const auto exception_key = trace.strings.find("exception.type");
  const auto error_key = trace.strings.find("error.type");
  const bool errors_possible = exception_key.has_value() || error_key.has_value();

  for (trace::RowIndex row = 0; row < slices.size(); ++row) {
    const uint32_t index = membership.trace_index(row);
    uint32_t& slot = row_of_index[index];
    if (slot == kNone) {
      auto [found, added] =
          row_of_id.try_emplace(membership.trace_id_at(index), static_cast<uint32_t>(rows_.size()));
      if (added) {
        TraceListRow entry;
        entry.trace_id = found->first;
        entry.start_ns = std::numeric_limits<int64_t>::max();
        entry.end_ns = std::numeric_limits<int64_t>::min();
        rows_.push_back(entry);
        earliest.push_back(row);
        first_pid.push_back(trace.tracks[slices.track[row]].pid);
      }
      slot = found->second;
    }
    TraceListRow& entry = rows_[slot];
    ++entry.span_count;
    entry.start_ns = std::min(entry.start_ns, slices.ts[row]);
    entry.end_ns = std::max(entry.end_ns, slices.end(row));
    auto before = [&](trace::RowIndex a, trace::RowIndex b) {
      return slices.ts[a] != slices.ts[b] ? slices.ts[a] < slices.ts[b] : a < b;
    };
    if (before(row, earliest[slot])) earliest[slot] = row;
    const int64_t pid = trace.tracks[slices.track[row]].pid;
    if (pid != first_pid[slot]) other_pids.emplace(slot, pid);
    const int32_t context = membership.context_of(row);
    const trace::RowIndex parent = slices.parent[row];
    if (context >= 0 || parent == trace::kNoRow || parent >= slices.size()) {
      ++entry.root_count;
      if (entry.root == trace::kNoRow || before(row, entry.root)) {
        entry.root = row;
        entry.remote_parent_span_id =
            context >= 0 ? trace.span_contexts.parent_span_id[static_cast<size_t>(context)] : 0;
      }
    }
    if (errors_possible && row + 1 < slices.args_begin.size()) {
      for (auto arg = slices.args_begin[row]; arg < slices.args_begin[row + 1]; ++arg) {
        const trace::StringId key = trace.slice_args.key[arg];
        if ((exception_key && key == *exception_key) || (error_key && key == *error_key)) {
          ++entry.error_count;
          break;
        }
      }
    }
  }
  for (size_t slot = 0; slot < rows_.size(); ++slot) {
    rows_[slot].process_count = 1;
    if (rows_[slot].root == trace::kNoRow) rows_[slot].root = earliest[slot];
  }
  for (const auto& [slot, pid] : other_pids) ++rows_[slot].process_count;
}

const std::vector<uint32_t>& TraceList::order(TraceSort sort) const {
  const auto which = static_cast<size_t>(sort);
  std::call_once(order_once_[which], [this, sort, which] {
    std::vector<uint32_t>& order = orders_[which];
    order.resize(rows_.size());
    std::iota(order.begin(), order.end(), 0u);
    auto ties = [this](uint32_t a, uint32_t b) {
      const TraceListRow &x = rows_[a], &y = rows_[b];
      return x.start_ns != y.start_ns ? x.start_ns < y.start_ns : x.root < y.root;
    };
    // The sort's default direction (longest first...); ties by start either way.
    const bool descending = trace_sort_descends_by_default(sort);
    auto by = [&ties, descending](auto key) {
      return [key, &ties, descending](uint32_t a, uint32_t b) {
        const auto ka = key(a), kb = key(b);
        if (ka != kb) return descending ? kb < ka : ka < kb;
        return ties(a, b);
      };
    };
    switch (sort) {
      case TraceSort::kDuration:
        std::sort(order.begin(), order.end(),
                  by([this](uint32_t i) { return rows_[i].duration_ns(); }));
        break;
      case TraceSort::kStart:
        std::sort(order.begin(), order.end(), ties);
        break;
      case TraceSort::kSpans:
        std::sort(order.begin(), order.end(),
                  by([this](uint32_t i) { return rows_[i].span_count; }));
        break;
      case TraceSort::kErrors:
        std::sort(order.begin(), order.end(),
                  by([this](uint32_t i) { return rows_[i].error_count; }));
        break;
      case TraceSort::kName:
        std::sort(order.begin(), order.end(),
                  by([this](uint32_t i) { return trace_.str(trace_.slices.name[rows_[i].root]); }));
        break;
    }
  });
  return orders_[which];
}

TraceListPage TraceList::page(const TraceListQuery& query) const {
  const std::vector<uint32_t>& ordered = order(query.sort);
  const size_t count = ordered.size();
  // The order is the sort's default direction; the other reads it backwards.
  const bool backwards = query.descending != trace_sort_descends_by_default(query.sort);
  auto at = [&](size_t position) -> const TraceListRow& {
    return rows_[ordered[backwards ? count - 1 - position : position]];
  };
  TraceListPage page;
  if (query.root_name.empty()) {
    page.matched = count;
    for (uint64_t position = query.offset; position < count && page.rows.size() < query.limit;
         ++position)
      page.rows.push_back(&at(position));
    return page;
  }
  std::unordered_map<trace::StringId, bool> name_matches;  // each distinct root name once
  for (size_t position = 0; position < count; ++position) {
    const TraceListRow& row = at(position);
    const trace::StringId name = trace_.slices.name[row.root];
    auto [found, added] = name_matches.try_emplace(name, false);
    if (added) found->second = contains_ignoring_case(trace_.str(name), query.root_name);
    if (!found->second) continue;
    if (page.matched >= query.offset && page.rows.size() < query.limit) page.rows.push_back(&row);
    ++page.matched;
  }
  return page;
}

}  // namespace opsight::server
