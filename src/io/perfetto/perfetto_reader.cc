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
#include <algorithm>
#include <bit>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "io/io.hpp"
#include "io/perfetto/perfetto_fields.hpp"
#include "trace/gpu_tracks.hpp"
#include "trace/trace.hpp"
#include "wire/json_escape.hpp"
#include "wire/proto_decoder.hpp"

namespace opsight::io {
namespace {

namespace fields = perfetto::fields;
using trace::ArgValue;
using trace::kNoRow;
using trace::RowIndex;
using trace::StringId;
using trace::TrackId;
using wire::ProtoDecodeError;
using wire::ProtoField;
using wire::ProtoReader;

constexpr uint32_t kNone = std::numeric_limits<uint32_t>::max();
constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();
constexpr int64_t kInt64Min = std::numeric_limits<int64_t>::min();
// Parent chains and nested annotations deeper than this are damage (or not worth showing).
constexpr int kMaxParentHops = 64;
constexpr int kMaxNesting = 16;
constexpr int64_t kMaxTime = int64_t{1} << 62;

int64_t add_saturating(int64_t a, int64_t b) {
  int64_t sum;
  if (__builtin_add_overflow(a, b, &sum)) return b > 0 ? kInt64Max : kInt64Min;
  return sum;
}
int64_t multiply_saturating(int64_t a, int64_t b) {
  int64_t product;
  if (__builtin_mul_overflow(a, b, &product)) return (a < 0) == (b < 0) ? kInt64Max : kInt64Min;
  return product;
}
int64_t difference_saturating(int64_t a, int64_t b) {
  int64_t difference;
  if (__builtin_sub_overflow(a, b, &difference)) return a > b ? kInt64Max : kInt64Min;
  return difference;
}
int64_t clamp_to_int64(uint64_t value) {
  return value > static_cast<uint64_t>(kInt64Max) ? kInt64Max : static_cast<int64_t>(value);
}

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

[[noreturn, gnu::cold, gnu::noinline]] void wrong_wire_type(const ProtoReader& reader,
                                                            const ProtoField& field,
                                                            uint32_t wire_type) {
  reader.fail_field(field, "wire type " + std::to_string(field.wire_type) + ", expected " +
                               std::to_string(wire_type));
}
[[gnu::always_inline]] inline void expect_wire_type(const ProtoReader& reader,
                                                    const ProtoField& field, uint32_t wire_type) {
  if (field.wire_type != wire_type) [[unlikely]]
    wrong_wire_type(reader, field, wire_type);
}

// Interned strings of one kind on one sequence, by iid: a vector for the small dense iids
// writers use, a map for anything else (an iid is a value, not a size: a huge one never
// grows the vector).
class InternTable {
 public:
  void clear() {
    dense_.clear();
    sparse_.clear();
  }
  void set(uint64_t iid, StringId id) {
    if (iid < dense_.size() || iid <= dense_.size() * 2 + 1024) {
      if (iid >= dense_.size()) dense_.resize(iid + 1, kNone);
      dense_[iid] = id;
      return;
    }
    sparse_[iid] = id;
  }
  // kNone when the iid was never sent.
  StringId find(uint64_t iid) const {
    if (iid < dense_.size() && dense_[iid] != kNone) return dense_[iid];
    if (sparse_.empty()) return kNone;
    auto found = sparse_.find(iid);
    return found == sparse_.end() ? kNone : found->second;
  }

 private:
  std::vector<StringId> dense_;
  std::unordered_map<uint64_t, StringId> sparse_;
};

// A clock of one sequence (ids 64-127), as its last snapshot set it.
struct SequenceClock {
  uint64_t id = 0;
  bool incremental = false;
  int64_t multiplier = 1;
  uint64_t last = 0;            // the clock's latest value, in its units
  uint64_t snapshot_value = 0;  // its value at the snapshot
  int64_t trace_ns = 0;         // the trace clock's time at the snapshot
};

// The state of one packet sequence.
struct Sequence {
  bool state_valid = false;  // incremental state cleared at least once
  InternTable names, categories, annotation_names, annotation_strings;
  bool has_clock = false;
  uint64_t clock_id = 0;
  bool has_default_track = false;
  uint64_t default_track = 0;
  std::vector<uint64_t> extra_counter_uuids, extra_double_counter_uuids;
  uint32_t legacy_thread = kNone;  // track state of a legacy ThreadDescriptor
  int64_t legacy_ns = 0;           // legacy delta timestamps add up from here
  std::vector<SequenceClock> clocks;

