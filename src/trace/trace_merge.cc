// Combining traces: append_trace merges the trace of another process (or another tool's
// profile) into a trace; shift_timestamps and keep_time_window bring a foreign profile onto
// a recording's clock and window first. The model itself (tables, interning, finalize) is
// in trace.cc.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "trace/trace.hpp"

namespace opsight::trace {

namespace {

bool is_empty(const Trace& trace) {
  return trace.tracks.empty() && trace.processes.empty() && trace.counter_tracks.empty() &&
         trace.slices.size() == 0 && trace.instants.size() == 0 && trace.counters.size() == 0;
}

int64_t saturating_add(int64_t a, int64_t b) {
  int64_t sum = 0;
  if (__builtin_add_overflow(a, b, &sum))
    return b > 0 ? std::numeric_limits<int64_t>::max() : std::numeric_limits<int64_t>::min();
  return sum;
}

// The first and last ns of a trace's events (Trace::time_bounds), nullopt when it has none.
std::optional<std::pair<int64_t, int64_t>> event_bounds(const Trace& trace) {
  if (trace.slices.size() == 0 && trace.instants.size() == 0 && trace.counters.size() == 0)
    return std::nullopt;
  return trace.time_bounds();
}

// The wall-clock window a recording covers, in its own time base: from the run info when it
// says when the recording started, else the span of its events' timestamps.
std::optional<std::pair<int64_t, int64_t>> recording_window(
    const RunInfo& run, std::optional<std::pair<int64_t, int64_t>> events) {
  if (run.has_unix_offset && run.start_unix_ns != 0 && run.traced_ns > 0) {
    int64_t start = run.start_unix_ns - run.unix_offset_ns;
    return std::pair{start, saturating_add(start, run.traced_ns)};
  }
  if (!events) return std::nullopt;
  return std::pair{events->first,
                   std::max(events->second, saturating_add(events->first, run.traced_ns))};
}

// Gives every slice of `into` from row `first_new_row` on a span id no other slice has:
// ids from different files may collide (files of one trace id derive them alike).
void make_new_span_ids_unique(Trace& into, RowIndex first_new_row) {
  Column<uint64_t>& ids = into.slices.span_id;
  std::vector<uint64_t> old_ids(ids.begin(), ids.begin() + first_new_row);
  std::vector<uint64_t> new_ids(ids.begin() + first_new_row, ids.end());
  std::sort(old_ids.begin(), old_ids.end());
  std::sort(new_ids.begin(), new_ids.end());
  auto contains = [](const std::vector<uint64_t>& sorted, uint64_t id) {
    return std::binary_search(sorted.begin(), sorted.end(), id);
  };
  std::vector<uint64_t> replacements;  // ids handed out here, kept sorted
  for (size_t row = first_new_row; row < ids.size(); ++row) {
    uint64_t id = ids[row];
    if (id == 0 || !contains(old_ids, id)) continue;
    uint64_t candidate = id;
    do {
      candidate = mix64(candidate ^ 0x5bd1e995ULL) | 1;
    } while (contains(old_ids, candidate) || contains(new_ids, candidate) ||
             contains(replacements, candidate));
    ids[row] = candidate;
    replacements.insert(std::upper_bound(replacements.begin(), replacements.end(), candidate),
                        candidate);
  }
}

// Adds `from`'s open flow ends (rows shifted by slice_base) to `into`'s, and turns every
// outgoing end and incoming end of the same id, one from each trace, into a flow. Incoming
// ends that found their outgoing end go; outgoing ends stay (marked joined), so that the
// children of one call appended in any order all find it.
void join_open_flow_ends(Trace& into, const Trace& from, RowIndex slice_base) {
  if (from.open_flow_ends.empty()) return;
  std::unordered_map<uint64_t, std::vector<size_t>> mine;  // id -> positions in into's list
  for (size_t position = 0; position < into.open_flow_ends.size(); ++position)
    mine[into.open_flow_ends[position].id].push_back(position);
  std::vector<bool> incoming_joined(into.open_flow_ends.size(), false);
  std::vector<OpenFlowEnd> added;
  for (OpenFlowEnd end : from.open_flow_ends) {
    end.slice += slice_base;
    if (auto found = mine.find(end.id); found != mine.end()) {
      for (size_t position : found->second) {
        OpenFlowEnd& other = into.open_flow_ends[position];
        if (other.outgoing == end.outgoing || incoming_joined[position]) continue;
        if (end.outgoing) {
          into.flows.add(end.slice, other.slice, end.id);
          incoming_joined[position] = true;
          end.joined = true;
        } else {
          into.flows.add(other.slice, end.slice, end.id);
          other.joined = true;
          end.joined = true;
          break;  // an incoming end arrives once
        }
      }
    }
    if (end.outgoing || !end.joined) added.push_back(end);
  }
  std::vector<OpenFlowEnd> kept;
  for (size_t position = 0; position < into.open_flow_ends.size(); ++position)
    if (!incoming_joined[position]) kept.push_back(into.open_flow_ends[position]);
  kept.insert(kept.end(), added.begin(), added.end());
  into.open_flow_ends = std::move(kept);
}

}  // namespace

bool is_run_info_count(std::string_view key) {
  static constexpr std::string_view kCountKeys[] = {"unmatched_ends",
                                                    "unknown_names",
                                                    "undecodable_slots",
                                                    "orphan_args",
                                                    "ends_written_late_after_drops",
                                                    "invalid_events",
                                                    "unmatched_end_events",
                                                    "unfinished_slices",
                                                    "unmatched_async_ends",
                                                    "flow_ends_without_span",
                                                    "clock_max_error_ns"};
  for (std::string_view count_key : kCountKeys)
    if (key == count_key) return true;
  return key.starts_with("skipped_events.");
}

std::optional<uint64_t> parse_run_info_count(std::string_view text) {
  if (text.empty() || text.size() > 19) return std::nullopt;
  uint64_t value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    value = value * 10 + static_cast<uint64_t>(c - '0');
  }
  return value;
}

