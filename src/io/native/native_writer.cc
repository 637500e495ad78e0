// Writes a Trace in the native format (what `opsight convert trace.json out.opsight` does).
// Ticks are nanoseconds here (two clock-sync points one second apart with slope 1), each
// thread track becomes a thread, slices become Begin/End pairs in time order, and counters
// ride on a synthetic thread per process. An async lane is written into the stream of its
// thread (same pid and tid) after the thread's own events: a named kTrack switch (so
// that each lane, even of a reused key, reads back as a track of its own) and its events.
#include <algorithm>
#include <map>
#include <unordered_map>

#include "format/chunk_codec.hpp"
#include "format/chunk_index.hpp"
#include "io/io.hpp"
#include "io/native/derived_span_id.hpp"
#include "io/native/native_output.hpp"

namespace opsight::io {

namespace {

using format::Slot;
using format::SlotKind;
using native::EventsEncoder;
using native::NativeOutput;
using native::slot_word;
using trace::RowIndex;

struct PairHash {
  size_t operator()(const std::pair<int64_t, int64_t>& key) const {
    return static_cast<size_t>(
        trace::mix64(static_cast<uint64_t>(key.first) * 31 + static_cast<uint64_t>(key.second)));
  }
};

void add_args(EventsEncoder& events, const trace::Trace& trace, const trace::ArgTable& args,
              const trace::Column<RowIndex>& begin, RowIndex row) {
  if (begin.size() <= row + 1u) return;
  for (RowIndex arg = begin[row]; arg < begin[row + 1]; ++arg) {
    std::string_view key = trace.str(args.key[arg]).substr(0, format::kMaxInlineString);
    const trace::ArgValue& value = args.value[arg];
    uint64_t bits = 0;
    std::string_view text;
    if (value.type == trace::ArgType::kDouble) {
      std::memcpy(&bits, &value.double_value, 8);
    } else if (value.type == trace::ArgType::kString) {
      text = trace.str(value.string_value).substr(0, format::kMaxInlineString);
      bits = text.size();
    } else {
      bits = static_cast<uint64_t>(value.int_value);
    }
    std::string bytes(key);
    bytes.append(text);
    uint32_t id = static_cast<uint32_t>(key.size()) | (static_cast<uint32_t>(text.size()) << 16);
    events.add(bits, slot_word(id, SlotKind::kArg, static_cast<uint8_t>(value.type)), bytes);
  }
}

// What the event streams cannot carry: process names, parents, sort order and labels,
// thread sort order and counter series, as run-info entries the reader knows
// (docs/native-format.md, "Layout entries").
void append_layout_info(const trace::Trace& trace,
                        std::vector<std::pair<std::string, std::string>>& info) {
  for (const trace::Process& process : trace.processes) {
    std::string prefix = "process." + std::to_string(process.pid) + ".";
    if (process.name != 0) info.emplace_back(prefix + "name", trace.str(process.name));
    if (process.parent_pid != 0)
      info.emplace_back(prefix + "parent_pid", std::to_string(process.parent_pid));
    if (process.sort_index != 0)
      info.emplace_back(prefix + "sort_index", std::to_string(process.sort_index));
    for (trace::StringId label : process.labels)
      info.emplace_back(prefix + "label", trace.str(label));
  }
  for (const trace::Track& track : trace.tracks)
    if (track.kind == trace::TrackKind::kThread && track.sort_index != 0)
      info.emplace_back(
          "thread." + std::to_string(track.pid) + "." + std::to_string(track.tid) + ".sort_index",
          std::to_string(track.sort_index));
  // An async track's name and place (a GPU stream's "GPU 0 stream 7", after the threads):
  // the events carry only its key. A key two tracks of a process share is derived by the
  // event writer below, so only tracks with a key of their own are described.
  std::map<std::pair<int64_t, uint64_t>, int> async_key_uses;
  for (const trace::Track& track : trace.tracks)
    if (track.kind == trace::TrackKind::kAsync) ++async_key_uses[{track.pid, track.async_key}];
  for (const trace::Track& track : trace.tracks) {
    if (track.kind != trace::TrackKind::kAsync || async_key_uses[{track.pid, track.async_key}] != 1)
      continue;
    std::string prefix =
        "async_track." + std::to_string(track.pid) + "." + std::to_string(track.async_key) + ".";
    if (track.name != 0) info.emplace_back(prefix + "name", trace.str(track.name));
    if (track.sort_index != 0)
      info.emplace_back(prefix + "sort_index", std::to_string(track.sort_index));
  }
  for (const trace::CounterTrack& counter : trace.counter_tracks)
    if (counter.group != 0)
      info.emplace_back(
          "counter_series." + std::to_string(counter.pid) + "." +
              std::string(trace.str(counter.name)),
          std::string(trace.str(counter.group)) + '\x1f' + std::string(trace.str(counter.series)));
}

// The ids under which flows are written: the flow's own id when no other flow row shares
// it, else one derived from it and the row (a chain s -> t -> f is one row per step, all
// with one id; the reader pairs ends by id). Open ends keep their ids.
std::vector<uint64_t> written_flow_ids(const trace::FlowTable& flows) {
  std::unordered_map<uint64_t, uint32_t> uses;
  for (uint64_t id : flows.id) ++uses[id];
  std::vector<uint64_t> ids(flows.size());
  for (size_t row = 0; row < flows.size(); ++row) {
    uint64_t id = flows.id[row];
    ids[row] = id != 0 && uses[id] == 1 ? id : trace::mix64(id ^ (uint64_t{row} << 1) ^ 0xf1f1) | 1;
  }
  return ids;
}

// The whole file into `output` (handed over to its sink, if any, as it grows).
void write_native_to(const trace::Trace& trace, NativeOutput& output) {
  std::string& out = output.bytes;
  format::append_file_header(out);

  // Run info.
  const trace::RunInfo& run = trace.run;
  std::vector<std::pair<std::string, std::string>> info = {
      {"command_line", run.command_line},       {"host", run.host},
      {"opsight_version", run.opsight_version}, {"clock", run.clock.empty() ? "ns" : run.clock},
      {"pid", std::to_string(run.pid)},         {"trace_id", run.trace_id.to_hex()},
      {"ticks_per_second", "1000000000"},       {"source_format", run.source_format},
  };
  for (const auto& entry : run.extra) info.push_back(entry);
  append_layout_info(trace, info);
  format::append_run_info_chunk(out, info);

  // Clock: ticks are ns; two points one second apart give slope 1.
  auto [first_ns, last_ns] = trace.time_bounds();
  int64_t offset = run.has_unix_offset ? run.unix_offset_ns : 0;
  // Wrapping arithmetic: a trace read from a damaged file may hold any offset and span.
  auto plus = [](int64_t a, int64_t b) {
    return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
  };
  int64_t bounds_ns = plus(last_ns, plus(~first_ns, 1));  // last_ns - first_ns
  int64_t span_ns = run.traced_ns > 0 ? run.traced_ns : std::max<int64_t>(bounds_ns, 1);
  // Ticks count from the trace's first timestamp, so that negative timestamps (which
  // foreign traces may have) stay ordered as unsigned ticks.
  format::ClockSync syncs[2] = {{0, first_ns, plus(first_ns, offset)},
                                {static_cast<uint64_t>(span_ns), plus(first_ns, span_ns),
                                 plus(plus(first_ns, span_ns), offset)}};
  auto ticks_of = [first = first_ns](int64_t ts) {
    return static_cast<uint64_t>(ts) - static_cast<uint64_t>(first);
  };
  // The packed async forms hold 56 bits of ticks, read against the thread's previous event:
  // exact while the trace spans less than 2^55 ticks (417 days), so used only then.
  const bool pack_async = static_cast<uint64_t>(last_ns) - static_cast<uint64_t>(first_ns) <
                          (uint64_t{1} << (format::kPackedTicksBits - 1));
  format::append_chunk(out, format::ChunkType::kClockSync,
                       std::string_view(reinterpret_cast<const char*>(syncs), sizeof(syncs)));

  // Names: one id per distinct (name, category) of slices and instants.
  std::unordered_map<uint64_t, uint32_t> name_ids;
  std::string names_payload;
  // Most names have one category: a direct cache by name id avoids the hash lookup.
  std::vector<uint32_t> cached_id(trace.strings.size(), 0);
  std::vector<trace::StringId> cached_category(trace.strings.size(), 0);
  auto name_id = [&](trace::StringId name, trace::StringId category) {
    if (cached_id[name] != 0 && cached_category[name] == category) return cached_id[name];
    uint64_t key = (uint64_t{name} << 32) | category;
    auto [it, inserted] = name_ids.try_emplace(key, static_cast<uint32_t>(name_ids.size() + 1));
    if (inserted) {
      std::string_view name_text = trace.str(name).substr(0, 0xFFFF);
      std::string_view category_text = trace.str(category).substr(0, 0xFFFF);
      format::append_pod(names_payload, format::NameRecordHeader{
                                            it->second, 0, static_cast<uint16_t>(name_text.size()),
                                            static_cast<uint16_t>(category_text.size()), 0, 0});
      names_payload.append(name_text);
      names_payload.append(category_text);
    }
    cached_id[name] = it->second;
    cached_category[name] = category;
    return it->second;
  };
  std::vector<uint32_t> slice_name_ids(trace.slices.size());
  for (size_t row = 0; row < trace.slices.size(); ++row)
    slice_name_ids[row] = name_id(trace.slices.name[row], trace.slices.category[row]);
  std::vector<uint32_t> instant_name_ids(trace.instants.size());
  for (size_t row = 0; row < trace.instants.size(); ++row)
    instant_name_ids[row] = name_id(trace.instants.name[row], trace.instants.category[row]);
  if (!names_payload.empty()) format::append_chunk(out, format::ChunkType::kNames, names_payload);

  // Rows per track, in order.
  std::vector<std::vector<RowIndex>> slices_of(trace.tracks.size());
  for (RowIndex row = 0; row < trace.slices.size(); ++row)
    if (trace.slices.track[row] < slices_of.size())
      slices_of[trace.slices.track[row]].push_back(row);
  std::vector<std::vector<RowIndex>> instants_of(trace.tracks.size());
  for (RowIndex row = 0; row < trace.instants.size(); ++row)
    if (trace.instants.track[row] < instants_of.size())
      instants_of[trace.instants.track[row]].push_back(row);

  std::vector<format::ThreadStats> stats;
  auto write_thread = [&](uint32_t index, int64_t pid, int64_t tid, std::string_view name) {
    size_t header = format::begin_chunk(out);
    format::append_pod(
        out, format::ThreadRecordHeader{index, static_cast<uint32_t>(name.size()), pid, tid});
    out.append(name);
    format::end_chunk(out, header, format::ChunkType::kThread);
  };

  // Threads: each thread track with the async lanes of the same pid and tid; lanes whose
  // thread has no track of its own get a thread of their own.
  std::vector<std::vector<trace::TrackId>> threads;
  {
    std::unordered_map<std::pair<int64_t, int64_t>, size_t, PairHash> thread_of;
    for (trace::TrackId id = 0; id < trace.tracks.size(); ++id) {
      if (trace.tracks[id].is_async()) continue;
      auto [it, inserted] =
          thread_of.try_emplace({trace.tracks[id].pid, trace.tracks[id].tid}, threads.size());
      if (inserted) threads.emplace_back();
      threads[it->second].push_back(id);
    }
    for (trace::TrackId id = 0; id < trace.tracks.size(); ++id) {
      if (trace.tracks[id].kind != trace::TrackKind::kThreadLane) continue;
      auto [it, inserted] =
          thread_of.try_emplace({trace.tracks[id].pid, trace.tracks[id].tid}, threads.size());
      if (inserted) threads.emplace_back();
      threads[it->second].push_back(id);
    }
  }

  // Flow ends, written right after the begin of their slice (and its args).
  std::vector<uint64_t> flow_ids = written_flow_ids(trace.flows);
  std::unordered_multimap<RowIndex, std::pair<uint64_t, uint8_t>> flow_ends_of;
  for (size_t row = 0; row < trace.flows.size(); ++row) {
    flow_ends_of.emplace(trace.flows.slice_out[row], std::pair{flow_ids[row], format::kFlowOut});
    flow_ends_of.emplace(trace.flows.slice_in[row], std::pair{flow_ids[row], format::kFlowIn});
  }
  for (const trace::OpenFlowEnd& end : trace.open_flow_ends)
    if (!end.joined)
      flow_ends_of.emplace(end.slice,
                           std::pair{end.id, end.outgoing ? format::kFlowOut : format::kFlowIn});
  // The W3C context events of a slice: its explicit id, the remote trace it joined.
  std::vector<uint32_t> context_of_slice(trace.slices.size(), UINT32_MAX);
  for (uint32_t row = 0; row < trace.span_contexts.size(); ++row)
    if (trace.span_contexts.slice[row] < trace.slices.size())
      context_of_slice[trace.span_contexts.slice[row]] = row;
  // A slice keeps its span id (the one exporters sent) through the file: the reader derives
  // an id from the thread and the begin's sequence (`derived_id`), and where the slice's
  // differs, or was the program's own, a kSpanId event carries it.
  const uint64_t span_salt = native::span_id_salt(trace.run.trace_id);
  auto add_trace_context = [&](EventsEncoder& events, RowIndex row, uint64_t derived_id) {
    if ((trace.slices.flags[row] & trace::kSliceExplicitSpanId) ||
        trace.slices.span_id[row] != derived_id)
      events.add(trace.slices.span_id[row], slot_word(0, SlotKind::kSpanId));
    uint32_t context = context_of_slice[row];
    if (context == UINT32_MAX) return;
    Slot trace_id_slot{};
    trace::TraceId id = trace.span_contexts.trace_id[context];
    std::memcpy(&trace_id_slot, &id.high, 8);
    std::memcpy(reinterpret_cast<char*>(&trace_id_slot) + 8, &id.low, 8);
    events.add(trace.span_contexts.parent_span_id[context],
               slot_word(0, SlotKind::kSpanContext, trace.span_contexts.trace_flags[context]), {},
               &trace_id_slot);
  };
  auto add_flow_ends = [&](EventsEncoder& events, RowIndex row, uint8_t flag) {
    if (flow_ends_of.empty()) return;
    auto [first, last] = flow_ends_of.equal_range(row);
    for (auto it = first; it != last; ++it)
      events.add(it->second.first,
                 slot_word(0, SlotKind::kFlow, static_cast<uint8_t>(it->second.second | flag)));
  };

  uint32_t thread_index = 0;
  for (const std::vector<trace::TrackId>& thread_tracks : threads) {
    const trace::Track& first = trace.tracks[thread_tracks.front()];
    uint64_t events_recorded = 0, events_dropped = 0;
    int64_t overhead_ns = 0;
    for (trace::TrackId id : thread_tracks) {
      events_recorded += trace.tracks[id].events_recorded;
      events_dropped += trace.tracks[id].events_dropped;
      overhead_ns += std::max<int64_t>(0, trace.tracks[id].overhead_ns);
    }
    write_thread(thread_index, first.pid, first.tid,
                 first.is_async() ? std::string_view() : trace.str(first.name));
    // With ticks in ns and no per-event cost, slow_path_ticks carries the overhead as is.
    stats.push_back(
        {thread_index, 0, events_recorded, events_dropped, static_cast<uint64_t>(overhead_ns)});
    const uint32_t written_thread = thread_index;
    EventsEncoder events(output, thread_index++);
    uint64_t begins_written = 0;  // the reader's sequence of begins on this thread
    for (trace::TrackId track_id : thread_tracks) {
      const trace::Track& track = trace.tracks[track_id];
      if (track.is_async()) {
        std::string_view name = trace.str(track.name).substr(0, format::kMaxInlineString);
        std::string fallback;
        if (name.empty()) name = fallback = "track " + std::to_string(track.async_key);
        events.add(track.async_key, slot_word(static_cast<uint32_t>(name.size()), SlotKind::kTrack),
                   name);
      }
      std::vector<RowIndex> open;
      auto close_until = [&](int64_t ts) {
        while (!open.empty() && trace.slices.end(open.back()) <= ts) {
          RowIndex row = open.back();
          bool unfinished = trace.slices.flags[row] & trace::kSliceUnfinished;
          events.add(ticks_of(trace.slices.end(row)),
                     slot_word(0, SlotKind::kEnd, unfinished ? format::kEndOfUnfinished : 0));
          open.pop_back();
        }
      };
      const auto& rows = slices_of[track_id];
      const auto& instant_rows = instants_of[track_id];
      size_t next_instant = 0;
      auto emit_instants_until = [&](int64_t ts, bool inclusive) {
        while (next_instant < instant_rows.size()) {
          RowIndex row = instant_rows[next_instant];
          int64_t instant_ts = trace.instants.ts[row];
          if (inclusive ? instant_ts > ts : instant_ts >= ts) break;
          close_until(instant_ts);
          events.add(ticks_of(instant_ts),
                     slot_word(instant_name_ids[row], SlotKind::kInstant,
                               static_cast<uint8_t>(trace.instants.scope[row])));
          add_args(events, trace, trace.instant_args, trace.instants.args_begin, row);
          ++next_instant;
        }
      };
      for (RowIndex row : rows) {
        emit_instants_until(trace.slices.ts[row], false);
        close_until(trace.slices.ts[row]);
        events.add(ticks_of(trace.slices.ts[row]),
                   slot_word(slice_name_ids[row], SlotKind::kBegin));
        add_args(events, trace, trace.slice_args, trace.slices.args_begin, row);
        add_flow_ends(events, row, 0);
        add_trace_context(events, row,
                          native::derived_span_id(written_thread, ++begins_written, span_salt));
        open.push_back(row);
      }
      emit_instants_until(std::numeric_limits<int64_t>::max(), true);
      close_until(std::numeric_limits<int64_t>::max());
      if (track.is_async()) events.add(0, slot_word(0, SlotKind::kTrack));
    }
  }

  // Async tracks: one synthetic thread per process that has them; each track's slices as
  // async begin/end pairs in nesting order, under the track's key (or a key derived
  // from it when two async tracks of the process share one).
  {
    std::vector<int64_t> pids;
    std::vector<std::vector<trace::TrackId>> tracks_of_pid;
    for (trace::TrackId id = 0; id < trace.tracks.size(); ++id) {
      if (trace.tracks[id].kind != trace::TrackKind::kAsync) continue;
      auto it = std::find(pids.begin(), pids.end(), trace.tracks[id].pid);
      if (it == pids.end()) {
        pids.push_back(trace.tracks[id].pid);
        tracks_of_pid.emplace_back();
        it = pids.end() - 1;
      }
      tracks_of_pid[static_cast<size_t>(it - pids.begin())].push_back(id);
    }
    for (size_t i = 0; i < pids.size(); ++i) {
      write_thread(thread_index, pids[i], -1, "async");
      stats.push_back({thread_index, 0, 0, 0, 0});
      EventsEncoder events(output, thread_index++);
      std::unordered_map<uint64_t, int> keys_used;
      for (trace::TrackId track_id : tracks_of_pid[i]) {
        uint64_t key = trace.tracks[track_id].async_key;
        if (keys_used[key]++ > 0) key = trace::mix64(key ^ track_id) | 1;
        Slot key_slot{};
        std::memcpy(&key_slot, &key, sizeof(key));
        std::vector<RowIndex> open;
        auto close_until = [&](int64_t ts) {
          while (!open.empty() && trace.slices.end(open.back()) <= ts) {
            bool unfinished = trace.slices.flags[open.back()] & trace::kSliceUnfinished;
            uint64_t end_ticks = ticks_of(trace.slices.end(open.back()));
            if (unfinished || !pack_async)
              events.add(
                  end_ticks,
                  slot_word(0, SlotKind::kAsyncEnd, unfinished ? format::kEndOfUnfinished : 0), {},
                  &key_slot);
            else
              events.add(key, format::packed_async_word(SlotKind::kAsyncEndPacked, end_ticks));
            open.pop_back();
          }
        };
        for (RowIndex row : slices_of[track_id]) {
          close_until(trace.slices.ts[row]);
          // The recorder's forms: packed where the name id and key fit, else two slots.
          uint64_t begin_ticks = ticks_of(trace.slices.ts[row]);
          if (pack_async && slice_name_ids[row] < format::kPackedNameIdLimit &&
              key < format::kPackedAsyncIdLimit)
            events.add(slice_name_ids[row] | (key << 24),
                       format::packed_async_word(SlotKind::kAsyncBeginPacked, begin_ticks));
          else
            events.add(begin_ticks,
                       slot_word(slice_name_ids[row], SlotKind::kAsyncBegin, format::kAsyncNameId),
                       {}, &key_slot);
          add_flow_ends(events, row, format::kFlowOnAsyncBegin);
          open.push_back(row);
        }
        close_until(std::numeric_limits<int64_t>::max());
      }
    }
  }

  // Counters: one synthetic thread per process that has counters.
  if (trace.counters.size() > 0) {
    std::vector<std::vector<RowIndex>> samples_of_pid_index;
    std::vector<int64_t> pids;
    for (RowIndex row = 0; row < trace.counters.size(); ++row) {
      int64_t pid = trace.counter_tracks[trace.counters.counter_track[row]].pid;
      auto it = std::find(pids.begin(), pids.end(), pid);
      size_t index = static_cast<size_t>(it - pids.begin());
      if (it == pids.end()) {
        pids.push_back(pid);
        samples_of_pid_index.emplace_back();
      }
      samples_of_pid_index[index].push_back(row);
    }
    for (size_t i = 0; i < pids.size(); ++i) {
      write_thread(thread_index, pids[i], -1, "counters");
      EventsEncoder events(output, thread_index++);
      for (RowIndex row : samples_of_pid_index[i]) {
        std::string_view name =
            trace.str(trace.counter_tracks[trace.counters.counter_track[row]].name)
                .substr(0, format::kMaxInlineString);
        Slot value{};
        double sample = trace.counters.value[row];
        std::memcpy(&value, &sample, sizeof(sample));
        events.add(ticks_of(trace.counters.ts[row]),
                   slot_word(static_cast<uint32_t>(name.size()), SlotKind::kCounter), name, &value);
      }
    }
  }

  // A run-level overhead beyond the tracks' own (a Chrome JSON file keeps only the total)
  // goes to the first thread, so that reading the file back gives the same total.
  // Unsigned sums: a trace read from a damaged file may hold huge overheads.
  uint64_t track_overhead_ns = 0;
  for (const auto& entry : stats) track_overhead_ns += entry.slow_path_ticks;
  if (!stats.empty() && run.overhead_ns > 0 &&
      static_cast<uint64_t>(run.overhead_ns) > track_overhead_ns)
    stats.front().slow_path_ticks += static_cast<uint64_t>(run.overhead_ns) - track_overhead_ns;

  // Footer.
  size_t header = format::begin_chunk(out);
  format::append_pod(
      out, format::SessionStats{ticks_of(last_ns), stats.size(), run.events_dropped, 0.0});
  for (const auto& entry : stats) format::append_pod(out, entry);
  format::end_chunk(out, header, format::ChunkType::kStats);
  output.append_index();
}

}  // namespace

std::string write_native(const trace::Trace& trace) {
  NativeOutput output;
  output.bytes.reserve(trace.slices.size() * 40 + 4096);
  write_native_to(trace, output);
  return std::move(output.bytes);
}

bool write_native(const trace::Trace& trace, ByteSink& sink) {
  NativeOutput output;
  output.sink = &sink;
  output.bytes.reserve((size_t{1} << 20) + 4096);
  write_native_to(trace, output);
  output.hand_over();
  return !output.refused;
}

}  // namespace opsight::io