  void clear_incremental_state() {
    state_valid = true;
    names.clear();
    categories.clear();
    annotation_names.clear();
    annotation_strings.clear();
    has_clock = false;
    has_default_track = false;
    extra_counter_uuids.clear();
    extra_double_counter_uuids.clear();
  }
};

// A TrackDescriptor, as pass 1 found it (views into the input).
struct Descriptor {
  uint64_t parent = 0;
  bool has_parent = false;
  std::string_view name;
  bool has_process = false, has_thread = false, has_counter = false;
  int64_t pid = 0, tid = 0;
  bool thread_has_pid = false;
  std::string_view process_name, thread_name, unit_name;
  std::vector<std::string_view> cmdline, labels;
  int64_t process_sort_index = 0, thread_sort_index = 0;
  uint64_t unit = 0, counter_type = 0;
  int64_t unit_multiplier = 1;
  bool counter_incremental = false;
};

// What a track uuid (or a legacy thread) is in the model, resolved once.
struct TrackState {
  enum class Kind : uint8_t { kThread, kProcess, kCounter, kNamed, kUnknown };
  Kind kind = Kind::kUnknown;
  uint64_t uuid = 0;
  int64_t pid = 0, tid = 0;
  bool in_process = false;  // under a process or thread descriptor
  bool materialized = false;
  TrackId slices = kNone;    // the model track its slices go to, made on first use
  TrackId instants = kNone;  // the thread track its instants go to
  trace::InstantScope scope = trace::InstantScope::kThread;
  uint32_t counter = kNone;
  int64_t counter_multiplier = 1;
  bool counter_incremental = false;
  double counter_last = 0;
};

// One SLICE_END, kept until the slices are paired (per track, in time order).
struct EndRecord {
  int64_t ts = 0;
  TrackId track = 0;
  uint32_t rows_before = 0;  // slices added before it: its place among the begins
};

// One event's mention of a flow id, resolved in time order once every slice is known.
struct FlowMention {
  int64_t ts = 0;
  uint64_t id = 0;
  uint32_t target = 0;  // a slice row, or an EndRecord index with on_end
  bool terminating = false;
  bool on_end = false;
};

struct EndArg {
  uint32_t end = 0;
  StringId key = 0;
  ArgValue value;
};

const char* clock_name(uint64_t clock) {
  switch (clock) {
    case 1:
      return "realtime";
    case 2:
      return "realtime_coarse";
    case 3:
      return "monotonic";
    case 4:
      return "monotonic_coarse";
    case 5:
      return "monotonic_raw";
    case 6:
      return "boottime";
    case 9:
      return "tsc";
    case 10:
      return "perf";
    case 11:
      return "trace_file";
    default:
      return nullptr;
  }
}

// Parses "GPU <n>" (exactly) into n.
std::optional<uint32_t> parse_gpu_group(std::string_view name) {
  if (!name.starts_with("GPU ")) return std::nullopt;
  uint32_t device = 0;
  auto digits = name.substr(4);
  auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), device);
  if (error != std::errc() || end != digits.data() + digits.size() || digits.empty())
    return std::nullopt;
  return device;
}

class PerfettoReader {
 public:
  explicit PerfettoReader(std::string_view file) : file_(file), begin_(file.data()) {}

