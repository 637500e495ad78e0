// Writer of Perfetto's protobuf trace format (a `.pftrace`: `Trace { repeated TracePacket
// packet = 1; }`), which Perfetto UI and trace processor open natively, with typed tracks:
//
//   - one TrackDescriptor per process (ProcessDescriptor: pid, name, labels, the command
//     line for the recording process), per thread track (ThreadDescriptor: pid, tid, name),
//     per lane of a thread and per process-wide async track (a named track), all children
//     of their process's track but a GPU stream's (docs/gpu.md), which is a child of a
//     "GPU <device>" track of its process, and one per counter series (CounterDescriptor with its
//     unit; named "<group> <series>"), child of its process's track too;
//   - slices as TrackEvent SLICE_BEGIN / SLICE_END pairs on their track, instants as
//     INSTANT (on the thread's track; on the process's track for a process-scoped one, on a
//     "global instants" track for a global one), counter samples as COUNTER with
//     double_counter_value; arguments as debug annotations (int, double, bool, string);
//   - event names, categories, argument names and string values interned (InternedData,
//     sent with the first event that uses them), on one packet sequence that starts with
//     SEQ_INCREMENTAL_STATE_CLEARED, every event packet marked
//     SEQ_NEEDS_INCREMENTAL_STATE;
//   - flows as flow_ids on the begin of the slice a flow leaves and terminating_flow_ids on
//     the begin of the slice it reaches; each row of the flow table gets its own id (row +
//     1), so a chain of hand-offs with one source id stays one arrow per step. Flow names
//     and categories have no place in TrackEvent and are not written;
//   - order: ranks in the order of the model (process sort_index, then pid; within a
//     process, tracks by sort_index, then tid, then creation; counters after them) as
//     sibling_order_rank, with the root descriptor (uuid 0) asking for explicit process and
//     thread ordering and each process track for explicit child ordering; a non-zero
//     sort_index also goes to the descriptors' legacy_sort_index.
//
// Clock: timestamps are written as they are in the model, in ns, declared
// BUILTIN_CLOCK_MONOTONIC (TracePacketDefaults.timestamp_clock_id) and made the trace's
// primary clock by a ClockSnapshot, which also maps them to BUILTIN_CLOCK_REALTIME when the
// trace knows its Unix offset (so viewers can show wall time). For opsight's own traces that
// is exactly their clock. A foreign trace (Chrome JSON, a PyTorch profile) keeps its own
// time base under the same label: the times and durations a viewer shows are right, only
// the claim that the zero is the machine's monotonic zero is not. The wire format has no
// negative timestamps: a trace whose earliest time is negative is shifted by that much.
//
// Not written: span ids, the unfinished flag, per-thread overhead and the run info beyond
// the command line (the native format keeps them; Chrome JSON keeps most).
//
// Speed: the output is a buffer handed to the sink whenever it passes 1 MiB between
// packets (writing holds that buffer, not the whole output); nested messages are written
// in place (see ProtoEncoder); slices are walked track by track with a stack of open
// slices from the model's parent column, so SLICE_END events come in the order Perfetto
// nests them even when timestamps tie.
//
// Thread-safety: write_perfetto only reads the trace.
#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "io/io.hpp"
#include "io/perfetto/perfetto_fields.hpp"
#include "io/perfetto/perfetto_sequence.hpp"
#include "trace/gpu_tracks.hpp"
#include "trace/trace.hpp"
#include "wire/proto_encoder.hpp"

namespace opsight::io {
namespace {

namespace fields = perfetto::fields;
using trace::ArgTable;
using trace::ArgType;
using trace::RowIndex;
using trace::StringId;
using trace::TrackId;

using perfetto::kSequenceId;

// Which interned strings of one kind the sequence has already been sent.
class InternedSet {
 public:
  explicit InternedSet(size_t strings) : sent_(strings, false) {}
  bool sent(StringId id) const { return sent_[id]; }
  // True the first time `id` is asked for (and it counts as sent from then on).
  bool first_use(StringId id) {
    if (sent_[id]) return false;
    sent_[id] = true;
    return true;
  }

