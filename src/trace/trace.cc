#include "trace/trace.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <new>
#include <numeric>

namespace opsight::trace {

namespace {
constexpr size_t kHugePage = size_t{2} << 20;
}  // namespace

void* allocate_column_bytes(size_t bytes) {
  if (bytes < kHugePage) {
    if (void* pointer = std::malloc(bytes == 0 ? 1 : bytes)) return pointer;
    throw std::bad_alloc();
  }
  size_t rounded = (bytes + kHugePage - 1) / kHugePage * kHugePage;
  void* pointer = std::aligned_alloc(kHugePage, rounded);
  if (pointer == nullptr) throw std::bad_alloc();
  madvise(pointer, rounded, MADV_HUGEPAGE);  // a hint: without THP, ordinary pages
  return pointer;
}

void free_column_bytes(void* pointer, size_t /*bytes*/) noexcept { std::free(pointer); }

StringTable::StringTable() { intern(""); }

StringId StringTable::intern(std::string_view text) {
  if (auto found = index_.find(text); found != index_.end()) return found->second;
  auto id = static_cast<StringId>(strings_.size());
  // Reserve generously so the views held by index_ stay valid: a std::string that is moved
  // keeps its heap buffer, but a short string lives inline, so rebuild the index if the
  // vector reallocates.
  bool reallocates = strings_.size() == strings_.capacity();
  strings_.emplace_back(text);
  if (reallocates) {
    index_.clear();
    index_.reserve(strings_.size() * 2);
    for (StringId i = 0; i < strings_.size(); ++i) index_.emplace(strings_[i], i);
  } else {
    index_.emplace(strings_.back(), id);
  }
  return id;
}

std::optional<StringId> StringTable::find(std::string_view text) const {
  if (auto found = index_.find(text); found != index_.end()) return found->second;
  return std::nullopt;
}

namespace {
void append_hex(std::string& out, uint64_t value) {
  static constexpr char kDigits[] = "0123456789abcdef";
  for (int shift = 60; shift >= 0; shift -= 4) out.push_back(kDigits[(value >> shift) & 0xF]);
}
}  // namespace

std::string TraceId::to_hex() const {
  std::string out;
  out.reserve(32);
  append_hex(out, high);
  append_hex(out, low);
  return out;
}

std::string span_id_to_hex(uint64_t span_id) {
  std::string out;
  out.reserve(16);
  append_hex(out, span_id);
  return out;
}

void SliceTable::reserve(size_t rows) {
  ts.reserve(rows);
  dur.reserve(rows);
  name.reserve(rows);
  category.reserve(rows);
  track.reserve(rows);
  depth.reserve(rows);
  flags.reserve(rows);
  parent.reserve(rows);
  span_id.reserve(rows);
}

TrackId Trace::thread_track(int64_t pid, int64_t tid) {
  auto [it, inserted] = track_index_.try_emplace({pid, tid}, static_cast<TrackId>(tracks.size()));
  if (inserted) {
    Track track;
    track.pid = pid;
    track.tid = tid;
    tracks.push_back(track);
    process(pid);
  }
  return it->second;
}

TrackId Trace::add_keyed_track(TrackKind kind, int64_t pid, int64_t tid, uint64_t key,
                               std::string_view name, std::string_view unnamed_prefix) {
  Track track;
  track.pid = pid;
  track.tid = tid;
  track.async_key = key;
  track.kind = kind;
  track.name =
      name.empty() ? intern(std::string(unnamed_prefix) + std::to_string(key)) : intern(name);
  tracks.push_back(track);
  process(pid);
  return static_cast<TrackId>(tracks.size() - 1);
}

TrackId Trace::async_track(int64_t pid, int64_t tid, uint64_t key, std::string_view name) {
  return add_keyed_track(TrackKind::kThreadLane, pid, tid, key, name, "track ");
}

TrackId Trace::process_async_track(int64_t pid, uint64_t key, std::string_view name) {
  return add_keyed_track(TrackKind::kAsync, pid, 0, key, name, "async ");
}

void Trace::add_flow_by_time(FlowEndpoint out, FlowEndpoint in, uint64_t flow_id, StringId name_id,
                             StringId category_id) {
  flows_by_time_.push_back(FlowByTime{out, in, flow_id, name_id, category_id});
}

std::string Trace::track_label(TrackId track_id) const {
  if (track_id >= tracks.size()) return "track ?";
  const Track& track = tracks[track_id];
  if (track.name != 0) return std::string(str(track.name));
  if (track.kind == TrackKind::kAsync) return "async " + std::to_string(track.async_key);
  if (track.is_async()) return "track " + std::to_string(track.async_key);
  return "thread " + std::to_string(track.tid);
}

Process& Trace::process(int64_t pid) {
  // The index follows the table; rebuilt if the table was changed behind its back.
  if (process_index_.size() != processes.size()) {
    process_index_.clear();
    for (size_t position = 0; position < processes.size(); ++position)
      process_index_.try_emplace(processes[position].pid, position);
  }
  auto [it, inserted] = process_index_.try_emplace(pid, processes.size());
  if (inserted) {
    Process added;
    added.pid = pid;
    processes.push_back(std::move(added));
  }
  return processes[it->second];
}

uint32_t Trace::counter_track(int64_t pid, std::string_view name, std::string_view unit) {
  StringId name_id = intern(name);
  if (counter_index_.size() != counter_tracks.size()) {
    counter_index_.clear();
    for (uint32_t i = 0; i < counter_tracks.size(); ++i)
      counter_index_.try_emplace({counter_tracks[i].pid, counter_tracks[i].name}, i);
  }
  auto [it, inserted] = counter_index_.try_emplace(std::pair<int64_t, int64_t>{pid, name_id},
                                                   static_cast<uint32_t>(counter_tracks.size()));
  if (!inserted) return it->second;
  counter_tracks.push_back(CounterTrack{pid, name_id, intern(unit)});
  process(pid);
  return static_cast<uint32_t>(counter_tracks.size() - 1);
}

uint32_t Trace::counter_series(int64_t pid, std::string_view group, std::string_view series,
                               std::string_view unit) {
  std::string name;
  name.reserve(group.size() + 1 + series.size());
  name.append(group).append(" ").append(series);
  uint32_t index = counter_track(pid, name, unit);
  counter_tracks[index].group = intern(group);
  counter_tracks[index].series = intern(series);
  return index;
}

namespace {

template <typename ColumnType>
void apply_permutation(ColumnType& column, const std::vector<RowIndex>& order) {
  ColumnType sorted;
  sorted.reserve(column.size());
  for (RowIndex row : order) sorted.push_back(column[row]);
  column.swap(sorted);
}

// Orders args by owner (stable) and builds the owner table's args_begin offsets.
void index_args(ArgTable& args, Column<RowIndex>& args_begin, size_t owner_rows) {
  if (!std::is_sorted(args.owner.begin(), args.owner.end())) {
    std::vector<RowIndex> order(args.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](RowIndex a, RowIndex b) { return args.owner[a] < args.owner[b]; });
    apply_permutation(args.owner, order);
    apply_permutation(args.key, order);
    apply_permutation(args.value, order);
  }
  args_begin.assign(owner_rows + 1, 0);
  size_t arg = 0;
  for (size_t row = 0; row <= owner_rows; ++row) {
    while (arg < args.size() && args.owner[arg] < row) ++arg;
    args_begin[row] = static_cast<RowIndex>(arg);
  }
}

}  // namespace