  ReadResult read() {
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

 private:
  trace::Trace& trace() { return result_.trace; }

  // ---- pass 1: descriptors and global clock snapshots ------------------------------------
  void scan_descriptors_and_clocks() {
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

  void scan_descriptor(std::string_view bytes) {
    ProtoReader reader(bytes, begin_, "TrackDescriptor");
    ProtoField field;
    Descriptor descriptor;
    uint64_t uuid = 0;
    while (reader.next(field)) {
      switch (field.number) {
        case fields::track::kUuid:
          expect_wire_type(reader, field, wire::kWireVarint);
          uuid = field.value;
          break;
        case fields::track::kParentUuid:
          expect_wire_type(reader, field, wire::kWireVarint);
          descriptor.parent = field.value;
          descriptor.has_parent = true;
          break;
        case fields::track::kName:
        case fields::track::kStaticName:
          expect_wire_type(reader, field, wire::kWireLengthDelimited);
          descriptor.name = field.bytes;
          break;
        case fields::track::kProcess:
          expect_wire_type(reader, field, wire::kWireLengthDelimited);
          descriptor.has_process = true;
          scan_process(field.bytes, descriptor);
          break;
        case fields::track::kThread:
          expect_wire_type(reader, field, wire::kWireLengthDelimited);
          descriptor.has_thread = true;
          scan_thread(field.bytes, descriptor);
          break;
        case fields::track::kCounter:
          expect_wire_type(reader, field, wire::kWireLengthDelimited);
          descriptor.has_counter = true;
          scan_counter(field.bytes, descriptor);
          break;
        default:
          break;
      }
    }
    descriptors_[uuid] = std::move(descriptor);
  }

  void scan_process(std::string_view bytes, Descriptor& descriptor) {
    ProtoReader reader(bytes, begin_, "ProcessDescriptor");
    ProtoField field;
    while (reader.next(field)) {
      switch (field.number) {
        case fields::process::kPid:
          expect_wire_type(reader, field, wire::kWireVarint);
          descriptor.pid = static_cast<int32_t>(field.value);
          break;
        case fields::process::kCmdline:
          expect_wire_type(reader, field, wire::kWireLengthDelimited);
          descriptor.cmdline.push_back(field.bytes);
          break;
        case fields::process::kLegacySortIndex:
          expect_wire_type(reader, field, wire::kWireVarint);
          descriptor.process_sort_index = static_cast<int32_t>(field.value);
          break;
        case fields::process::kProcessName:
          expect_wire_type(reader, field, wire::kWireLengthDelimited);
          descriptor.process_name = field.bytes;
          break;
        case fields::process::kProcessLabels:
          expect_wire_type(reader, field, wire::kWireLengthDelimited);
          descriptor.labels.push_back(field.bytes);
          break;
        default:
          break;
      }
    }
  }

  void scan_thread(std::string_view bytes, Descriptor& descriptor) {
    ProtoReader reader(bytes, begin_, "ThreadDescriptor");
    ProtoField field;
    while (reader.next(field)) {
      switch (field.number) {
        case fields::thread::kPid:
          expect_wire_type(reader, field, wire::kWireVarint);
          descriptor.pid = static_cast<int32_t>(field.value);
          descriptor.thread_has_pid = true;
          break;
        case fields::thread::kTid:
          expect_wire_type(reader, field, wire::kWireVarint);
          descriptor.tid = field.as_int64();
          break;
        case fields::thread::kLegacySortIndex:
          expect_wire_type(reader, field, wire::kWireVarint);
          descriptor.thread_sort_index = static_cast<int32_t>(field.value);
          break;
        case fields::thread::kThreadName:
          expect_wire_type(reader, field, wire::kWireLengthDelimited);
          descriptor.thread_name = field.bytes;
          break;
        default:
          break;
      }
    }
  }

  void scan_counter(std::string_view bytes, Descriptor& descriptor) {
    ProtoReader reader(bytes, begin_, "CounterDescriptor");
    ProtoField field;
    while (reader.next(field)) {
      switch (field.number) {
        case fields::counter::kType:
          expect_wire_type(reader, field, wire::kWireVarint);
          descriptor.counter_type = field.value;
          break;
        case fields::counter::kUnit:
          expect_wire_type(reader, field, wire::kWireVarint);
          descriptor.unit = field.value;
          break;
        case fields::counter::kUnitName:
          expect_wire_type(reader, field, wire::kWireLengthDelimited);
          descriptor.unit_name = field.bytes;
          break;
        case fields::counter::kUnitMultiplier:
          expect_wire_type(reader, field, wire::kWireVarint);
          descriptor.unit_multiplier = field.as_int64() == 0 ? 1 : field.as_int64();
          break;
        case fields::counter::kIsIncremental:
          expect_wire_type(reader, field, wire::kWireVarint);
          descriptor.counter_incremental = field.as_bool();
          break;
        default:
          break;
      }
    }
  }

  // A snapshot's clocks as (clock id, ns); sequence-scoped clocks are left to pass 2.
  using Snapshot = std::vector<std::pair<uint64_t, int64_t>>;

  void scan_clock_snapshot(std::string_view bytes) {
    ProtoReader reader(bytes, begin_, "ClockSnapshot");
    ProtoField field;
    Snapshot snapshot;
    while (reader.next(field)) {
      if (field.number == fields::clock_snapshot::kPrimaryTraceClock) {
        expect_wire_type(reader, field, wire::kWireVarint);
        if (field.value != 0 && primary_clock_ == 0) primary_clock_ = field.value;
      } else if (field.number == fields::clock_snapshot::kClocks) {
        expect_wire_type(reader, field, wire::kWireLengthDelimited);
        ClockValue clock = read_clock(field.bytes);
        if (clock.id >= fields::kFirstSequenceScopedClock &&
            clock.id <= fields::kLastSequenceScopedClock)
          continue;
        snapshot.emplace_back(clock.id,
                              multiply_saturating(clamp_to_int64(clock.value), clock.multiplier));
      }
    }
    if (!snapshot.empty()) snapshots_.push_back(std::move(snapshot));
  }

  struct ClockValue {
    uint64_t id = 0;
    uint64_t value = 0;
    bool incremental = false;
    int64_t multiplier = 1;
  };
  ClockValue read_clock(std::string_view bytes) {
    ProtoReader reader(bytes, begin_, "ClockSnapshot.Clock");
    ProtoField field;
    ClockValue clock;
    while (reader.next(field)) {
      switch (field.number) {
        case fields::clock_snapshot::kClockId:
          expect_wire_type(reader, field, wire::kWireVarint);
          clock.id = field.value;
          break;
        case fields::clock_snapshot::kTimestamp:
          expect_wire_type(reader, field, wire::kWireVarint);
          clock.value = field.value;
          break;
        case fields::clock_snapshot::kIsIncremental:
          expect_wire_type(reader, field, wire::kWireVarint);
          clock.incremental = field.as_bool();
          break;
        case fields::clock_snapshot::kUnitMultiplierNs:
          expect_wire_type(reader, field, wire::kWireVarint);
          if (field.value != 0) clock.multiplier = clamp_to_int64(field.value);
          break;
        default:
          break;
      }
    }
    return clock;
  }

  // The trace clock, the conversions to it and the Unix offset, from the snapshots.
  void choose_trace_clock() {
    trace_clock_ = primary_clock_ != 0 ? primary_clock_ : fields::kBuiltinClockBoottime;
    for (const Snapshot& snapshot : snapshots_) {
      auto trace_entry = std::find_if(snapshot.begin(), snapshot.end(), [&](const auto& clock) {
        return clock.first == trace_clock_;
      });
      if (trace_entry == snapshot.end()) continue;
      for (const auto& [clock, ns] : snapshot) {
        if (clock == trace_clock_) continue;
        conversions_[clock].emplace_back(ns, trace_entry->second);
        if (clock == fields::kBuiltinClockRealtime && !trace().run.has_unix_offset) {
          trace().run.has_unix_offset = true;
          trace().run.unix_offset_ns = difference_saturating(ns, trace_entry->second);
          trace().run.start_unix_ns = ns;
        }
      }
    }
    if (trace_clock_ == fields::kBuiltinClockRealtime) {
      trace().run.has_unix_offset = true;
      trace().run.unix_offset_ns = 0;
    }
    for (auto& [clock, pairs] : conversions_) std::stable_sort(pairs.begin(), pairs.end());
    const char* name = clock_name(trace_clock_);
    trace().run.clock = name ? name : "clock " + std::to_string(trace_clock_);
  }

  // `value` of global clock `clock` on the trace clock: through the snapshot at or before
  // it (the first one when it is earlier than all), or as it is without one.
  int64_t to_trace_clock(uint64_t clock, int64_t value) {
    if (clock == trace_clock_) return value;
    auto found = conversions_.find(clock);
    if (found == conversions_.end()) {
      ++unconverted_timestamps_;
      return value;
    }
    const auto& pairs = found->second;
    auto after = std::upper_bound(pairs.begin(), pairs.end(), value,
                                  [](int64_t v, const auto& pair) { return v < pair.first; });
    const auto& pair = after == pairs.begin() ? pairs.front() : *(after - 1);
    return add_saturating(difference_saturating(value, pair.first), pair.second);
  }

  // ---- pass 2: packets in order ---------------------------------------------------------
  void read_packets() {
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

  Sequence& sequence(uint64_t id) {
    if (id == last_sequence_id_ && last_sequence_ != nullptr) return *last_sequence_;
    last_sequence_id_ = id;
    last_sequence_ = &sequences_[id];
    return *last_sequence_;
  }

  void read_packet(std::string_view bytes) {
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

  void read_defaults(std::string_view bytes, Sequence& seq) {
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
            inner.for_each_repeated(value, wire::kWireVarint, [&](uint64_t uuid) {
              seq.extra_counter_uuids.push_back(uuid);
            });
          } else if (value.number == fields::event_defaults::kExtraDoubleCounterTrackUuids) {
            inner.for_each_repeated(value, wire::kWireVarint, [&](uint64_t uuid) {
              seq.extra_double_counter_uuids.push_back(uuid);
            });
          }
        }
      }
    }
  }