 private:
  std::vector<bool> sent_;
};

// An interning id: the model's StringId + 1 (iid 0 means "none" to Perfetto).
uint64_t iid_of(StringId id) { return uint64_t{id} + 1; }

int32_t clamp_to_int32(int64_t value) {
  return static_cast<int32_t>(std::clamp<int64_t>(value, INT32_MIN, INT32_MAX));
}

class PerfettoWriter {
 public:
  PerfettoWriter(const trace::Trace& trace, ByteSink& sink)
      : trace_(trace),
        sink_(sink),
        encoder_(out_),
        event_names_(trace.strings.size()),
        categories_(trace.strings.size()),
        annotation_names_(trace.strings.size()),
        annotation_strings_(trace.strings.size()) {}

  // The bytes a write of `trace` about takes (to reserve a string for).
  static size_t estimated_bytes(const trace::Trace& trace) {
    return 1024 + trace.slices.size() * 40 + trace.instants.size() * 30 +
           trace.counters.size() * 25 + trace.slice_args.size() * 14;
  }

  // false: the sink refused bytes (what it was given is a prefix of the output).
  bool write() {
    try {
      write_all();
    } catch (const SinkRefused&) {
      return false;
    }
    return true;
  }

 private:
  struct SinkRefused {};

  // A top-level packet's end: the buffer goes to the sink once it is large (packets are
  // whole, so nothing written later refers back into it).
  void end_packet(size_t packet) {
    encoder_.end_message(packet);
    if (out_.size() >= kSinkPieceBytes) hand_over();
  }
  void hand_over() {
    if (!sink_.write(out_)) throw SinkRefused{};
    out_.clear();
  }

  void write_all() {
    auto [earliest, latest] = trace_.time_bounds();
    static_cast<void>(latest);
    time_shift_ = earliest < 0 ? -earliest : 0;
    // A small trace gets a small buffer (a fuzzer writes thousands a second).
    out_.reserve(std::min(kSinkPieceBytes + 4096, estimated_bytes(trace_)));
    assign_uuids();
    index_flows();
    write_sequence_start(earliest);
    write_descriptors();
    write_slices();
    write_instants();
    write_counters();
    hand_over();
  }

  // ---- tracks --------------------------------------------------------------------------
  // uuids: 1 + index for processes (in the model's order), then tracks, then counter
  // tracks, then the global instants track; uuid 0 is Perfetto's root.
  void assign_uuids() {
    std::vector<int64_t> pids;
    for (const auto& process : trace_.processes) pids.push_back(process.pid);
    for (const auto& track : trace_.tracks) pids.push_back(track.pid);
    for (const auto& counter : trace_.counter_tracks) pids.push_back(counter.pid);
    for (int64_t pid : pids) {
      if (process_uuids_.contains(pid)) continue;
      process_uuids_.emplace(pid, next_uuid_++);
      process_order_.push_back(pid);
    }
    first_track_uuid_ = next_uuid_;
    next_uuid_ += trace_.tracks.size();
    first_counter_uuid_ = next_uuid_;
    next_uuid_ += trace_.counter_tracks.size();
    global_track_uuid_ = next_uuid_++;
    // One group track per GPU of a process ("GPU 0"), holding its streams' tracks.
    for (const trace::Track& track : trace_.tracks)
      if (trace::is_gpu_stream_track(track))
        if (gpu_group_uuids_
                .try_emplace({track.pid, trace::gpu_device_of_key(track.async_key)}, next_uuid_)
                .second)
          ++next_uuid_;
  }
  uint64_t track_uuid(TrackId track) const { return first_track_uuid_ + track; }