void merge_run_info(RunInfo& into, std::optional<std::pair<int64_t, int64_t>> into_events,
                    const RunInfo& other, std::optional<std::pair<int64_t, int64_t>> other_events) {
  RunInfo& run = into;
  auto window = recording_window(run, into_events);
  auto other_window = recording_window(other, other_events);
  auto keep_or_take = [](std::string& mine, const std::string& theirs) {
    if (mine.empty()) mine = theirs;
  };
  keep_or_take(run.command_line, other.command_line);
  keep_or_take(run.host, other.host);
  keep_or_take(run.opsight_version, other.opsight_version);
  keep_or_take(run.source_format, other.source_format);
  keep_or_take(run.clock, other.clock);
  if (run.pid == 0) run.pid = other.pid;
  if (run.trace_id == TraceId{}) run.trace_id = other.trace_id;
  if (!run.has_unix_offset && other.has_unix_offset) {
    run.unix_offset_ns = other.unix_offset_ns;
    run.has_unix_offset = true;
  }
  run.overhead_ns = saturating_add(run.overhead_ns, other.overhead_ns);
  run.events_dropped += other.events_dropped;
  run.complete = run.complete && other.complete;
  if (window && other_window) {
    window->first = std::min(window->first, other_window->first);
    window->second = std::max(window->second, other_window->second);
  } else if (other_window) {
    window = other_window;
  }
  if (window) {
    run.traced_ns = std::max<int64_t>(0, window->second - window->first);
    if (run.has_unix_offset) run.start_unix_ns = saturating_add(window->first, run.unix_offset_ns);
  }
  for (const auto& entry : other.extra) {
    const std::string& key = entry.first;
    const std::string& value = entry.second;
    auto existing = std::find_if(run.extra.begin(), run.extra.end(),
                                 [&](const auto& mine) { return mine.first == key; });
    if (existing == run.extra.end()) {
      run.extra.emplace_back(key, value);
      continue;
    }
    auto mine = parse_run_info_count(existing->second);
    auto theirs = parse_run_info_count(value);
    if (is_run_info_count(key) && mine && theirs)
      existing->second = std::to_string(*mine + *theirs);
  }
}