  void read_interned_data(std::string_view bytes, Sequence& seq) {
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

  // The sequence-scoped clocks of a snapshot (the SDK's incremental clock): each keeps its
  // value and the trace clock's time at that value.
  void read_sequence_clocks(std::string_view bytes, Sequence& seq) {
    ProtoReader reader(bytes, begin_, "ClockSnapshot");
    ProtoField field;
    std::vector<ClockValue> clocks;
    while (reader.next(field))
      if (field.number == fields::clock_snapshot::kClocks)
        clocks.push_back(read_clock(field.bytes));
    // The reference: the trace clock if the snapshot has it, else its first global clock.
    const ClockValue* reference = nullptr;
    for (const ClockValue& clock : clocks) {
      bool scoped = clock.id >= fields::kFirstSequenceScopedClock &&
                    clock.id <= fields::kLastSequenceScopedClock;
      if (scoped) continue;
      if (reference == nullptr || clock.id == trace_clock_) reference = &clock;
    }
    for (const ClockValue& clock : clocks) {
      if (clock.id < fields::kFirstSequenceScopedClock ||
          clock.id > fields::kLastSequenceScopedClock)
        continue;
      SequenceClock* target = nullptr;
      for (SequenceClock& known : seq.clocks)
        if (known.id == clock.id) target = &known;
      if (target == nullptr) target = &seq.clocks.emplace_back();
      target->id = clock.id;
      target->incremental = clock.incremental;
      target->multiplier = clock.multiplier;
      target->last = clock.value;
      target->snapshot_value = clock.value;
      target->trace_ns =
          reference == nullptr
              ? 0
              : to_trace_clock(reference->id, multiply_saturating(clamp_to_int64(reference->value),
                                                                  reference->multiplier));
    }
  }

  int64_t packet_time(uint64_t raw, uint64_t clock, Sequence& seq) {
    if (clock < fields::kFirstSequenceScopedClock || clock > fields::kLastSequenceScopedClock)
      return to_trace_clock(clock, clamp_to_int64(raw));
    for (SequenceClock& known : seq.clocks) {
      if (known.id != clock) continue;
      uint64_t value = known.incremental ? known.last + raw : raw;
      known.last = value;
      auto units = static_cast<int64_t>(value - known.snapshot_value);
      return add_saturating(multiply_saturating(units, known.multiplier), known.trace_ns);
    }
    ++unconverted_timestamps_;
    return clamp_to_int64(raw);
  }

  void read_legacy_process(std::string_view bytes) {
    Descriptor descriptor;
    scan_process(bytes, descriptor);
    apply_process(descriptor);
  }

  void read_legacy_thread(std::string_view bytes, Sequence& seq) {
    ProtoReader reader(bytes, begin_, "ThreadDescriptor");
    ProtoField field;
    Descriptor descriptor;
    int64_t reference_us = 0;
    bool has_reference = false;
    while (reader.next(field)) {
      if (field.number == fields::thread::kReferenceTimestampUs) {
        expect_wire_type(reader, field, wire::kWireVarint);
        reference_us = field.as_int64();
        has_reference = true;
      }
    }
    scan_thread(bytes, descriptor);
    uint32_t state = legacy_thread_state(descriptor.pid, descriptor.tid);
    seq.legacy_thread = state;
    if (has_reference) seq.legacy_ns = multiply_saturating(reference_us, 1000);
    TrackId track = states_[state].slices;
    if (!descriptor.thread_name.empty())
      trace().tracks[track].name = trace().intern(descriptor.thread_name);
  }

  // ---- tracks -------------------------------------------------------------------------
  uint32_t state_of_uuid(uint64_t uuid) {
    if (uuid == last_uuid_ && last_state_ != kNone) return last_state_;
    auto [found, inserted] =
        state_by_uuid_.try_emplace(uuid, static_cast<uint32_t>(states_.size()));
    if (inserted) {
      states_.push_back(resolve(uuid));
    }
    last_uuid_ = uuid;
    last_state_ = found->second;
    return last_state_;
  }

  const Descriptor* descriptor_of(uint64_t uuid) const {
    auto found = descriptors_.find(uuid);
    return found == descriptors_.end() ? nullptr : &found->second;
  }

  // What a uuid's descriptor (and the chain of its parents) makes it.
  TrackState resolve(uint64_t uuid) {
    TrackState state;
    state.uuid = uuid;
    const Descriptor* descriptor = descriptor_of(uuid);
    if (descriptor == nullptr) return state;
    state.kind = descriptor->has_counter   ? TrackState::Kind::kCounter
                 : descriptor->has_thread  ? TrackState::Kind::kThread
                 : descriptor->has_process ? TrackState::Kind::kProcess
                                           : TrackState::Kind::kNamed;
    // The nearest process or thread at or above it gives the pid (a thread without a pid
    // takes its process's).
    const Descriptor* at = descriptor;
    bool found_thread = false;
    for (int hop = 0; at != nullptr && hop < kMaxParentHops; ++hop) {
      if (at->has_thread && !found_thread) {
        found_thread = true;
        state.tid = at->tid;
        if (at->thread_has_pid) {
          state.pid = at->pid;
          state.in_process = true;
          break;
        }
      } else if (at->has_process) {
        state.pid = at->pid;
        state.in_process = true;
        break;
      }
      if (!at->has_parent) break;
      at = descriptor_of(at->parent);
    }
    if (found_thread) state.in_process = true;
    return state;
  }

  // A thread named by a legacy ThreadDescriptor or a legacy event's pid/tid override.
  uint32_t legacy_thread_state(int64_t pid, int64_t tid) {
    auto [found, inserted] =
        legacy_threads_.try_emplace({pid, tid}, static_cast<uint32_t>(states_.size()));
    if (inserted) {
      TrackState state;
      state.kind = TrackState::Kind::kThread;
      state.pid = pid;
      state.tid = tid;
      state.in_process = true;
      state.materialized = true;
      state.slices = state.instants = trace().thread_track(pid, tid);
      states_.push_back(state);
    }
    return found->second;
  }

  void apply_process(const Descriptor& descriptor) {
    trace::Process& process = trace().process(descriptor.pid);
    if (!descriptor.process_name.empty()) process.name = trace().intern(descriptor.process_name);
    if (descriptor.process_sort_index != 0) process.sort_index = descriptor.process_sort_index;
    if (!descriptor.labels.empty()) {
      process.labels.clear();
      for (std::string_view label : descriptor.labels)
        process.labels.push_back(trace().intern(label));
    }
    if (!descriptor.cmdline.empty() && trace().run.command_line.empty()) {
      std::string command;
      for (std::string_view part : descriptor.cmdline) {
        if (!command.empty()) command += ' ';
        command += part;
      }
      trace().run.command_line = std::move(command);
      trace().run.pid = descriptor.pid;
    }
  }

  // Makes the model's process, thread track or counter track of a state (once), its
  // parents' first.
  void materialize(uint32_t index, int depth = 0) {
    if (states_[index].materialized) return;
    states_[index].materialized = true;
    const uint64_t uuid = states_[index].uuid;
    const Descriptor* descriptor = descriptor_of(uuid);
    if (descriptor == nullptr) return;
    if (descriptor->has_parent && descriptor->parent != 0 && depth < kMaxParentHops &&
        descriptors_.contains(descriptor->parent))
      materialize(state_of_uuid(descriptor->parent), depth + 1);
    TrackState& state = states_[index];
    switch (state.kind) {
      case TrackState::Kind::kProcess:
        apply_process(*descriptor);
        break;
      case TrackState::Kind::kThread: {
        TrackId track = trace().thread_track(state.pid, state.tid);
        if (!descriptor->thread_name.empty())
          trace().tracks[track].name = trace().intern(descriptor->thread_name);
        if (descriptor->thread_sort_index != 0)
          trace().tracks[track].sort_index = descriptor->thread_sort_index;
        state.slices = state.instants = track;
        break;
      }
      case TrackState::Kind::kCounter: {
        std::string_view unit = descriptor->unit_name;
        if (descriptor->unit == fields::counter::kUnitTimeNs) unit = "ns";
        if (descriptor->unit == fields::counter::kUnitCount) unit = "count";
        if (descriptor->unit == fields::counter::kUnitSizeBytes) unit = "bytes";
        std::string name(descriptor->name);
        if (name.empty())
          name = descriptor->counter_type == fields::counter::kTypeThreadTimeNs ? "thread time"
                 : descriptor->counter_type == fields::counter::kTypeThreadInstructionCount
                     ? "thread instruction count"
                     : "counter " + std::to_string(uuid);
        state.counter = trace().counter_track(state.pid, name, unit);
        state.counter_multiplier = descriptor->unit_multiplier;
        state.counter_incremental = descriptor->counter_incremental;
        break;
      }
      default:
        break;
    }
  }

  // The model track a state's slices go to (made on first use).
  TrackId slice_track(uint32_t index) {
    TrackState& state = states_[index];
    if (state.slices != kNone) return state.slices;
    const Descriptor* descriptor = descriptor_of(state.uuid);
    std::string_view name = descriptor ? descriptor->name : std::string_view();
    TrackId track;
    std::optional<uint32_t> gpu;
    if (descriptor != nullptr && descriptor->has_parent)
      if (const Descriptor* parent = descriptor_of(descriptor->parent);
          parent != nullptr && !parent->has_process && !parent->has_thread)
        gpu = parse_gpu_group(parent->name);
    uint32_t stream = 0;
    std::string prefix = gpu ? "GPU " + std::to_string(*gpu) + " stream " : std::string();
    if (gpu && name.starts_with(prefix)) {
      std::string_view digits = name.substr(prefix.size());
      auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), stream);
      if (error != std::errc() || end != digits.data() + digits.size() || digits.empty())
        gpu.reset();
    } else {
      gpu.reset();
    }
    if (gpu) {
      track =
          trace().process_async_track(state.pid, trace::gpu_stream_track_key(*gpu, stream), name);
      trace().tracks[track].sort_index =
          trace::kGpuTrackSortBase + int64_t{*gpu} * 100'000 + std::min<int64_t>(stream, 99'999);
    } else {
      track = trace().process_async_track(state.pid, state.uuid, name);
    }
    states_[index].slices = track;
    return track;
  }

  // The thread track a state's instants go to, and their scope.
  TrackId instant_track(uint32_t index) {
    TrackState& state = states_[index];
    if (state.instants != kNone) return state.instants;
    const bool global = !state.in_process;
    state.scope = global ? trace::InstantScope::kGlobal : trace::InstantScope::kProcess;
    TrackId chosen = kNone;
    for (TrackId track = 0; track < trace().tracks.size() && chosen == kNone; ++track) {
      const trace::Track& candidate = trace().tracks[track];
      if (candidate.kind == trace::TrackKind::kThread && (global || candidate.pid == state.pid))
        chosen = track;
    }
    if (chosen == kNone)
      chosen = trace().thread_track(global ? 0 : state.pid, global ? 0 : state.pid);
    states_[index].instants = chosen;
    return chosen;
  }

  // ---- events -------------------------------------------------------------------------
  struct EventFields {
    uint64_t type = 0;
    bool has_type = false;
    uint64_t track_uuid = 0;
    bool has_track = false;
    uint64_t name_iid = 0;
    bool has_name_iid = false;
    std::string_view name;
    bool has_name = false;
    std::string_view legacy;
    bool has_legacy = false;
    int64_t delta_us = 0, absolute_us = 0;
    bool has_delta = false, has_absolute = false;
    double counter_value = 0;
    bool has_counter_value = false;
  };

  void read_track_event(std::string_view bytes, uint64_t raw_ts, uint64_t clock, Sequence& seq) {
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
    add_extra_counters(extra_values_, extra_uuids_, seq.extra_counter_uuids, ts);
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

  static constexpr uint64_t kTypeComplete = 1000;  // a legacy 'X' event: not a TrackEvent type
  static constexpr int64_t kOpen = -1;             // the duration of a slice not yet ended

  StringId category_of(Sequence& seq) {
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

  // Keeps the track's time order: a time earlier than the last one there makes the track
  // "unordered" (its begins and ends are sorted by time before pairing).
  void note_time(TrackId track, int64_t ts, bool ordered_only = false) {
    if (track >= track_last_ts_.size()) {
      size_t size = std::max<size_t>(trace().tracks.size(), track + 1);
      track_last_ts_.resize(size, kInt64Min);
      track_max_ts_.resize(size, kInt64Min);
      track_unordered_.resize(size, false);
    }
    if (!ordered_only) {
      if (ts < track_last_ts_[track]) track_unordered_[track] = true;
      track_last_ts_[track] = ts;
    }
    track_max_ts_[track] = std::max(track_max_ts_[track], ts);
  }

  void note_flows(uint32_t target, int64_t ts, bool on_end) {
    for (uint64_t id : flow_ids_)
      flow_mentions_.push_back(FlowMention{ts, id, target, false, on_end});
    for (uint64_t id : terminating_flow_ids_)
      flow_mentions_.push_back(FlowMention{ts, id, target, true, on_end});
  }

  void add_counter_sample(uint32_t state_index, int64_t ts, double value) {
    TrackState& state = states_[state_index];
    value *= static_cast<double>(state.counter_multiplier);
    if (state.counter_incremental) {
      state.counter_last += value;
      value = state.counter_last;
    }
    trace().counters.add(ts, state.counter, value);
  }

  void add_extra_counters(const std::vector<double>& values, const std::vector<uint64_t>& uuids,
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

  // ---- debug annotations --------------------------------------------------------------
  void decode_annotations(Sequence& seq) {
    decoded_args_.clear();
    for (std::string_view bytes : annotations_) {
      ProtoReader reader(bytes, begin_, "DebugAnnotation");
      ProtoField field;
      StringId key = 0;
      ArgValue value = ArgValue::of_string(0);
      bool rendered = false;  // the value is the whole annotation as JSON text
      while (!rendered && reader.next(field)) {
        switch (field.number) {
          case fields::annotation::kNameIid:
            expect_wire_type(reader, field, wire::kWireVarint);
            key = lookup(seq.annotation_names, field.value);
            break;
          case fields::annotation::kName:
            expect_wire_type(reader, field, wire::kWireLengthDelimited);
            key = trace().intern(field.bytes);
            break;
          case fields::annotation::kBoolValue:
            expect_wire_type(reader, field, wire::kWireVarint);
            value = ArgValue::of_bool(field.as_bool());
            break;
          case fields::annotation::kUintValue:
            expect_wire_type(reader, field, wire::kWireVarint);
            value = field.value <= static_cast<uint64_t>(kInt64Max)
                        ? ArgValue::of_int(static_cast<int64_t>(field.value))
                        : ArgValue::of_string(trace().intern(std::to_string(field.value)));
            break;
          case fields::annotation::kIntValue:
            expect_wire_type(reader, field, wire::kWireVarint);
            value = ArgValue::of_int(field.as_int64());
            break;
          case fields::annotation::kDoubleValue:
            expect_wire_type(reader, field, wire::kWireFixed64);
            value = ArgValue::of_double(field.as_double());
            break;
          case fields::annotation::kStringValue:
          case fields::annotation::kLegacyJsonValue:
            expect_wire_type(reader, field, wire::kWireLengthDelimited);
            value = ArgValue::of_string(trace().intern(field.bytes));
            break;
          case fields::annotation::kStringValueIid:
            expect_wire_type(reader, field, wire::kWireVarint);
            value = ArgValue::of_string(lookup(seq.annotation_strings, field.value));
            break;
          case fields::annotation::kPointerValue: {
            expect_wire_type(reader, field, wire::kWireVarint);
            char text[24];
            std::snprintf(text, sizeof text, "0x%llx",
                          static_cast<unsigned long long>(field.value));
            value = ArgValue::of_string(trace().intern(text));
            break;
          }
          case fields::annotation::kNestedValue:
          case fields::annotation::kDictEntries:
          case fields::annotation::kArrayValues:
          case fields::annotation::kProtoValue: {
            // The whole annotation as JSON text (its value only).
            std::string json;
            append_annotation_json(json, bytes, seq, 0);
            value = ArgValue::of_string(trace().intern(json));
            rendered = true;
            break;
          }
          default:
            break;
        }
      }
      if (rendered && key == 0) key = trace().intern(annotation_name(bytes, seq));
      decoded_args_.emplace_back(key, value);
    }
  }

  StringId lookup(const InternTable& table, uint64_t iid) {
    StringId id = table.find(iid);
    if (id != kNone) return id;
    ++unknown_interned_ids_;
    return 0;
  }

  static void append_double_json(std::string& out, double value) {
    if (!std::isfinite(value)) {
      out += std::isnan(value) ? "\"NaN\"" : value > 0 ? "\"Infinity\"" : "\"-Infinity\"";
      return;
    }
    char text[32];
    auto [end, error] = std::to_chars(text, text + sizeof text, value);
    out.append(text, error == std::errc() ? end : text);
  }
  static void append_string_json(std::string& out, std::string_view text) {
    out += '"';
    wire::append_json_escaped(out, text);
    out += '"';
  }

  // A DebugAnnotation's value as JSON (dict_entries an object, array_values an array).
  void append_annotation_json(std::string& out, std::string_view bytes, Sequence& seq, int depth) {
    if (depth > kMaxNesting) {
      out += "\"...\"";
      return;
    }
    ProtoReader reader(bytes, begin_, "DebugAnnotation");
    ProtoField field;
    enum class Shape { kEmpty, kScalar, kDict, kArray } shape = Shape::kEmpty;
    std::string scalar, items;
    std::string_view proto_type;
    while (reader.next(field)) {
      switch (field.number) {
        case fields::annotation::kBoolValue:
          expect_wire_type(reader, field, wire::kWireVarint);
          scalar = field.as_bool() ? "true" : "false";
          shape = Shape::kScalar;
          break;
        case fields::annotation::kUintValue:
          expect_wire_type(reader, field, wire::kWireVarint);
          scalar = std::to_string(field.value);
          shape = Shape::kScalar;
          break;
        case fields::annotation::kIntValue:
          expect_wire_type(reader, field, wire::kWireVarint);
          scalar = std::to_string(field.as_int64());
          shape = Shape::kScalar;
          break;
        case fields::annotation::kDoubleValue:
          expect_wire_type(reader, field, wire::kWireFixed64);
          scalar.clear();
          append_double_json(scalar, field.as_double());
          shape = Shape::kScalar;
          break;
        case fields::annotation::kStringValue:
        case fields::annotation::kLegacyJsonValue:
          expect_wire_type(reader, field, wire::kWireLengthDelimited);
          scalar.clear();
          append_string_json(scalar, field.bytes);
          shape = Shape::kScalar;
          break;
        case fields::annotation::kStringValueIid:
          expect_wire_type(reader, field, wire::kWireVarint);
          scalar.clear();
          append_string_json(scalar, trace().str(lookup(seq.annotation_strings, field.value)));
          shape = Shape::kScalar;
          break;
        case fields::annotation::kPointerValue: {
          expect_wire_type(reader, field, wire::kWireVarint);
          char text[24];
          std::snprintf(text, sizeof text, "\"0x%llx\"",
                        static_cast<unsigned long long>(field.value));
          scalar = text;
          shape = Shape::kScalar;
          break;
        }
        case fields::annotation::kNestedValue:
          expect_wire_type(reader, field, wire::kWireLengthDelimited);
          scalar.clear();
          append_nested_json(scalar, field.bytes, depth + 1);
          shape = Shape::kScalar;
          break;
        case fields::annotation::kProtoTypeName:
          expect_wire_type(reader, field, wire::kWireLengthDelimited);
          proto_type = field.bytes;
          break;
        case fields::annotation::kProtoValue:
          expect_wire_type(reader, field, wire::kWireLengthDelimited);
          scalar = "\"(proto message, " + std::to_string(field.bytes.size()) + " bytes)\"";
          shape = Shape::kScalar;
          break;
        case fields::annotation::kDictEntries: {
          expect_wire_type(reader, field, wire::kWireLengthDelimited);
          if (shape != Shape::kDict) items.clear();
          shape = Shape::kDict;
          if (!items.empty()) items += ',';
          append_string_json(items, annotation_name(field.bytes, seq));
          items += ':';
          append_annotation_json(items, field.bytes, seq, depth + 1);
          break;
        }
        case fields::annotation::kArrayValues:
          expect_wire_type(reader, field, wire::kWireLengthDelimited);
          if (shape != Shape::kArray) items.clear();
          shape = Shape::kArray;
          if (!items.empty()) items += ',';
          append_annotation_json(items, field.bytes, seq, depth + 1);
          break;
        default:
          break;
      }
    }
    if (!proto_type.empty() && shape == Shape::kScalar && scalar.starts_with("\"(proto")) {
      scalar = "\"(proto " + std::string(proto_type) + scalar.substr(7);
    }
    switch (shape) {
      case Shape::kEmpty:
        out += "null";
        break;
      case Shape::kScalar:
        out += scalar;
        break;
      case Shape::kDict:
        out += '{' + items + '}';
        break;
      case Shape::kArray:
        out += '[' + items + ']';
        break;
    }
  }

  std::string_view annotation_name(std::string_view bytes, Sequence& seq) {
    ProtoReader reader(bytes, begin_, "DebugAnnotation");
    ProtoField field;
    while (reader.next(field)) {
      if (field.number == fields::annotation::kName &&
          field.wire_type == wire::kWireLengthDelimited)
        return field.bytes;
      if (field.number == fields::annotation::kNameIid && field.wire_type == wire::kWireVarint)
        return trace().str(lookup(seq.annotation_names, field.value));
    }
    return {};
  }

  void append_nested_json(std::string& out, std::string_view bytes, int depth) {
    if (depth > kMaxNesting) {
      out += "\"...\"";
      return;
    }
    ProtoReader reader(bytes, begin_, "DebugAnnotation.NestedValue");
    ProtoField field;
    uint64_t nested_type = 0;
    std::vector<std::string_view> keys, values;
    std::string scalar = "null";
    while (reader.next(field)) {
      switch (field.number) {
        case fields::nested::kNestedType:
          expect_wire_type(reader, field, wire::kWireVarint);
          nested_type = field.value;
          break;
        case fields::nested::kDictKeys:
          expect_wire_type(reader, field, wire::kWireLengthDelimited);
          keys.push_back(field.bytes);
          break;
        case fields::nested::kDictValues:
        case fields::nested::kArrayValues:
          expect_wire_type(reader, field, wire::kWireLengthDelimited);
          values.push_back(field.bytes);
          break;
        case fields::nested::kIntValue:
          expect_wire_type(reader, field, wire::kWireVarint);
          scalar = std::to_string(field.as_int64());
          break;
        case fields::nested::kDoubleValue:
          expect_wire_type(reader, field, wire::kWireFixed64);
          scalar.clear();
          append_double_json(scalar, field.as_double());
          break;
        case fields::nested::kBoolValue:
          expect_wire_type(reader, field, wire::kWireVarint);
          scalar = field.as_bool() ? "true" : "false";
          break;
        case fields::nested::kStringValue:
          expect_wire_type(reader, field, wire::kWireLengthDelimited);
          scalar.clear();
          append_string_json(scalar, field.bytes);
          break;
        default:
          break;
      }
    }
    if (nested_type == fields::nested::kTypeDict) {
      out += '{';
      for (size_t i = 0; i < values.size(); ++i) {
        if (i > 0) out += ',';
        append_string_json(out, i < keys.size() ? keys[i] : std::string_view());
        out += ':';
        append_nested_json(out, values[i], depth + 1);
      }
      out += '}';
    } else if (nested_type == fields::nested::kTypeArray) {
      out += '[';
      for (size_t i = 0; i < values.size(); ++i) {
        if (i > 0) out += ',';
        append_nested_json(out, values[i], depth + 1);
      }
      out += ']';
    } else {
      out += scalar;
    }
  }

  // ---- the end of the read ------------------------------------------------------------
  void finish() {
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

  // Every SLICE_BEGIN is paired with an END of its track: begins and ends in file order
  // (an END recorded after k slices came before the k-th begin), sorted by time where the
  // track's times went backwards (stable), an END closing the innermost open slice.
  void pair_slices() {
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
  void resolve_flows() {
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
  void order_counters() {
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

  std::string_view file_;
  const char* begin_;
  ReadResult result_;
  std::optional<Diagnostic> problem_;
  uint64_t stop_offset_ = std::numeric_limits<uint64_t>::max();
  uint64_t packets_read_ = 0;
  uint64_t packets_seen_ = 0;
  uint64_t track_event_packets_ = 0;

  std::unordered_map<uint64_t, Descriptor> descriptors_;
  std::vector<Snapshot> snapshots_;
  uint64_t primary_clock_ = 0;
  uint64_t trace_clock_ = 0;
  std::unordered_map<uint64_t, std::vector<std::pair<int64_t, int64_t>>> conversions_;

  std::unordered_map<uint64_t, Sequence> sequences_;
  uint64_t last_sequence_id_ = 0;
  Sequence* last_sequence_ = nullptr;

  std::vector<TrackState> states_;
  std::unordered_map<uint64_t, uint32_t> state_by_uuid_;
  std::map<std::pair<int64_t, int64_t>, uint32_t> legacy_threads_;
  uint64_t last_uuid_ = 0;
  uint32_t last_state_ = kNone;

  // Per model track: the last and the latest time seen, and whether times went backwards.
  std::vector<int64_t> track_last_ts_, track_max_ts_;
  std::vector<bool> track_unordered_;

  std::vector<EndRecord> ends_;
  std::vector<EndArg> end_args_;
  std::vector<RowIndex> end_rows_;
  std::vector<FlowMention> flow_mentions_;

  // Scratch of the event being read (kept to reuse their memory).
  std::vector<uint64_t> category_iids_;
  std::vector<std::string_view> category_names_;
  std::vector<std::string_view> annotations_;
  std::vector<uint64_t> flow_ids_, terminating_flow_ids_;
  std::vector<double> extra_values_, extra_double_values_;
  std::vector<uint64_t> extra_uuids_, extra_double_uuids_;
  std::vector<std::pair<StringId, ArgValue>> decoded_args_;

  uint64_t unfinished_slices_ = 0, unmatched_ends_ = 0, unmatched_flow_ids_ = 0;
  uint64_t flows_on_instants_dropped_ = 0, unknown_interned_ids_ = 0;
  uint64_t packets_without_incremental_state_ = 0, events_without_track_ = 0;
  uint64_t counter_events_skipped_ = 0, events_on_counter_tracks_ = 0;
  uint64_t skipped_event_types_ = 0, skipped_legacy_events_ = 0, unconverted_timestamps_ = 0;
};

}  // namespace

ReadResult read_perfetto(std::string_view bytes) { return PerfettoReader(bytes).read(); }

}  // namespace opsight::io