  const trace::Process* find_process(int64_t pid) const {
    for (const auto& process : trace_.processes)
      if (process.pid == pid) return &process;
    return nullptr;
  }

  void write_sequence_start(int64_t earliest) {
    // The clock snapshot: monotonic is the trace's clock; realtime when it is known.
    std::optional<uint64_t> wall;
    if (trace_.run.has_unix_offset && earliest + trace_.run.unix_offset_ns >= 0)
      wall = static_cast<uint64_t>(earliest + trace_.run.unix_offset_ns);
    perfetto::write_sequence_start(encoder_, static_cast<uint64_t>(earliest + time_shift_), wall);
    if (out_.size() >= kSinkPieceBytes) hand_over();
  }

  size_t begin_descriptor_packet(uint64_t uuid) {
    size_t packet = encoder_.begin_message(fields::kTracePacket);
    encoder_.varint_field(fields::packet::kTrustedPacketSequenceId, kSequenceId);
    descriptor_ = encoder_.begin_message(fields::packet::kTrackDescriptor);
    encoder_.varint_field(fields::track::kUuid, uuid);
    return packet;
  }
  void end_descriptor_packet(size_t packet) {
    encoder_.end_message(descriptor_);
    end_packet(packet);
  }

  void write_descriptors() {
    // Processes in the model's order: sort_index, then pid.
    std::vector<int64_t> ordered = process_order_;
    auto sort_index_of = [&](int64_t pid) {
      const trace::Process* process = find_process(pid);
      return process ? process->sort_index : 0;
    };
    std::stable_sort(ordered.begin(), ordered.end(), [&](int64_t a, int64_t b) {
      int64_t sort_a = sort_index_of(a), sort_b = sort_index_of(b);
      return sort_a != sort_b ? sort_a < sort_b : a < b;
    });

    size_t packet = begin_descriptor_packet(0);  // the root: ordering is explicit
    encoder_.varint_field(fields::track::kProcessOrdering, fields::track::kProcessOrderingExplicit);
    encoder_.varint_field(fields::track::kThreadOrdering, fields::track::kThreadOrderingExplicit);
    end_descriptor_packet(packet);

    for (size_t rank = 0; rank < ordered.size(); ++rank) write_process(ordered[rank], rank);

    // Tracks of each process: sort_index, then tid, then creation order; counters after.
    std::vector<TrackId> tracks(trace_.tracks.size());
    for (TrackId id = 0; id < tracks.size(); ++id) tracks[id] = id;
    std::stable_sort(tracks.begin(), tracks.end(), [&](TrackId a, TrackId b) {
      const trace::Track& first = trace_.tracks[a];
      const trace::Track& second = trace_.tracks[b];
      if (first.sort_index != second.sort_index) return first.sort_index < second.sort_index;
      return first.tid < second.tid;
    });
    std::unordered_map<int64_t, int32_t> next_rank;
    std::map<std::pair<int64_t, uint32_t>, int32_t> next_stream_rank;  // by GPU group
    for (TrackId id : tracks) {
      const trace::Track& track = trace_.tracks[id];
      if (!trace::is_gpu_stream_track(track)) {
        write_track(id, next_rank[track.pid]++, process_uuids_.at(track.pid));
        continue;
      }
      std::pair<int64_t, uint32_t> group{track.pid, trace::gpu_device_of_key(track.async_key)};
      auto [rank, first_stream] = next_stream_rank.try_emplace(group, 0);
      if (first_stream) write_gpu_group(group, next_rank[track.pid]++);
      write_track(id, rank->second++, gpu_group_uuids_.at(group));
    }
    for (uint32_t index = 0; index < trace_.counter_tracks.size(); ++index)
      write_counter_track(index, next_rank[trace_.counter_tracks[index].pid]++);

    bool any_global_instant = std::any_of(
        trace_.instants.scope.begin(), trace_.instants.scope.end(),
        [](trace::InstantScope scope) { return scope == trace::InstantScope::kGlobal; });
    if (any_global_instant) {
      packet = begin_descriptor_packet(global_track_uuid_);
      encoder_.bytes_field(fields::track::kName, "global instants");
      end_descriptor_packet(packet);
    }
  }