void Trace::finalize() {
  const size_t count = slices.size();
  // 1. Order by (track, ts, longer first) unless the reader already produced that order
  //    within each track (the native reader does; foreign JSON often does not).
  bool ordered = true;
  if (!nesting_filled_by_reader) {
    std::vector<int64_t> last_ts(tracks.size(), std::numeric_limits<int64_t>::min());
    std::vector<int64_t> last_dur(tracks.size(), 0);
    for (size_t row = 0; row < count && ordered; ++row) {
      TrackId track_id = slices.track[row];
      if (track_id >= last_ts.size()) {
        last_ts.resize(track_id + 1, std::numeric_limits<int64_t>::min());
        last_dur.resize(track_id + 1, 0);
      }
      if (slices.ts[row] < last_ts[track_id] ||
          (slices.ts[row] == last_ts[track_id] && slices.dur[row] > last_dur[track_id]))
        ordered = false;
      last_ts[track_id] = slices.ts[row];
      last_dur[track_id] = slices.dur[row];
    }
  }
  if (!ordered) {
    std::vector<RowIndex> order(count);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](RowIndex a, RowIndex b) {
      if (slices.track[a] != slices.track[b]) return slices.track[a] < slices.track[b];
      if (slices.ts[a] != slices.ts[b]) return slices.ts[a] < slices.ts[b];
      return slices.dur[a] > slices.dur[b];
    });
    std::vector<RowIndex> new_row_of(count);
    for (RowIndex i = 0; i < count; ++i) new_row_of[order[i]] = i;
    apply_permutation(slices.ts, order);
    apply_permutation(slices.dur, order);
    apply_permutation(slices.name, order);
    apply_permutation(slices.category, order);
    apply_permutation(slices.track, order);
    apply_permutation(slices.flags, order);
    apply_permutation(slices.span_id, order);
    for (auto& owner : slice_args.owner) owner = new_row_of[owner];
    for (auto& row : flows.slice_out) row = row < count ? new_row_of[row] : kNoRow;
    for (auto& row : flows.slice_in) row = row < count ? new_row_of[row] : kNoRow;
    for (auto& end : open_flow_ends) end.slice = end.slice < count ? new_row_of[end.slice] : kNoRow;
    for (auto& row : span_contexts.slice) row = row < count ? new_row_of[row] : kNoRow;
  }

  // 2. Nesting: one open-slice stack per track; a slice is a child of the innermost open
  //    slice that contains its start (a slice's interval is closed on the left and open on
  //    the right, so one that ends where another begins is its sibling; but zero-length
  //    slices at one time stack on each other, as in Perfetto's slice tracker). A child
  //    that outlives its parent is clipped.
  bool nesting_trusted =
      nesting_filled_by_reader && slices.depth.size() == count && slices.parent.size() == count;
  if (!nesting_trusted) {
    slices.depth.assign(count, 0);
    slices.parent.assign(count, kNoRow);
    std::vector<std::vector<RowIndex>> open(tracks.size());
    for (RowIndex row = 0; row < count; ++row) {
      TrackId track_id = slices.track[row];
      if (track_id >= open.size()) open.resize(track_id + 1);
      auto& stack = open[track_id];
      const bool zero_length = slices.dur[row] == 0;
      while (!stack.empty() && slices.end(stack.back()) <= slices.ts[row] &&
             !(zero_length && slices.dur[stack.back()] == 0 &&
               slices.ts[stack.back()] == slices.ts[row]))
        stack.pop_back();
      if (!stack.empty()) {
        RowIndex parent_row = stack.back();
        if (slices.end(row) > slices.end(parent_row)) {
          slices.dur[row] = slices.end(parent_row) - slices.ts[row];
          ++clipped_slices;
        }
        slices.parent[row] = parent_row;
        slices.depth[row] = static_cast<uint16_t>(std::min<size_t>(stack.size(), 0xFFFF));
      }
      stack.push_back(row);
    }
  }

  // 3. Span ids: derived from the trace id and the row where a reader gave none.
  uint64_t salt = run.trace_id.low ^ mix64(run.trace_id.high);
  for (RowIndex row = 0; row < count; ++row)
    if (slices.span_id[row] == 0) slices.span_id[row] = mix64(salt + row) | 1;

  // 4. Args.
  index_args(slice_args, slices.args_begin, count);
  if (instants.scope.size() < instants.size())
    instants.scope.resize(instants.size(), InstantScope::kThread);
  index_args(instant_args, instants.args_begin, instants.size());

  // 5. Flows: those given by time are bound to slices now that the nesting is known; a
  //    flow whose end names no row is dropped.
  bind_flows_by_time();
  drop_flows_without_slices();
  std::erase_if(open_flow_ends, [&](const OpenFlowEnd& end) { return end.slice >= count; });
}

