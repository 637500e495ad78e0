// Perfetto reader: track descriptors and the model tracks they become. Pass 1 scans every
// TrackDescriptor (process, thread, counter, or a name only) into a Descriptor by uuid, a
// later one replacing an earlier; an event's track uuid is resolved once into a TrackState
// (its kind, pid and tid from the nearest process or thread above it), and the model's
// process, thread track, async track ("GPU <n> stream <s>" under a "GPU <n>" track gets the
// GPU stream key back), counter track or instant track is made on first use. The legacy
// ProcessDescriptor and ThreadDescriptor packets land here too.
#include <charconv>
#include <optional>
#include <string>
#include <string_view>

#include "io/perfetto/perfetto_reader_internal.hpp"
#include "trace/gpu_tracks.hpp"

namespace opsight::io::perfetto_reading {

namespace {

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

}  // namespace

void PerfettoReader::scan_descriptor(std::string_view bytes) {
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

void PerfettoReader::scan_process(std::string_view bytes, Descriptor& descriptor) {
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

void PerfettoReader::scan_thread(std::string_view bytes, Descriptor& descriptor) {
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

void PerfettoReader::scan_counter(std::string_view bytes, Descriptor& descriptor) {
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

void PerfettoReader::read_legacy_process(std::string_view bytes) {
  Descriptor descriptor;
  scan_process(bytes, descriptor);
  apply_process(descriptor);
}

void PerfettoReader::read_legacy_thread(std::string_view bytes, Sequence& seq) {
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

// What a uuid's descriptor (and the chain of its parents) makes it.
TrackState PerfettoReader::resolve(uint64_t uuid) {
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
uint32_t PerfettoReader::legacy_thread_state(int64_t pid, int64_t tid) {
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

void PerfettoReader::apply_process(const Descriptor& descriptor) {
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
void PerfettoReader::materialize(uint32_t index, int depth) {
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
TrackId PerfettoReader::slice_track(uint32_t index) {
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
    if (error != std::errc() || end != digits.data() + digits.size() || digits.empty()) gpu.reset();
  } else {
    gpu.reset();
  }
  if (gpu) {
    track = trace().process_async_track(state.pid, trace::gpu_stream_track_key(*gpu, stream), name);
    trace().tracks[track].sort_index =
        trace::kGpuTrackSortBase + int64_t{*gpu} * 100'000 + std::min<int64_t>(stream, 99'999);
  } else {
    track = trace().process_async_track(state.pid, state.uuid, name);
  }
  states_[index].slices = track;
  return track;
}

// The thread track a state's instants go to, and their scope.
TrackId PerfettoReader::instant_track(uint32_t index) {
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

}  // namespace opsight::io::perfetto_reading