  void write_process(int64_t pid, size_t rank) {
    const trace::Process* process = find_process(pid);
    size_t packet = begin_descriptor_packet(process_uuids_.at(pid));
    encoder_.varint_field(fields::track::kChildOrdering, fields::track::kChildOrderingExplicit);
    encoder_.int_field(fields::track::kSiblingOrderRank, static_cast<int32_t>(rank));
    size_t descriptor = encoder_.begin_message(fields::track::kProcess);
    encoder_.int_field(fields::process::kPid, static_cast<int32_t>(pid));
    if (pid == trace_.run.pid && !trace_.run.command_line.empty())
      encoder_.bytes_field(fields::process::kCmdline, trace_.run.command_line);
    if (process != nullptr) {
      if (process->sort_index != 0)
        encoder_.int_field(fields::process::kLegacySortIndex, clamp_to_int32(process->sort_index));
      if (process->name != 0)
        encoder_.bytes_field(fields::process::kProcessName, trace_.str(process->name));
      for (StringId label : process->labels)
        encoder_.bytes_field(fields::process::kProcessLabels, trace_.str(label));
    }
    encoder_.end_message(descriptor);
    end_descriptor_packet(packet);
  }

  // A GPU of a process: a named track whose children are its streams' tracks, in order.
  void write_gpu_group(std::pair<int64_t, uint32_t> group, int32_t rank) {
    size_t packet = begin_descriptor_packet(gpu_group_uuids_.at(group));
    encoder_.varint_field(fields::track::kParentUuid, process_uuids_.at(group.first));
    encoder_.int_field(fields::track::kSiblingOrderRank, rank);
    encoder_.varint_field(fields::track::kChildOrdering, fields::track::kChildOrderingExplicit);
    encoder_.bytes_field(fields::track::kName, "GPU " + std::to_string(group.second));
    end_descriptor_packet(packet);
  }

  void write_track(TrackId id, int32_t rank, uint64_t parent_uuid) {
    const trace::Track& track = trace_.tracks[id];
    size_t packet = begin_descriptor_packet(track_uuid(id));
    encoder_.varint_field(fields::track::kParentUuid, parent_uuid);
    encoder_.int_field(fields::track::kSiblingOrderRank, rank);
    if (track.kind == trace::TrackKind::kThread) {
      size_t descriptor = encoder_.begin_message(fields::track::kThread);
      encoder_.int_field(fields::thread::kPid, static_cast<int32_t>(track.pid));
      encoder_.int_field(fields::thread::kTid, static_cast<int32_t>(track.tid));
      if (track.sort_index != 0)
        encoder_.int_field(fields::thread::kLegacySortIndex, clamp_to_int32(track.sort_index));
      if (track.name != 0)
        encoder_.bytes_field(fields::thread::kThreadName, trace_.str(track.name));
      encoder_.end_message(descriptor);
    } else {
      encoder_.bytes_field(fields::track::kName, trace_.track_label(id));
    }
    end_descriptor_packet(packet);
  }

  void write_counter_track(uint32_t index, int32_t rank) {
    const trace::CounterTrack& counter = trace_.counter_tracks[index];
    size_t packet = begin_descriptor_packet(first_counter_uuid_ + index);
    encoder_.varint_field(fields::track::kParentUuid, process_uuids_.at(counter.pid));
    encoder_.int_field(fields::track::kSiblingOrderRank, rank);
    encoder_.bytes_field(fields::track::kName, trace_.str(counter.name));
    size_t descriptor = encoder_.begin_message(fields::track::kCounter);
    std::string_view unit = trace_.str(counter.unit);
    if (unit == "ns")
      encoder_.varint_field(fields::counter::kUnit, fields::counter::kUnitTimeNs);
    else if (unit == "bytes")
      encoder_.varint_field(fields::counter::kUnit, fields::counter::kUnitSizeBytes);
    else if (unit == "count")
      encoder_.varint_field(fields::counter::kUnit, fields::counter::kUnitCount);
    else if (!unit.empty())
      encoder_.bytes_field(fields::counter::kUnitName, unit);
    encoder_.end_message(descriptor);
    end_descriptor_packet(packet);
  }