void Trace::bind_flows_by_time() {
  if (flows_by_time_.empty()) return;
  SliceLookup lookup(*this);
  auto bind = [&](const FlowEndpoint& end) {
    return end.binding == FlowBinding::kNextSlice ? lookup.next(end.track, end.ts)
                                                  : lookup.enclosing(end.track, end.ts);
  };
  for (const FlowByTime& flow : flows_by_time_) {
    RowIndex out = bind(flow.out);
    RowIndex in = bind(flow.in);
    if (out == kNoRow || in == kNoRow) {
      ++unbound_flows;
      continue;
    }
    flows.add(out, in, flow.id, flow.name, flow.category);
  }
  flows_by_time_.clear();
  flows_by_time_.shrink_to_fit();
}

void Trace::drop_flows_without_slices() {
  const size_t count = slices.size();
  size_t kept = 0;
  for (size_t row = 0; row < flows.size(); ++row) {
    if (flows.slice_out[row] >= count || flows.slice_in[row] >= count) {
      ++unbound_flows;
      continue;
    }
    flows.slice_out[kept] = flows.slice_out[row];
    flows.slice_in[kept] = flows.slice_in[row];
    flows.id[kept] = flows.id[row];
    flows.name[kept] = flows.name[row];
    flows.category[kept] = flows.category[row];
    ++kept;
  }
  flows.slice_out.resize(kept);
  flows.slice_in.resize(kept);
  flows.id.resize(kept);
  flows.name.resize(kept);
  flows.category.resize(kept);
}