void append_trace(Trace& into, const Trace& from) {
  if (&into == &from) return;
  const bool into_was_empty = is_empty(into);
  if (into_was_empty) {
    into.run = from.run;
    into.clipped_slices = from.clipped_slices;
  } else {
    merge_run_info(into.run, event_bounds(into), from.run, event_bounds(from));
    into.clipped_slices += from.clipped_slices;
  }

  std::vector<StringId> string_of(from.strings.size());
  for (StringId id = 0; id < from.strings.size(); ++id) string_of[id] = into.intern(from.str(id));
  auto map_string = [&](StringId id) { return id < string_of.size() ? string_of[id] : 0; };

  for (const Process& process : from.processes) {
    Process& target = into.process(process.pid);
    if (target.name == 0) target.name = map_string(process.name);
    if (target.sort_index == 0) target.sort_index = process.sort_index;
    if (target.parent_pid == 0) target.parent_pid = process.parent_pid;
    for (StringId label : process.labels) {
      StringId mapped = map_string(label);
      if (std::find(target.labels.begin(), target.labels.end(), mapped) == target.labels.end())
        target.labels.push_back(mapped);
    }
  }

  // Tracks. A thread track both traces have may receive slices that interleave in time
  // with the ones it holds: then the nesting must be computed again.
  const size_t tracks_before = into.tracks.size();
  std::vector<TrackId> track_of(from.tracks.size());
  std::vector<int64_t> last_end_before(tracks_before, std::numeric_limits<int64_t>::min());
  for (RowIndex row = 0; row < into.slices.size(); ++row) {
    TrackId track = into.slices.track[row];
    if (track < tracks_before)
      last_end_before[track] = std::max(last_end_before[track], into.slices.end(row));
  }
  for (TrackId id = 0; id < from.tracks.size(); ++id) {
    const Track& track = from.tracks[id];
    TrackId target_id = 0;
    switch (track.kind) {
      case TrackKind::kThread:
        target_id = into.thread_track(track.pid, track.tid);
        break;
      case TrackKind::kThreadLane:
        target_id = into.async_track(track.pid, track.tid, track.async_key, from.str(track.name));
        break;
      case TrackKind::kAsync:
        target_id = into.process_async_track(track.pid, track.async_key, from.str(track.name));
        break;
    }
    Track& target = into.tracks[target_id];
    if (target.name == 0) target.name = map_string(track.name);
    if (target.sort_index == 0) target.sort_index = track.sort_index;
    target.overhead_ns = saturating_add(target.overhead_ns, track.overhead_ns);
    target.events_recorded += track.events_recorded;
    target.events_dropped += track.events_dropped;
    track_of[id] = target_id;
  }
  auto map_track = [&](TrackId id) { return id < track_of.size() ? track_of[id] : TrackId{0}; };

  std::vector<uint32_t> counter_track_of(from.counter_tracks.size());
  for (uint32_t id = 0; id < from.counter_tracks.size(); ++id) {
    const CounterTrack& counter = from.counter_tracks[id];
    counter_track_of[id] =
        into.counter_track(counter.pid, from.str(counter.name), from.str(counter.unit));
    CounterTrack& target = into.counter_tracks[counter_track_of[id]];
    if (target.group == 0) target.group = map_string(counter.group);
    if (target.series == 0) target.series = map_string(counter.series);
  }

  // Slices: rows shift by the number `into` had; parents shift with them.
  const auto slice_base = static_cast<RowIndex>(into.slices.size());
  const SliceTable& slices = from.slices;
  into.slices.reserve(into.slices.size() + slices.size());
  bool interleaved = false;
  for (RowIndex row = 0; row < slices.size(); ++row) {
    TrackId track = map_track(slices.track[row]);
    if (track < tracks_before && slices.ts[row] < last_end_before[track]) interleaved = true;
    RowIndex added = into.slices.add(slices.ts[row], slices.dur[row], map_string(slices.name[row]),
                                     map_string(slices.category[row]), track, slices.flags[row],
                                     row < slices.span_id.size() ? slices.span_id[row] : 0);
    if (row < slices.depth.size()) into.slices.depth[added] = slices.depth[row];
    if (row < slices.parent.size() && slices.parent[row] != kNoRow)
      into.slices.parent[added] = slices.parent[row] + slice_base;
  }
  auto append_args = [&](ArgTable& target, const ArgTable& source, RowIndex owner_base) {
    for (size_t arg = 0; arg < source.size(); ++arg) {
      ArgValue value = source.value[arg];
      if (value.type == ArgType::kString) value.string_value = map_string(value.string_value);
      target.add(source.owner[arg] + owner_base, map_string(source.key[arg]), value);
    }
  };
  append_args(into.slice_args, from.slice_args, slice_base);

  const auto instant_base = static_cast<RowIndex>(into.instants.size());
  for (RowIndex row = 0; row < from.instants.size(); ++row)
    into.instants.add(
        from.instants.ts[row], map_string(from.instants.name[row]),
        map_string(from.instants.category[row]), map_track(from.instants.track[row]),
        row < from.instants.scope.size() ? from.instants.scope[row] : InstantScope::kThread);
  append_args(into.instant_args, from.instant_args, instant_base);

  const FlowTable& flows = from.flows;
  for (size_t row = 0; row < flows.size(); ++row)
    into.flows.add(flows.slice_out[row] + slice_base, flows.slice_in[row] + slice_base,
                   flows.id[row], map_string(flows.name[row]), map_string(flows.category[row]));
  into.unbound_flows += from.unbound_flows;
  join_open_flow_ends(into, from, slice_base);
  const SpanContextTable& contexts = from.span_contexts;
  for (size_t row = 0; row < contexts.size(); ++row)
    into.span_contexts.add(contexts.slice[row] + slice_base, contexts.trace_id[row],
                           contexts.parent_span_id[row], contexts.trace_flags[row]);

  for (size_t row = 0; row < from.counters.size(); ++row) {
    uint32_t counter = from.counters.counter_track[row];
    into.counters.add(from.counters.ts[row],
                      counter < counter_track_of.size() ? counter_track_of[counter] : 0,
                      from.counters.value[row]);
  }

  if (!into_was_empty) make_new_span_ids_unique(into, slice_base);
  // Both parts are finalized and each keeps its nesting, unless slices of a shared thread
  // track interleave: then the track is ordered and nested again from the timestamps.
  into.nesting_filled_by_reader = !interleaved;
  into.finalize();
}