  // ---- events --------------------------------------------------------------------------
  // The flows leaving and reaching each slice, as Perfetto flow ids (flow row + 1).
  void index_flows() {
    const auto& flows = trace_.flows;
    if (flows.size() == 0) return;
    size_t slices = trace_.slices.size();
    flows_out_begin_.assign(slices + 1, 0);
    flows_in_begin_.assign(slices + 1, 0);
    for (size_t row = 0; row < flows.size(); ++row) {
      ++flows_out_begin_[flows.slice_out[row] + 1];
      ++flows_in_begin_[flows.slice_in[row] + 1];
    }
    for (size_t i = 0; i < slices; ++i) {
      flows_out_begin_[i + 1] += flows_out_begin_[i];
      flows_in_begin_[i + 1] += flows_in_begin_[i];
    }
    flows_out_.resize(flows.size());
    flows_in_.resize(flows.size());
    std::vector<RowIndex> out_fill(flows_out_begin_.begin(), flows_out_begin_.end() - 1);
    std::vector<RowIndex> in_fill(flows_in_begin_.begin(), flows_in_begin_.end() - 1);
    for (size_t row = 0; row < flows.size(); ++row) {
      flows_out_[out_fill[flows.slice_out[row]]++] = row + 1;
      flows_in_[in_fill[flows.slice_in[row]]++] = row + 1;
    }
  }

  // Sends the interned strings `event` will use that the sequence has not had yet.
  void write_interned_data(StringId name, StringId category, const ArgTable* args,
                           RowIndex args_begin, RowIndex args_end) {
    bool new_name = event_names_.first_use(name);
    bool new_category = category != 0 && categories_.first_use(category);
    bool new_arg = false;
    for (RowIndex row = args_begin; row < args_end && !new_arg; ++row) {
      StringId key = args->key[row];
      const trace::ArgValue& value = args->value[row];
      new_arg = !annotation_names_.sent(key) ||
                (value.type == ArgType::kString && !annotation_strings_.sent(value.string_value));
    }
    if (!new_name && !new_category && !new_arg) return;
    size_t interned = encoder_.begin_message(fields::packet::kInternedData);
    if (new_name) write_interned_entry(fields::interned::kEventNames, name);
    if (new_category) write_interned_entry(fields::interned::kEventCategories, category);
    for (RowIndex row = args_begin; new_arg && row < args_end; ++row) {
      StringId key = args->key[row];
      if (annotation_names_.first_use(key))
        write_interned_entry(fields::interned::kDebugAnnotationNames, key);
      const trace::ArgValue& value = args->value[row];
      if (value.type == ArgType::kString && annotation_strings_.first_use(value.string_value))
        write_interned_entry(fields::interned::kDebugAnnotationStringValues, value.string_value);
    }
    encoder_.end_message(interned);
  }
  void write_interned_entry(uint32_t field, StringId id) {
    size_t entry = encoder_.begin_message(field);
    encoder_.varint_field(fields::interned::kIid, iid_of(id));
    encoder_.bytes_field(fields::interned::kName, trace_.str(id));
    encoder_.end_message(entry);
  }