SliceLookup::SliceLookup(const Trace& trace) : trace_(trace), rows_of_track_(trace.tracks.size()) {
  const SliceTable& slices = trace.slices;
  for (RowIndex row = 0; row < slices.size(); ++row) {
    TrackId track = slices.track[row];
    if (track >= rows_of_track_.size()) rows_of_track_.resize(track + 1);
    rows_of_track_[track].push_back(row);  // ordered by ts within a track (finalize)
  }
}

RowIndex SliceLookup::enclosing(TrackId track, int64_t ts) const {
  if (track >= rows_of_track_.size()) return kNoRow;
  const std::vector<RowIndex>& rows = rows_of_track_[track];
  const SliceTable& slices = trace_.slices;
  // The last slice that begins at or before ts; then up its parents to the first that is
  // still open at ts.
  auto after = std::upper_bound(rows.begin(), rows.end(), ts,
                                [&](int64_t time, RowIndex row) { return time < slices.ts[row]; });
  if (after == rows.begin()) return kNoRow;
  RowIndex row = *(after - 1);
  while (row != kNoRow) {
    bool open = slices.ts[row] <= ts && (ts < slices.end(row) || slices.end(row) == ts);
    if (open) return row;
    row = slices.parent[row];
  }
  return kNoRow;
}

RowIndex SliceLookup::next(TrackId track, int64_t ts) const {
  if (track >= rows_of_track_.size()) return kNoRow;
  const std::vector<RowIndex>& rows = rows_of_track_[track];
  const SliceTable& slices = trace_.slices;
  auto first = std::lower_bound(rows.begin(), rows.end(), ts,
                                [&](RowIndex row, int64_t time) { return slices.ts[row] < time; });
  return first == rows.end() ? kNoRow : *first;
}

size_t Trace::unjoined_flow_ends() const {
  return static_cast<size_t>(std::count_if(open_flow_ends.begin(), open_flow_ends.end(),
                                           [](const OpenFlowEnd& end) { return !end.joined; }));
}

std::pair<int64_t, int64_t> Trace::time_bounds() const {
  int64_t first = std::numeric_limits<int64_t>::max();
  int64_t last = std::numeric_limits<int64_t>::min();
  for (size_t row = 0; row < slices.size(); ++row) {
    first = std::min(first, slices.ts[row]);
    last = std::max(last, slices.ts[row] + slices.dur[row]);
  }
  for (int64_t ts : instants.ts) {
    first = std::min(first, ts);
    last = std::max(last, ts);
  }
  for (int64_t ts : counters.ts) {
    first = std::min(first, ts);
    last = std::max(last, ts);
  }
  if (first > last) return {0, 0};
  return {first, last};
}

}  // namespace opsight::trace
