// Reader of Perfetto's protobuf trace format (a `.pftrace`): what opsight's writer writes
// (perfetto_writer.cc) and what Perfetto's SDK writes for track events, into a Trace.
//
// Two passes over the bytes, both through wire::ProtoReader (every length checked, errors
// with the byte offset and the field):
//   1. the track descriptors (merged by uuid; a later one for the same uuid replaces the
//      earlier, as the SDK sends them again after every incremental-state reset) and the
//      clock snapshots of the global clocks, so that an event may name a track, or a clock
//      conversion may need a snapshot, that comes later in the file;
//   2. every packet in order, per packet sequence (trusted_packet_sequence_id): incremental
//      state (interned event names, categories, annotation names and string values;
//      TracePacketDefaults), cleared by SEQ_INCREMENTAL_STATE_CLEARED; a packet that needs
//      incremental state on a sequence that never had it cleared is skipped and counted, as
//      Perfetto does.
//
// Mapping to the model:
//   - a ProcessDescriptor track -> trace::Process (name, labels, legacy_sort_index as its
//     sort_index; the first command line becomes run.command_line and run.pid); slices on
//     it -> a process-wide async track, instants on it -> process-scoped instants;
//   - a ThreadDescriptor track -> the thread's own track (name, legacy_sort_index);
//   - a track with a name only -> a process-wide async track of the process it sits under
//     (pid 0 when none): a lane of a thread comes back as such an async track; under a
//     "GPU <n>" track, a "GPU <n> stream <s>" track gets the GPU stream key back
//     (trace/gpu_tracks.hpp). Instants on such a track are zero-length slices on it (as
//     the Chrome JSON reader does for "n" events); on a track under no process they are
//     global instants;
//   - a CounterDescriptor track -> a counter track (unit: ns, count, bytes, or unit_name;
//     unit_multiplier and is_incremental applied to the values);
//   - SLICE_BEGIN / SLICE_END -> slices, paired per track in time order (stable: file order
//     among equal times, like Perfetto's sorter), an END closing the innermost open slice;
//     args on an END join its slice; a BEGIN never ended is unfinished, ending at the last
//     time seen on its track (counted in run.extra); an END with nothing open is counted;
//   - INSTANT -> an instant (a zero-length slice when it carries flow ids, so that its
//     flows have a slice to join); COUNTER -> a counter sample, extra_counter_values too;
//   - debug annotations -> args: int, uint, bool, double, string, interned string; a
//     pointer as "0x..." text; nested values, dicts and arrays as JSON text;
//   - flow_ids / terminating_flow_ids (and the older varint fields, and a legacy event's
//     bind_id) -> flows, in time order: each event that names an id is joined to the last
//     one that did, a terminating id ends the chain; a terminating id met before any start
//     (a flow back in time, which opsight's model allows and its writer writes) is joined
//     to the start that comes later.
// Timestamps are converted to the trace's clock (the snapshots' primary_trace_clock, else
// BOOTTIME, Perfetto's default) through the clock snapshots, including the SDK's
// sequence-scoped incremental clocks; a clock with no snapshot to the trace clock is taken
// as it is (counted). When a snapshot has REALTIME and the trace clock, run.unix_offset_ns
// is set. Event times are clamped to [0, 2^62] ns, so that no later sum overflows.
//
// Damage: the first malformed packet ends the read; the packets before it are kept and
// ReadResult::damage names the byte and field (an error when nothing came before it).
//
// Thread-safety: read_perfetto only reads its input.
//
// The reader is one class, PerfettoReader (perfetto_reader_internal.hpp), its methods split
// by seam: this file holds the read itself (pass 1's loop, pass 2's packet framing, the
// sequences' interned data and defaults) and the end of the read; the tracks, the clocks,
// the events and the debug annotations have a file each (perfetto_reader_*.cc).
#include "io/perfetto/perfetto_reader_internal.hpp"