  void write_annotations(const ArgTable& args, RowIndex begin, RowIndex end) {
    for (RowIndex row = begin; row < end; ++row) {
      size_t annotation = encoder_.begin_message(fields::event::kDebugAnnotations);
      encoder_.varint_field(fields::annotation::kNameIid, iid_of(args.key[row]));
      const trace::ArgValue& value = args.value[row];
      switch (value.type) {
        case ArgType::kInt:
          encoder_.int_field(fields::annotation::kIntValue, value.int_value);
          break;
        case ArgType::kBool:
          encoder_.bool_field(fields::annotation::kBoolValue, value.int_value != 0);
          break;
        case ArgType::kDouble:
          encoder_.double_field(fields::annotation::kDoubleValue, value.double_value);
          break;
        case ArgType::kString:
          encoder_.varint_field(fields::annotation::kStringValueIid, iid_of(value.string_value));
          break;
      }
      encoder_.end_message(annotation);
    }
  }

  size_t begin_event_packet(int64_t ts) {
    size_t packet = encoder_.begin_message(fields::kTracePacket);
    encoder_.varint_field(fields::packet::kTimestamp, static_cast<uint64_t>(ts + time_shift_));
    encoder_.varint_field(fields::packet::kTrustedPacketSequenceId, kSequenceId);
    encoder_.varint_field(fields::packet::kSequenceFlags,
                          fields::packet::kSeqNeedsIncrementalState);
    return packet;
  }

  void write_slice_begin(RowIndex row) {
    const auto& slices = trace_.slices;
    RowIndex args_begin = slices.args_begin[row], args_end = slices.args_begin[row + 1];
    size_t packet = begin_event_packet(slices.ts[row]);
    write_interned_data(slices.name[row], slices.category[row], &trace_.slice_args, args_begin,
                        args_end);
    size_t event = encoder_.begin_message(fields::packet::kTrackEvent);
    encoder_.varint_field(fields::event::kType, fields::event::kTypeSliceBegin);
    encoder_.varint_field(fields::event::kTrackUuid, track_uuid(slices.track[row]));
    encoder_.varint_field(fields::event::kNameIid, iid_of(slices.name[row]));
    if (slices.category[row] != 0)
      encoder_.varint_field(fields::event::kCategoryIids, iid_of(slices.category[row]));
    write_annotations(trace_.slice_args, args_begin, args_end);
    if (!flows_out_begin_.empty()) {
      for (RowIndex i = flows_out_begin_[row]; i < flows_out_begin_[row + 1]; ++i)
        encoder_.fixed64_field(fields::event::kFlowIds, flows_out_[i]);
      for (RowIndex i = flows_in_begin_[row]; i < flows_in_begin_[row + 1]; ++i)
        encoder_.fixed64_field(fields::event::kTerminatingFlowIds, flows_in_[i]);
    }
    encoder_.end_message(event);
    end_packet(packet);
  }

  void write_slice_end(RowIndex row) {
    const auto& slices = trace_.slices;
    size_t packet = begin_event_packet(slices.end(row));
    size_t event = encoder_.begin_message(fields::packet::kTrackEvent);
    encoder_.varint_field(fields::event::kType, fields::event::kTypeSliceEnd);
    encoder_.varint_field(fields::event::kTrackUuid, track_uuid(slices.track[row]));
    encoder_.end_message(event);
    end_packet(packet);
  }

  // Track by track, each slice's begin after its parent's and its end before the next
  // slice that is not its descendant begins.
  void write_slices() {
    const auto& slices = trace_.slices;
    size_t rows = slices.size();
    if (rows == 0) return;
    std::vector<RowIndex> track_begin(trace_.tracks.size() + 1, 0);
    for (size_t row = 0; row < rows; ++row) ++track_begin[slices.track[row] + 1];
    for (size_t track = 0; track < trace_.tracks.size(); ++track)
      track_begin[track + 1] += track_begin[track];
    std::vector<RowIndex> by_track(rows);
    std::vector<RowIndex> fill(track_begin.begin(), track_begin.end() - 1);
    for (RowIndex row = 0; row < rows; ++row) by_track[fill[slices.track[row]]++] = row;

    std::vector<RowIndex> open;
    for (size_t track = 0; track < trace_.tracks.size(); ++track) {
      for (RowIndex i = track_begin[track]; i < track_begin[track + 1]; ++i) {
        RowIndex row = by_track[i];
        while (!open.empty() && open.back() != slices.parent[row]) {
          write_slice_end(open.back());
          open.pop_back();
        }
        write_slice_begin(row);
        open.push_back(row);
      }
      while (!open.empty()) {
        write_slice_end(open.back());
        open.pop_back();
      }
    }
  }