void shift_timestamps(Trace& trace, int64_t offset_ns) {
  if (offset_ns == 0) return;
  for (int64_t& ts : trace.slices.ts) ts = saturating_add(ts, offset_ns);
  for (int64_t& ts : trace.instants.ts) ts = saturating_add(ts, offset_ns);
  for (int64_t& ts : trace.counters.ts) ts = saturating_add(ts, offset_ns);
  if (trace.run.has_unix_offset)
    trace.run.unix_offset_ns = offset_ns == std::numeric_limits<int64_t>::min()
                                   ? std::numeric_limits<int64_t>::max()
                                   : saturating_add(trace.run.unix_offset_ns, -offset_ns);
}

void keep_time_window(Trace& trace, int64_t begin_ns, int64_t end_ns, WindowRule rule) {
  auto inside = [&](int64_t ts) { return ts >= begin_ns && ts <= end_ns; };
  auto keep_slice = [&](int64_t ts, int64_t dur) {
    if (rule == WindowRule::kStartsInside) return inside(ts);
    int64_t end = 0;
    if (__builtin_add_overflow(ts, dur, &end)) end = INT64_MAX;
    return ts <= end_ns && end >= begin_ns;
  };
  // Keeps the args whose owner row is kept, with the owner renumbered.
  auto keep_args = [](ArgTable& args, const std::vector<RowIndex>& new_row) {
    ArgTable kept;
    for (size_t arg = 0; arg < args.size(); ++arg) {
      RowIndex owner = args.owner[arg];
      if (owner < new_row.size() && new_row[owner] != kNoRow)
        kept.add(new_row[owner], args.key[arg], args.value[arg]);
    }
    args = std::move(kept);
  };

  const SliceTable& slices = trace.slices;
  std::vector<RowIndex> new_slice_row(slices.size(), kNoRow);
  SliceTable kept_slices;
  for (RowIndex row = 0; row < slices.size(); ++row)
    if (keep_slice(slices.ts[row], slices.dur[row]))
      new_slice_row[row] =
          kept_slices.add(slices.ts[row], slices.dur[row], slices.name[row], slices.category[row],
                          slices.track[row], slices.flags[row], slices.span_id[row]);
  if (kept_slices.size() != slices.size()) {
    keep_args(trace.slice_args, new_slice_row);
    FlowTable kept_flows;
    const FlowTable& flows = trace.flows;
    for (size_t row = 0; row < flows.size(); ++row) {
      RowIndex out = new_slice_row[flows.slice_out[row]];
      RowIndex in = new_slice_row[flows.slice_in[row]];
      if (out != kNoRow && in != kNoRow)
        kept_flows.add(out, in, flows.id[row], flows.name[row], flows.category[row]);
    }
    trace.flows = std::move(kept_flows);
    std::vector<OpenFlowEnd> kept_ends;
    for (OpenFlowEnd end : trace.open_flow_ends) {
      end.slice = end.slice < new_slice_row.size() ? new_slice_row[end.slice] : kNoRow;
      if (end.slice != kNoRow) kept_ends.push_back(end);
    }
    trace.open_flow_ends = std::move(kept_ends);
    SpanContextTable kept_contexts;
    const SpanContextTable& contexts = trace.span_contexts;
    for (size_t row = 0; row < contexts.size(); ++row) {
      RowIndex slice =
          contexts.slice[row] < new_slice_row.size() ? new_slice_row[contexts.slice[row]] : kNoRow;
      if (slice != kNoRow)
        kept_contexts.add(slice, contexts.trace_id[row], contexts.parent_span_id[row],
                          contexts.trace_flags[row]);
    }
    trace.span_contexts = std::move(kept_contexts);
    trace.slices = std::move(kept_slices);
    trace.nesting_filled_by_reader = false;
  }

  const InstantTable& instants = trace.instants;
  std::vector<RowIndex> new_instant_row(instants.size(), kNoRow);
  InstantTable kept_instants;
  for (RowIndex row = 0; row < instants.size(); ++row)
    if (inside(instants.ts[row]))
      new_instant_row[row] =
          kept_instants.add(instants.ts[row], instants.name[row], instants.category[row],
                            instants.track[row], instants.scope[row]);
  if (kept_instants.size() != instants.size()) {
    keep_args(trace.instant_args, new_instant_row);
    trace.instants = std::move(kept_instants);
  }

  CounterTable kept_counters;
  const CounterTable& counters = trace.counters;
  for (size_t row = 0; row < counters.size(); ++row)
    if (inside(counters.ts[row]))
      kept_counters.add(counters.ts[row], counters.counter_track[row], counters.value[row]);
  if (kept_counters.size() != counters.size()) trace.counters = std::move(kept_counters);

  trace.finalize();
}

}  // namespace opsight::trace
