// Perfetto reader: track events. Each TrackEvent becomes a slice begin or end, a complete
// slice (a legacy 'X' event), an instant or a counter sample on its track, with its name,
// categories, debug annotations and flow ids. At the end of the read, begins and ends are
// paired per track in time order, flow ids are joined in time order, and counter samples are
// sorted where some track's times went backwards.
#include <algorithm>
#include <bit>
#include <string>
#include <vector>

#include "io/perfetto/perfetto_reader_internal.hpp"

namespace opsight::io::perfetto_reading {

void PerfettoReader::read_track_event(std::string_view bytes, uint64_t raw_ts, uint64_t clock,
                                      Sequence& seq) {
  ProtoReader reader(bytes, begin_, "TrackEvent");
  ProtoField field;
  EventFields event;
  category_iids_.clear();
  category_names_.clear();
  annotations_.clear();
  flow_ids_.clear();
  terminating_flow_ids_.clear();
  extra_values_.clear();
  extra_uuids_.clear();
  extra_double_values_.clear();
  extra_double_uuids_.clear();
  while (reader.next(field)) {
    switch (field.number) {
      case fields::event::kType:
        expect_wire_type(reader, field, wire::kWireVarint);
        event.type = field.value;
        event.has_type = true;
        break;
      case fields::event::kTrackUuid:
        expect_wire_type(reader, field, wire::kWireVarint);
        event.track_uuid = field.value;
        event.has_track = true;
        break;
      case fields::event::kNameIid:
        expect_wire_type(reader, field, wire::kWireVarint);
        event.name_iid = field.value;
        event.has_name_iid = true;
        break;
      case fields::event::kName:
        expect_wire_type(reader, field, wire::kWireLengthDelimited);
        event.name = field.bytes;
        event.has_name = true;
        break;
      case fields::event::kCategoryIids:
        reader.for_each_repeated(field, wire::kWireVarint,
                                 [&](uint64_t iid) { category_iids_.push_back(iid); });
        break;
      case fields::event::kCategories:
        expect_wire_type(reader, field, wire::kWireLengthDelimited);
        category_names_.push_back(field.bytes);
        break;
      case fields::event::kDebugAnnotations:
        expect_wire_type(reader, field, wire::kWireLengthDelimited);
        annotations_.push_back(field.bytes);
        break;
      case fields::event::kFlowIds:
        reader.for_each_repeated(field, wire::kWireFixed64,
                                 [&](uint64_t id) { flow_ids_.push_back(id); });
        break;
      case fields::event::kFlowIdsOld:
        reader.for_each_repeated(field, wire::kWireVarint,
                                 [&](uint64_t id) { flow_ids_.push_back(id); });
        break;
      case fields::event::kTerminatingFlowIds:
        reader.for_each_repeated(field, wire::kWireFixed64,
                                 [&](uint64_t id) { terminating_flow_ids_.push_back(id); });
        break;
      case fields::event::kTerminatingFlowIdsOld:
        reader.for_each_repeated(field, wire::kWireVarint,
                                 [&](uint64_t id) { terminating_flow_ids_.push_back(id); });
        break;
      case fields::event::kCounterValue:
        expect_wire_type(reader, field, wire::kWireVarint);
        event.counter_value = static_cast<double>(field.as_int64());
        event.has_counter_value = true;
        break;
      case fields::event::kDoubleCounterValue:
        expect_wire_type(reader, field, wire::kWireFixed64);
        event.counter_value = field.as_double();
        event.has_counter_value = true;
        break;
      case fields::event::kExtraCounterValues:
        reader.for_each_repeated(field, wire::kWireVarint, [&](uint64_t value) {
          extra_values_.push_back(static_cast<double>(static_cast<int64_t>(value)));
        });
        break;
      case fields::event::kExtraCounterTrackUuids:
        reader.for_each_repeated(field, wire::kWireVarint,
                                 [&](uint64_t uuid) { extra_uuids_.push_back(uuid); });
        break;
      case fields::event::kExtraDoubleCounterValues:
        reader.for_each_repeated(field, wire::kWireFixed64, [&](uint64_t value) {
          extra_double_values_.push_back(std::bit_cast<double>(value));
        });
        break;
      case fields::event::kExtraDoubleCounterTrackUuids:
        reader.for_each_repeated(field, wire::kWireVarint,
                                 [&](uint64_t uuid) { extra_double_uuids_.push_back(uuid); });
        break;
      case fields::event::kTimestampDeltaUs:
        expect_wire_type(reader, field, wire::kWireVarint);
        event.delta_us = field.as_int64();
        event.has_delta = true;
        break;
      case fields::event::kTimestampAbsoluteUs:
        expect_wire_type(reader, field, wire::kWireVarint);
        event.absolute_us = field.as_int64();
        event.has_absolute = true;
        break;
      case fields::event::kLegacyEvent:
        expect_wire_type(reader, field, wire::kWireLengthDelimited);
        event.legacy = field.bytes;
        event.has_legacy = true;
        break;
      default:
        break;
    }
  }

  // Time: the legacy microsecond fields when given, else the packet's timestamp.
  int64_t ts;
  if (event.has_absolute) {
    ts = seq.legacy_ns = multiply_saturating(event.absolute_us, 1000);
  } else if (event.has_delta) {
    ts = seq.legacy_ns = add_saturating(seq.legacy_ns, multiply_saturating(event.delta_us, 1000));
  } else {
    ts = packet_time(raw_ts, clock, seq);
  }
  // Perfetto's times are unsigned; a conversion or a damaged clock that leaves [0, 2^62]
  // (146 years) is clamped, so that no sum of times and durations overflows later.
  ts = std::clamp<int64_t>(ts, 0, kMaxTime);

  // A legacy event (Chrome's older TrackEvent form): its phase, name and flow binding.
  uint64_t type = event.type;
  int64_t legacy_duration_us = -1;
  uint32_t track_state = kNone;
  if (event.has_legacy) {
    ProtoReader legacy(event.legacy, begin_, "TrackEvent.LegacyEvent");
    ProtoField part;
    int64_t phase = 0, pid = 0, tid = 0;
    bool has_pid = false, has_tid = false;
    uint64_t bind_id = 0, direction = 0;
    while (legacy.next(part)) {
      switch (part.number) {
        case fields::legacy_event::kNameIid:
          expect_wire_type(legacy, part, wire::kWireVarint);
          if (!event.has_name_iid && !event.has_name) {
            event.name_iid = part.value;
            event.has_name_iid = true;
          }
          break;
        case fields::legacy_event::kPhase:
          expect_wire_type(legacy, part, wire::kWireVarint);
          phase = part.as_int64();
          break;
        case fields::legacy_event::kDurationUs:
          expect_wire_type(legacy, part, wire::kWireVarint);
          legacy_duration_us = std::max<int64_t>(0, part.as_int64());
          break;
        case fields::legacy_event::kBindId:
          expect_wire_type(legacy, part, wire::kWireVarint);
          bind_id = part.value;
          break;
        case fields::legacy_event::kFlowDirection:
          expect_wire_type(legacy, part, wire::kWireVarint);
          direction = part.value;
          break;
        case fields::legacy_event::kPidOverride:
          expect_wire_type(legacy, part, wire::kWireVarint);
          pid = static_cast<int32_t>(part.value);
          has_pid = true;
          break;
        case fields::legacy_event::kTidOverride:
          expect_wire_type(legacy, part, wire::kWireVarint);
          tid = static_cast<int32_t>(part.value);
          has_tid = true;
          break;
        default:
          break;
      }
    }
    if (bind_id != 0 && direction == fields::legacy_event::kFlowIn)
      terminating_flow_ids_.push_back(bind_id);
    else if (bind_id != 0 && direction != 0)
      flow_ids_.push_back(bind_id);
    if (has_pid && has_tid && !event.has_track) track_state = legacy_thread_state(pid, tid);
    if (!event.has_type) {
      switch (phase) {
        case 'B':
          type = fields::event::kTypeSliceBegin;
          break;
        case 'E':
          type = fields::event::kTypeSliceEnd;
          break;
        case 'X':
          type = kTypeComplete;
          break;
        case 'I':
        case 'i':
        case 'R':
          type = fields::event::kTypeInstant;
          break;
        default:
          ++skipped_legacy_events_;
          return;
      }
    }
  }

  // The track: its own uuid, a legacy override, the sequence's default, its legacy thread.
  if (track_state == kNone) {
    if (event.has_track)
      track_state = state_of_uuid(event.track_uuid);
    else if (seq.has_default_track)
      track_state = state_of_uuid(seq.default_track);
    else if (seq.legacy_thread != kNone)
      track_state = seq.legacy_thread;
  }
  if (track_state != kNone) materialize(track_state);

  // Counter values on other tracks, carried by any event.
  // (Most events carry no extra values: no call for them.)
  if (!extra_values_.empty())
    add_extra_counters(extra_values_, extra_uuids_, seq.extra_counter_uuids, ts);
  if (!extra_double_values_.empty())
    add_extra_counters(extra_double_values_, extra_double_uuids_, seq.extra_double_counter_uuids,
                       ts);

  if (track_state == kNone) {
    if (type != 0) ++events_without_track_;
    return;
  }
  const TrackState::Kind kind = states_[track_state].kind;

  if (type == fields::event::kTypeCounter) {
    if (kind != TrackState::Kind::kCounter || !event.has_counter_value) {
      ++counter_events_skipped_;
      return;
    }
    add_counter_sample(track_state, ts, event.counter_value);
    return;
  }
  if (type != fields::event::kTypeSliceBegin && type != fields::event::kTypeSliceEnd &&
      type != fields::event::kTypeInstant && type != kTypeComplete) {
    ++skipped_event_types_;
    return;
  }
  if (kind == TrackState::Kind::kCounter) {
    ++events_on_counter_tracks_;
    return;
  }

  StringId name = 0;
  if (event.has_name_iid) {
    name = seq.names.find(event.name_iid);
    if (name == kNone) {
      name = 0;
      ++unknown_interned_ids_;
    }
  } else if (event.has_name) {
    name = trace().intern(event.name);
  }
  StringId category = category_of(seq);
  decode_annotations(seq);

  if (type == fields::event::kTypeSliceEnd) {
    TrackId track = slice_track(track_state);
    note_time(track, ts);
    auto end = static_cast<uint32_t>(ends_.size());
    ends_.push_back(EndRecord{ts, track, static_cast<uint32_t>(trace().slices.size())});
    for (const auto& [key, value] : decoded_args_) end_args_.push_back(EndArg{end, key, value});
    note_flows(end, ts, true);
    return;
  }
  const bool thread_like = kind == TrackState::Kind::kThread;
  const bool process_track = kind == TrackState::Kind::kProcess;
  const bool has_flows = !flow_ids_.empty() || !terminating_flow_ids_.empty();
  if (type == fields::event::kTypeInstant &&
      (process_track || !states_[track_state].in_process || (thread_like && !has_flows))) {
    TrackId track = instant_track(track_state);
    RowIndex row = trace().instants.add(ts, name, category, track, states_[track_state].scope);
    for (const auto& [key, value] : decoded_args_) trace().instant_args.add(row, key, value);
    if (has_flows) ++flows_on_instants_dropped_;
    return;
  }
  // A slice: begun here (ended by a later END), or whole (an instant made a zero-length
  // slice, a legacy complete event).
  TrackId track = slice_track(track_state);
  int64_t duration =
      type == kTypeComplete
          ? multiply_saturating(legacy_duration_us < 0 ? 0 : legacy_duration_us, 1000)
          : 0;
  duration = difference_saturating(add_saturating(ts, duration), ts);  // its end fits int64
  RowIndex row = trace().slices.add(ts, duration, name, category, track);
  if (type == fields::event::kTypeSliceBegin) {
    trace().slices.dur[row] = kOpen;
    note_time(track, ts);
  } else {
    note_time(track, add_saturating(ts, duration), /*ordered_only=*/true);
  }
  for (const auto& [key, value] : decoded_args_) trace().slice_args.add(row, key, value);
  note_flows(row, ts, false);
}

StringId PerfettoReader::category_of(Sequence& seq) {
  if (category_iids_.size() == 1 && category_names_.empty()) {
    StringId id = seq.categories.find(category_iids_[0]);
    if (id != kNone) return id;
    ++unknown_interned_ids_;
    return 0;
  }
  if (category_iids_.empty() && category_names_.size() == 1)
    return trace().intern(category_names_[0]);
  if (category_iids_.empty() && category_names_.empty()) return 0;
  std::string joined;
  for (uint64_t iid : category_iids_) {
    StringId id = seq.categories.find(iid);
    if (id == kNone) {
      ++unknown_interned_ids_;
      continue;
    }
    if (!joined.empty()) joined += ',';
    joined += trace().str(id);
  }
  for (std::string_view name : category_names_) {
    if (!joined.empty()) joined += ',';
    joined += name;
  }
  return trace().intern(joined);
}

void PerfettoReader::add_extra_counters(const std::vector<double>& values,
                                        const std::vector<uint64_t>& uuids,
                                        const std::vector<uint64_t>& default_uuids, int64_t ts) {
  for (size_t i = 0; i < values.size(); ++i) {
    const std::vector<uint64_t>& source = uuids.empty() ? default_uuids : uuids;
    if (i >= source.size()) {
      ++counter_events_skipped_;
      continue;
    }
    uint32_t state = state_of_uuid(source[i]);
    materialize(state);
    if (states_[state].kind != TrackState::Kind::kCounter) {
      ++counter_events_skipped_;
      continue;
    }
    add_counter_sample(state, ts, values[i]);
  }
}

// Every SLICE_BEGIN is paired with an END of its track: begins and ends in file order
// (an END recorded after k slices came before the k-th begin), sorted by time where the
// track's times went backwards (stable), an END closing the innermost open slice.
void PerfettoReader::pair_slices() {
  auto& slices = trace().slices;
  const size_t tracks = trace().tracks.size();
  std::vector<uint32_t> begin_start(tracks + 1, 0), end_start(tracks + 1, 0);
  size_t open_rows = 0;
  for (RowIndex row = 0; row < slices.size(); ++row)
    if (slices.dur[row] == kOpen) {
      ++begin_start[slices.track[row] + 1];
      ++open_rows;
    }
  if (open_rows == 0 && ends_.empty()) return;
  for (const EndRecord& end : ends_) ++end_start[end.track + 1];
  for (size_t track = 0; track < tracks; ++track) {
    begin_start[track + 1] += begin_start[track];
    end_start[track + 1] += end_start[track];
  }
  std::vector<RowIndex> begins(open_rows);
  std::vector<uint32_t> ends(ends_.size());
  {
    std::vector<uint32_t> fill(begin_start.begin(), begin_start.end() - 1);
    for (RowIndex row = 0; row < slices.size(); ++row)
      if (slices.dur[row] == kOpen) begins[fill[slices.track[row]]++] = row;
    std::vector<uint32_t> end_fill(end_start.begin(), end_start.end() - 1);
    for (uint32_t end = 0; end < ends_.size(); ++end) ends[end_fill[ends_[end].track]++] = end;
  }
  end_rows_.assign(ends_.size(), kNoRow);
  struct Entry {
    int64_t ts;
    uint32_t index;  // a row, or an end
    bool is_end;
  };
  std::vector<Entry> entries;
  std::vector<RowIndex> open;
  for (TrackId track = 0; track < tracks; ++track) {
    uint32_t b = begin_start[track], b_end = begin_start[track + 1];
    uint32_t e = end_start[track], e_end = end_start[track + 1];
    if (b == b_end && e == e_end) continue;
    entries.clear();
    while (b < b_end || e < e_end) {
      bool take_end = e < e_end && (b == b_end || ends_[ends[e]].rows_before <= begins[b]);
      if (take_end) {
        entries.push_back(Entry{ends_[ends[e]].ts, ends[e], true});
        ++e;
      } else {
        entries.push_back(Entry{slices.ts[begins[b]], begins[b], false});
        ++b;
      }
    }
    if (track < track_unordered_.size() && track_unordered_[track])
      std::stable_sort(entries.begin(), entries.end(),
                       [](const Entry& a, const Entry& c) { return a.ts < c.ts; });
    open.clear();
    for (const Entry& entry : entries) {
      if (!entry.is_end) {
        open.push_back(entry.index);
        continue;
      }
      if (open.empty()) {
        ++unmatched_ends_;
        continue;
      }
      RowIndex row = open.back();
      open.pop_back();
      slices.dur[row] = std::max<int64_t>(0, difference_saturating(entry.ts, slices.ts[row]));
      end_rows_[entry.index] = row;
    }
    for (RowIndex row : open) {
      int64_t last = track < track_max_ts_.size() ? track_max_ts_[track] : slices.ts[row];
      slices.dur[row] = std::max<int64_t>(0, difference_saturating(last, slices.ts[row]));
      slices.flags[row] |= trace::kSliceUnfinished;
      ++unfinished_slices_;
    }
  }
  for (const EndArg& arg : end_args_)
    if (end_rows_[arg.end] != kNoRow)
      trace().slice_args.add(end_rows_[arg.end], arg.key, arg.value);
}

// Flow ids in time order (at one time, continuing ids before terminating ones, then file
// order): each mention joins the last slice that named the id.
void PerfettoReader::resolve_flows() {
  if (flow_mentions_.empty()) return;
  std::stable_sort(flow_mentions_.begin(), flow_mentions_.end(),
                   [](const FlowMention& a, const FlowMention& b) {
                     if (a.ts != b.ts) return a.ts < b.ts;
                     return !a.terminating && b.terminating;
                   });
  std::unordered_map<uint64_t, RowIndex> last_slice;
  std::vector<std::pair<uint64_t, RowIndex>> early_terminations;
  for (const FlowMention& mention : flow_mentions_) {
    RowIndex row = mention.on_end ? end_rows_[mention.target] : mention.target;
    if (row == kNoRow) continue;
    auto found = last_slice.find(mention.id);
    if (found != last_slice.end() && found->second != row)
      trace().flows.add(found->second, row, mention.id);
    else if (found == last_slice.end() && mention.terminating)
      early_terminations.emplace_back(mention.id, row);
    if (mention.terminating) {
      if (found != last_slice.end()) last_slice.erase(found);
    } else {
      last_slice[mention.id] = row;
    }
  }
  // A flow that goes back in time (opsight's model allows one; its writer gives every
  // flow its own id): the terminating end came first, the slice that names the id later.
  for (const auto& [id, row] : early_terminations) {
    auto found = last_slice.find(id);
    if (found == last_slice.end() || found->second == row) {
      ++unmatched_flow_ids_;
      continue;
    }
    trace().flows.add(found->second, row, id);
    last_slice.erase(found);
  }
}

// Counter samples sorted by time when some track's went backwards (several sequences).
void PerfettoReader::order_counters() {
  auto& counters = trace().counters;
  std::vector<int64_t> last(trace().counter_tracks.size(), kInt64Min);
  bool ordered = true;
  for (size_t row = 0; row < counters.size() && ordered; ++row) {
    uint32_t track = counters.counter_track[row];
    if (counters.ts[row] < last[track]) ordered = false;
    last[track] = counters.ts[row];
  }
  if (ordered) return;
  std::vector<RowIndex> order(counters.size());
  for (RowIndex row = 0; row < order.size(); ++row) order[row] = row;
  std::stable_sort(order.begin(), order.end(),
                   [&](RowIndex a, RowIndex b) { return counters.ts[a] < counters.ts[b]; });
  trace::CounterTable sorted;
  for (RowIndex row : order)
    sorted.add(counters.ts[row], counters.counter_track[row], counters.value[row]);
  counters = std::move(sorted);
}

}  // namespace opsight::io::perfetto_reading