  void write_instants() {
    const auto& instants = trace_.instants;
    for (RowIndex row = 0; row < instants.size(); ++row) {
      RowIndex args_begin = instants.args_begin[row], args_end = instants.args_begin[row + 1];
      uint64_t uuid = track_uuid(instants.track[row]);
      if (instants.scope[row] == trace::InstantScope::kProcess)
        uuid = process_uuids_.at(trace_.tracks[instants.track[row]].pid);
      else if (instants.scope[row] == trace::InstantScope::kGlobal)
        uuid = global_track_uuid_;
      size_t packet = begin_event_packet(instants.ts[row]);
      write_interned_data(instants.name[row], instants.category[row], &trace_.instant_args,
                          args_begin, args_end);
      size_t event = encoder_.begin_message(fields::packet::kTrackEvent);
      encoder_.varint_field(fields::event::kType, fields::event::kTypeInstant);
      encoder_.varint_field(fields::event::kTrackUuid, uuid);
      encoder_.varint_field(fields::event::kNameIid, iid_of(instants.name[row]));
      if (instants.category[row] != 0)
        encoder_.varint_field(fields::event::kCategoryIids, iid_of(instants.category[row]));
      write_annotations(trace_.instant_args, args_begin, args_end);
      encoder_.end_message(event);
      end_packet(packet);
    }
  }

  void write_counters() {
    const auto& counters = trace_.counters;
    for (RowIndex row = 0; row < counters.size(); ++row) {
      size_t packet = begin_event_packet(counters.ts[row]);
      size_t event = encoder_.begin_message(fields::packet::kTrackEvent);
      encoder_.varint_field(fields::event::kType, fields::event::kTypeCounter);
      encoder_.varint_field(fields::event::kTrackUuid,
                            first_counter_uuid_ + counters.counter_track[row]);
      encoder_.double_field(fields::event::kDoubleCounterValue, counters.value[row]);
      encoder_.end_message(event);
      end_packet(packet);
    }
  }

  const trace::Trace& trace_;
  ByteSink& sink_;
  std::string out_;
  wire::ProtoEncoder encoder_;
  int64_t time_shift_ = 0;
  size_t descriptor_ = 0;

  std::unordered_map<int64_t, uint64_t> process_uuids_;
  std::map<std::pair<int64_t, uint32_t>, uint64_t> gpu_group_uuids_;  // (pid, device)
  std::vector<int64_t> process_order_;  // pids in the order they were found
  uint64_t next_uuid_ = 1;
  uint64_t first_track_uuid_ = 0;
  uint64_t first_counter_uuid_ = 0;
  uint64_t global_track_uuid_ = 0;

  InternedSet event_names_;
  InternedSet categories_;
  InternedSet annotation_names_;
  InternedSet annotation_strings_;

  std::vector<RowIndex> flows_out_begin_, flows_in_begin_;  // slices + 1 entries
  std::vector<uint64_t> flows_out_, flows_in_;
};

}  // namespace

std::string write_perfetto(const trace::Trace& trace) {
  StringSink sink;
  sink.out.reserve(PerfettoWriter::estimated_bytes(trace));
  PerfettoWriter(trace, sink).write();
  return std::move(sink.out);
}

bool write_perfetto(const trace::Trace& trace, ByteSink& sink) {
  return PerfettoWriter(trace, sink).write();
}

}  // namespace opsight::io