namespace opsight::io::perfetto_reading {

namespace {

// The names of the fields errors mention, by message: "TrackEvent.name (field 23)".
const char* field_name(std::string_view message, uint32_t field) {
  struct Name {
    const char* message;
    uint32_t field;
    const char* name;
  };
  static constexpr Name kNames[] = {
      {"Trace", 1, "packet"},
      {"TracePacket", 6, "clock_snapshot"},
      {"TracePacket", 8, "timestamp"},
      {"TracePacket", 10, "trusted_packet_sequence_id"},
      {"TracePacket", 11, "track_event"},
      {"TracePacket", 12, "interned_data"},
      {"TracePacket", 13, "sequence_flags"},
      {"TracePacket", 43, "process_descriptor"},
      {"TracePacket", 44, "thread_descriptor"},
      {"TracePacket", 58, "timestamp_clock_id"},
      {"TracePacket", 59, "trace_packet_defaults"},
      {"TracePacket", 60, "track_descriptor"},
      {"TrackDescriptor", 1, "uuid"},
      {"TrackDescriptor", 2, "name"},
      {"TrackDescriptor", 3, "process"},
      {"TrackDescriptor", 4, "thread"},
      {"TrackDescriptor", 5, "parent_uuid"},
      {"TrackDescriptor", 8, "counter"},
      {"TrackDescriptor", 10, "static_name"},
      {"ProcessDescriptor", 1, "pid"},
      {"ProcessDescriptor", 2, "cmdline"},
      {"ProcessDescriptor", 6, "process_name"},
      {"ProcessDescriptor", 8, "process_labels"},
      {"ThreadDescriptor", 1, "pid"},
      {"ThreadDescriptor", 2, "tid"},
      {"ThreadDescriptor", 5, "thread_name"},
      {"CounterDescriptor", 3, "unit"},
      {"CounterDescriptor", 6, "unit_name"},
      {"ClockSnapshot", 1, "clocks"},
      {"ClockSnapshot.Clock", 1, "clock_id"},
      {"ClockSnapshot.Clock", 2, "timestamp"},
      {"TrackEvent", 3, "category_iids"},
      {"TrackEvent", 4, "debug_annotations"},
      {"TrackEvent", 9, "type"},
      {"TrackEvent", 10, "name_iid"},
      {"TrackEvent", 11, "track_uuid"},
      {"TrackEvent", 22, "categories"},
      {"TrackEvent", 23, "name"},
      {"TrackEvent", 30, "counter_value"},
      {"TrackEvent", 44, "double_counter_value"},
      {"TrackEvent", 47, "flow_ids"},
      {"TrackEvent", 48, "terminating_flow_ids"},
      {"InternedData", 1, "event_categories"},
      {"InternedData", 2, "event_names"},
      {"InternedData", 3, "debug_annotation_names"},
      {"InternedData", 29, "debug_annotation_string_values"},
      {"DebugAnnotation", 1, "name_iid"},
      {"DebugAnnotation", 6, "string_value"},
      {"DebugAnnotation", 10, "name"},
      {"DebugAnnotation", 17, "string_value_iid"},
  };
  for (const Name& name : kNames)
    if (name.field == field && message == name.message) return name.name;
  return nullptr;
}

// "TrackEvent.name (field 23): problem", or "TrackEvent field 99: problem".
std::string describe(const ProtoDecodeError& error) {
  std::string text = error.message_type;
  if (error.field != 0) {
    const char* name = field_name(error.message_type, error.field);
    if (name != nullptr)
      text += std::string(".") + name + " (field " + std::to_string(error.field) + ")";
    else
      text += " field " + std::to_string(error.field);
  }
  std::string problem = error.problem;
  // The top-level message is the file.
  if (std::string_view(error.message_type) == "Trace")
    if (size_t at = problem.find("end of the message"); at != std::string::npos)
      problem.replace(at, 18, "end of the file");
  return text + ": " + problem;
}

}  // namespace

void wrong_wire_type(const ProtoReader& reader, const ProtoField& field, uint32_t wire_type) {
  reader.fail_field(field, "wire type " + std::to_string(field.wire_type) + ", expected " +
                               std::to_string(wire_type));
}

ReadResult PerfettoReader::read() {
  if (file_.empty()) {
    result_.error = Diagnostic{"file is empty", 0, true};
    return std::move(result_);
  }
  scan_descriptors_and_clocks();
  if (packets_seen_ == 0 && !problem_) {
    result_.error = Diagnostic{"not a Perfetto trace: no TracePacket (field 1 of Trace) in its " +
                                   std::to_string(file_.size()) + " bytes",
                               0, true};
    return std::move(result_);
  }
  choose_trace_clock();
  // About half the events are begins, half ends (a guess: the columns then grow at most
  // once, and memory reserved but never written is never touched).
  trace().slices.reserve(track_event_packets_ / 2);
  ends_.reserve(track_event_packets_ / 2);
  read_packets();
  if (packets_read_ == 0 && problem_) {
    result_.error = problem_;
    result_.trace = trace::Trace();
    return std::move(result_);
  }
  if (problem_) {
    problem_->message += "; read up to the last whole packet before it";
    result_.damage = problem_;
  }
  finish();
  return std::move(result_);
}

void PerfettoReader::scan_descriptors_and_clocks() {
  ProtoReader top(file_, begin_, "Trace");
  ProtoField packet;
  uint64_t packet_offset = 0;
  try {
    while (top.next(packet)) {
      packet_offset = packet.offset;
      if (packet.number != fields::kTracePacket) continue;
      ++packets_seen_;
      expect_wire_type(top, packet, wire::kWireLengthDelimited);
      ProtoReader reader(packet.bytes, begin_, "TracePacket");
      ProtoField field;
      while (reader.next(field)) {
        if (field.number == fields::packet::kTrackEvent) {
          ++track_event_packets_;
        } else if (field.number == fields::packet::kTrackDescriptor) {
          expect_wire_type(reader, field, wire::kWireLengthDelimited);
          scan_descriptor(field.bytes);
        } else if (field.number == fields::packet::kClockSnapshot) {
          expect_wire_type(reader, field, wire::kWireLengthDelimited);
          scan_clock_snapshot(field.bytes);
        }
      }
    }
  } catch (const ProtoDecodeError& error) {
    // A packet's own framing is wrong (the Trace's field), or something inside it.
    stop_offset_ = std::string_view(error.message_type) == "Trace" ? error.offset : packet_offset;
    problem_ = Diagnostic{describe(error), error.offset, true};
  }
}

void PerfettoReader::read_packets() {
  ProtoReader top(file_, begin_, "Trace");
  ProtoField packet;
  try {
    while (top.next(packet)) {
      if (packet.offset >= stop_offset_) break;
      if (packet.number != fields::kTracePacket) continue;
      read_packet(packet.bytes);
      ++packets_read_;
    }
  } catch (const ProtoDecodeError& error) {
    problem_ = Diagnostic{describe(error), error.offset, true};
  }
}

void PerfettoReader::read_packet(std::string_view bytes) {
  ProtoReader reader(bytes, begin_, "TracePacket");
  ProtoField field;
  uint64_t raw_ts = 0, sequence_id = 0, flags = 0, clock_id = 0;
  bool has_clock = false, cleared = false;
  std::string_view event, interned, defaults, descriptor, snapshot, process, thread;
  while (reader.next(field)) {
    switch (field.number) {
      case fields::packet::kTimestamp:
        expect_wire_type(reader, field, wire::kWireVarint);
        raw_ts = field.value;
        break;
      case fields::packet::kTrustedPacketSequenceId:
        expect_wire_type(reader, field, wire::kWireVarint);
        sequence_id = field.value;
        break;
      case fields::packet::kSequenceFlags:
        expect_wire_type(reader, field, wire::kWireVarint);
        flags = field.value;
        break;
      case fields::packet::kIncrementalStateCleared:
        expect_wire_type(reader, field, wire::kWireVarint);
        cleared = field.as_bool();
        break;
      case fields::packet::kTimestampClockId:
        expect_wire_type(reader, field, wire::kWireVarint);
        clock_id = field.value;
        has_clock = true;
        break;
      case fields::packet::kTrackEvent:
        expect_wire_type(reader, field, wire::kWireLengthDelimited);
        event = field.bytes;
        break;
      case fields::packet::kInternedData:
        expect_wire_type(reader, field, wire::kWireLengthDelimited);
        interned = field.bytes;
        break;
      case fields::packet::kTracePacketDefaults:
        expect_wire_type(reader, field, wire::kWireLengthDelimited);
        defaults = field.bytes;
        break;
      case fields::packet::kTrackDescriptor:
        descriptor = field.bytes;  // checked by pass 1
        break;
      case fields::packet::kClockSnapshot:
        snapshot = field.bytes;  // checked by pass 1
        break;
      case fields::packet::kProcessDescriptor:
        expect_wire_type(reader, field, wire::kWireLengthDelimited);
        process = field.bytes;
        break;
      case fields::packet::kThreadDescriptor:
        expect_wire_type(reader, field, wire::kWireLengthDelimited);
        thread = field.bytes;
        break;
      default:
        break;
    }
  }
  Sequence& seq = sequence(sequence_id);
  if (cleared || (flags & fields::packet::kSeqIncrementalStateCleared) != 0)
    seq.clear_incremental_state();
  if (!defaults.empty()) read_defaults(defaults, seq);
  if ((flags & fields::packet::kSeqNeedsIncrementalState) != 0 && !seq.state_valid) {
    ++packets_without_incremental_state_;
    return;
  }
  if (!interned.empty()) read_interned_data(interned, seq);
  if (!snapshot.empty()) read_sequence_clocks(snapshot, seq);
  if (!process.empty()) read_legacy_process(process);
  if (!thread.empty()) read_legacy_thread(thread, seq);
  if (descriptor.data() != nullptr) {
    ProtoReader uuid_reader(descriptor, begin_, "TrackDescriptor");
    ProtoField uuid_field;
    uint64_t uuid = 0;
    while (uuid_reader.next(uuid_field))
      if (uuid_field.number == fields::track::kUuid) uuid = uuid_field.value;
    if (uuid != 0) materialize(state_of_uuid(uuid));
  }
  if (event.data() != nullptr) {
    uint64_t clock = has_clock       ? clock_id
                     : seq.has_clock ? seq.clock_id
                                     : fields::kBuiltinClockBoottime;
    read_track_event(event, raw_ts, clock, seq);
  }
}

void PerfettoReader::read_defaults(std::string_view bytes, Sequence& seq) {
  ProtoReader reader(bytes, begin_, "TracePacketDefaults");
  ProtoField field;
  // New defaults replace the old ones whole.
  seq.has_clock = false;
  seq.has_default_track = false;
  seq.extra_counter_uuids.clear();
  seq.extra_double_counter_uuids.clear();
  while (reader.next(field)) {
    if (field.number == fields::packet_defaults::kTimestampClockId) {
      expect_wire_type(reader, field, wire::kWireVarint);
      seq.has_clock = true;
      seq.clock_id = field.value;
    } else if (field.number == fields::packet_defaults::kTrackEventDefaults) {
      expect_wire_type(reader, field, wire::kWireLengthDelimited);
      ProtoReader inner(field.bytes, begin_, "TrackEventDefaults");
      ProtoField value;
      while (inner.next(value)) {
        if (value.number == fields::event_defaults::kTrackUuid) {
          expect_wire_type(inner, value, wire::kWireVarint);
          seq.has_default_track = true;
          seq.default_track = value.value;
        } else if (value.number == fields::event_defaults::kExtraCounterTrackUuids) {
          inner.for_each_repeated(value, wire::kWireVarint,
                                  [&](uint64_t uuid) { seq.extra_counter_uuids.push_back(uuid); });
        } else if (value.number == fields::event_defaults::kExtraDoubleCounterTrackUuids) {
          inner.for_each_repeated(value, wire::kWireVarint, [&](uint64_t uuid) {
            seq.extra_double_counter_uuids.push_back(uuid);
          });
        }
      }
    }
  }
}

void PerfettoReader::read_interned_data(std::string_view bytes, Sequence& seq) {
  ProtoReader reader(bytes, begin_, "InternedData");
  ProtoField field;
  while (reader.next(field)) {
    InternTable* table = nullptr;
    switch (field.number) {
      case fields::interned::kEventCategories:
        table = &seq.categories;
        break;
      case fields::interned::kEventNames:
        table = &seq.names;
        break;
      case fields::interned::kDebugAnnotationNames:
        table = &seq.annotation_names;
        break;
      case fields::interned::kDebugAnnotationStringValues:
        table = &seq.annotation_strings;
        break;
      default:
        continue;
    }
    expect_wire_type(reader, field, wire::kWireLengthDelimited);
    ProtoReader entry(field.bytes, begin_, "InternedData entry");
    ProtoField part;
    uint64_t iid = 0;
    std::string_view text;
    while (entry.next(part)) {
      if (part.number == fields::interned::kIid) {
        expect_wire_type(entry, part, wire::kWireVarint);
        iid = part.value;
      } else if (part.number == fields::interned::kName) {
        expect_wire_type(entry, part, wire::kWireLengthDelimited);
        text = part.bytes;
      }
    }
    table->set(iid, trace().intern(text));
  }
}

void PerfettoReader::finish() {
  pair_slices();
  resolve_flows();
  order_counters();
  trace::RunInfo& run = trace().run;
  run.source_format = "perfetto";
  run.complete = !result_.damage.has_value();
  auto count = [&](const char* key, uint64_t value) {
    if (value > 0) run.extra.emplace_back(key, std::to_string(value));
  };
  count("unfinished_slices", unfinished_slices_);
  count("unmatched_slice_ends", unmatched_ends_);
  count("unmatched_flow_ids", unmatched_flow_ids_);
  count("flows_on_instants_dropped", flows_on_instants_dropped_);
  count("unknown_interned_ids", unknown_interned_ids_);
  count("packets_without_incremental_state", packets_without_incremental_state_);
  count("events_without_track", events_without_track_);
  count("counter_events_skipped", counter_events_skipped_);
  count("events_on_counter_tracks", events_on_counter_tracks_);
  count("skipped_event_types", skipped_event_types_);
  count("skipped_legacy_events", skipped_legacy_events_);
  count("timestamps_not_converted", unconverted_timestamps_);
  trace().finalize();
}

}  // namespace opsight::io::perfetto_reading

namespace opsight::io {

ReadResult read_perfetto(std::string_view bytes) {
  return perfetto_reading::PerfettoReader(bytes).read();
}

}  // namespace opsight::io
