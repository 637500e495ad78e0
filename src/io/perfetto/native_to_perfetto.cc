// A native file to Perfetto protobuf in bounded memory, as convert_native_to_chrome_json
// does for JSON: the file is read a window at a time by a NativeTail (its clock set to the
// file's first and last syncs, so times are the whole-file reader's) and each event is
// written as it is read: a SLICE_BEGIN at a span's begin, its SLICE_END (with the span's
// arguments as debug annotations, which Perfetto adds to the slice) at its end, an instant
// once the arguments after it are read, a counter sample at once. A track's descriptor is
// written before its first event. What is held: the tail's open spans and names, one entry
// per track, the interned strings (names, categories and argument keys; string values are
// written inline, so request ids do not grow it) and the output buffer (about 1 MiB).
//
// What differs from write_perfetto of the whole trace (docs/formats.md, "Streaming
// conversion"): events are in file order (Perfetto sorts them by time; on one track they
// already are, so spans nest as the recorder nested them), tracks are ordered by first use
// rather than by sort index and tid, flows are left out and counted, a counter's unit and a
// process's name from the run info's layout hints are not written, and a thread renamed
// after its first span keeps its first name.
#include <cmath>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_map>

#include "io/io.hpp"
#include "io/native/native_tail.hpp"
#include "io/perfetto/perfetto_fields.hpp"
#include "io/perfetto/perfetto_sequence.hpp"
#include "wire/proto_encoder.hpp"

namespace opsight::io {

namespace {

namespace fields = perfetto::fields;

using perfetto::kSequenceId;
// Distinct event names interned at most; further names are written inline (a run that names
// spans at run time from data must not grow the table without bound).
constexpr size_t kMaxInternedStrings = size_t{1} << 16;

class StreamingPerfettoWriter {
 public:
  StreamingPerfettoWriter(ByteSink& sink, int64_t unix_offset_ns)
      : sink_(sink), encoder_(out_), unix_offset_ns_(unix_offset_ns) {
    out_.reserve(kSinkPieceBytes + 64 * 1024);
  }

  bool refused() const { return refused_; }

  void start(int64_t anchor_ns, bool has_realtime, const std::string& command_line,
             int64_t run_pid) {
    command_line_ = command_line;
    run_pid_ = run_pid;
    const uint64_t anchor = static_cast<uint64_t>(std::max<int64_t>(anchor_ns, 0));
    const int64_t wall = static_cast<int64_t>(anchor) + unix_offset_ns_;
    perfetto::write_sequence_start(encoder_, anchor,
                                   has_realtime && wall >= 0
                                       ? std::optional<uint64_t>(static_cast<uint64_t>(wall))
                                       : std::nullopt);

    size_t packet = begin_descriptor_packet(0);  // the root: ordering is explicit
    encoder_.varint_field(fields::track::kProcessOrdering, fields::track::kProcessOrderingExplicit);
    encoder_.varint_field(fields::track::kThreadOrdering, fields::track::kThreadOrderingExplicit);
    end_descriptor_packet(packet);
  }

  void begin(const BegunSpan& span) {
    const uint64_t track = span.async
                               ? async_track(span.pid, span.async_id, span.name)
                               : thread_or_lane_track(span.pid, span.tid, span.lane, span.lane_name,
                                                      span.lane_serial, span.thread_name);
    const uint64_t name_iid = interned(names_, span.name);
    const uint64_t category_iid = span.category.empty() ? 0 : interned(categories_, span.category);
    size_t packet = begin_event_packet(span.start_unix_ns);
    write_interned(name_iid, span.name, category_iid, span.category, nullptr);
    size_t event = encoder_.begin_message(fields::packet::kTrackEvent);
    encoder_.varint_field(fields::event::kType, fields::event::kTypeSliceBegin);
    encoder_.varint_field(fields::event::kTrackUuid, track);
    write_name(name_iid, span.name);
    if (category_iid != 0) encoder_.varint_field(fields::event::kCategoryIids, category_iid);
    encoder_.end_message(event);
    end_packet(packet);
  }

  void end(const EndedSpan& span) {
    const uint64_t track = span.async
                               ? async_track(span.pid, span.async_id, span.name)
                               : thread_or_lane_track(span.pid, span.tid, span.lane, span.lane_name,
                                                      span.lane_serial, span.thread_name);
    size_t packet = begin_event_packet(span.end_unix_ns);
    write_interned(0, {}, 0, {}, span.args);
    size_t event = encoder_.begin_message(fields::packet::kTrackEvent);
    encoder_.varint_field(fields::event::kType, fields::event::kTypeSliceEnd);
    encoder_.varint_field(fields::event::kTrackUuid, track);
    if (span.args != nullptr) write_annotations(*span.args);
    encoder_.end_message(event);
    end_packet(packet);
  }

  void instant(const TailInstant& instant) {
    uint64_t track = 0;
    if (instant.scope == static_cast<uint8_t>(trace::InstantScope::kProcess)) {
      track = process_uuid(instant.pid);
    } else if (instant.scope == static_cast<uint8_t>(trace::InstantScope::kGlobal)) {
      if (global_track_ == 0) {
        global_track_ = next_uuid_++;
        size_t packet = begin_descriptor_packet(global_track_);
        encoder_.bytes_field(fields::track::kName, "global instants");
        end_descriptor_packet(packet);
      }
      track = global_track_;
    } else {
      track =
          thread_or_lane_track(instant.pid, instant.tid, instant.lane, instant.lane_name, 0, {});
    }
    const uint64_t name_iid = interned(names_, instant.name);
    const uint64_t category_iid =
        instant.category.empty() ? 0 : interned(categories_, instant.category);
    size_t packet = begin_event_packet(instant.unix_ns);
    write_interned(name_iid, instant.name, category_iid, instant.category, instant.args);
    size_t event = encoder_.begin_message(fields::packet::kTrackEvent);
    encoder_.varint_field(fields::event::kType, fields::event::kTypeInstant);
    encoder_.varint_field(fields::event::kTrackUuid, track);
    write_name(name_iid, instant.name);
    if (category_iid != 0) encoder_.varint_field(fields::event::kCategoryIids, category_iid);
    if (instant.args != nullptr) write_annotations(*instant.args);
    encoder_.end_message(event);
    end_packet(packet);
  }

  void counter(const TailCounterSample& sample) {
    auto key = std::pair<int64_t, std::string>(sample.pid, std::string(sample.name));
    auto found = counter_tracks_.find(key);
    if (found == counter_tracks_.end()) {
      const uint64_t uuid = next_uuid_++;
      found = counter_tracks_.emplace(std::move(key), uuid).first;
      const uint64_t parent = process_uuid(sample.pid);
      size_t packet = begin_descriptor_packet(uuid);
      encoder_.varint_field(fields::track::kParentUuid, parent);
      encoder_.int_field(fields::track::kSiblingOrderRank, next_rank_[sample.pid]++);
      encoder_.bytes_field(fields::track::kName, sample.name);
      size_t descriptor = encoder_.begin_message(fields::track::kCounter);
      encoder_.end_message(descriptor);
      end_descriptor_packet(packet);
    }
    size_t packet = begin_event_packet(sample.unix_ns);
    size_t event = encoder_.begin_message(fields::packet::kTrackEvent);
    encoder_.varint_field(fields::event::kType, fields::event::kTypeCounter);
    encoder_.varint_field(fields::event::kTrackUuid, found->second);
    encoder_.double_field(fields::event::kDoubleCounterValue, sample.value);
    encoder_.end_message(event);
    end_packet(packet);
  }

  void flush() {
    if (!refused_ && !out_.empty() && !sink_.write(out_)) refused_ = true;
    out_.clear();
  }

 private:
  // An interned string's id, 0 when the table is full (the string is then written inline).
  // Looked up by string_view (no string built per event), with a one-entry cache per
  // table: consecutive events mostly repeat a name.
  struct TextHash {
    using is_transparent = void;
    size_t operator()(std::string_view text) const { return std::hash<std::string_view>{}(text); }
  };
  struct Interned {
    std::unordered_map<std::string, uint64_t, TextHash, std::equal_to<>> ids;
    std::string last_text;
    uint64_t last_iid = 0;
    bool added = false;  // the last call added it: write its InternedData entry
  };
  uint64_t interned(Interned& table, std::string_view text) {
    table.added = false;
    if (table.last_iid != 0 && table.last_text == text) return table.last_iid;
    auto found = table.ids.find(text);
    uint64_t iid = 0;
    if (found != table.ids.end()) {
      iid = found->second;
    } else {
      if (table.ids.size() >= kMaxInternedStrings) return 0;
      iid = table.ids.size() + 1;
      table.ids.emplace(std::string(text), iid);
      table.added = true;
    }
    table.last_text.assign(text);
    table.last_iid = iid;
    return iid;
  }

  void write_interned(uint64_t name_iid, std::string_view name, uint64_t category_iid,
                      std::string_view category, const std::vector<TailArg>* args) {
    const bool new_name = name_iid != 0 && names_.added;
    const bool new_category = category_iid != 0 && categories_.added;
    names_.added = categories_.added = false;
    std::vector<std::pair<uint64_t, std::string_view>> new_keys;
    if (args != nullptr)
      for (const TailArg& arg : *args) {
        const uint64_t key = interned(keys_, arg.key);
        if (key != 0 && keys_.added) new_keys.emplace_back(key, arg.key);
      }
    if (!new_name && !new_category && new_keys.empty()) return;
    size_t interned_data = encoder_.begin_message(fields::packet::kInternedData);
    if (new_name) write_interned_entry(fields::interned::kEventNames, name_iid, name);
    if (new_category)
      write_interned_entry(fields::interned::kEventCategories, category_iid, category);
    for (const auto& key : new_keys)
      write_interned_entry(fields::interned::kDebugAnnotationNames, key.first, key.second);
    encoder_.end_message(interned_data);
  }
  void write_interned_entry(uint32_t field, uint64_t iid, std::string_view text) {
    size_t entry = encoder_.begin_message(field);
    encoder_.varint_field(fields::interned::kIid, iid);
    encoder_.bytes_field(fields::interned::kName, text);
    encoder_.end_message(entry);
  }
  void write_name(uint64_t iid, std::string_view name) {
    if (iid != 0)
      encoder_.varint_field(fields::event::kNameIid, iid);
    else
      encoder_.bytes_field(fields::event::kName, name);
  }

  void write_annotations(const std::vector<TailArg>& args) {
    for (const TailArg& arg : args) {
      size_t annotation = encoder_.begin_message(fields::event::kDebugAnnotations);
      auto key = keys_.ids.find(std::string_view(arg.key));
      if (key != keys_.ids.end())
        encoder_.varint_field(fields::annotation::kNameIid, key->second);
      else
        encoder_.bytes_field(fields::annotation::kName, arg.key);
      switch (arg.value.type) {
        case trace::ArgType::kInt:
          encoder_.int_field(fields::annotation::kIntValue, arg.value.int_value);
          break;
        case trace::ArgType::kBool:
          encoder_.bool_field(fields::annotation::kBoolValue, arg.value.int_value != 0);
          break;
        case trace::ArgType::kDouble:
          encoder_.double_field(fields::annotation::kDoubleValue, arg.value.double_value);
          break;
        case trace::ArgType::kString:
          encoder_.bytes_field(fields::annotation::kStringValue, arg.text);
          break;
      }
      encoder_.end_message(annotation);
    }
  }

  size_t begin_event_packet(int64_t unix_ns) {
    const int64_t ns = unix_ns - unix_offset_ns_;  // the model's (monotonic) time
    size_t packet = encoder_.begin_message(fields::kTracePacket);
    encoder_.varint_field(fields::packet::kTimestamp,
                          static_cast<uint64_t>(std::max<int64_t>(ns, 0)));
    encoder_.varint_field(fields::packet::kTrustedPacketSequenceId, kSequenceId);
    encoder_.varint_field(fields::packet::kSequenceFlags,
                          fields::packet::kSeqNeedsIncrementalState);
    return packet;
  }
  void end_packet(size_t packet) {
    encoder_.end_message(packet);
    if (out_.size() >= kSinkPieceBytes) flush();
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

  uint64_t process_uuid(int64_t pid) {
    auto found = processes_.find(pid);
    if (found != processes_.end()) return found->second;
    const uint64_t uuid = next_uuid_++;
    processes_.emplace(pid, uuid);
    size_t packet = begin_descriptor_packet(uuid);
    encoder_.varint_field(fields::track::kChildOrdering, fields::track::kChildOrderingExplicit);
    encoder_.int_field(fields::track::kSiblingOrderRank,
                       static_cast<int32_t>(processes_.size() - 1));
    size_t descriptor = encoder_.begin_message(fields::track::kProcess);
    encoder_.int_field(fields::process::kPid, static_cast<int32_t>(pid));
    if (pid == run_pid_ && !command_line_.empty())
      encoder_.bytes_field(fields::process::kCmdline, command_line_);
    encoder_.end_message(descriptor);
    end_descriptor_packet(packet);
    return uuid;
  }

  // The thread's own track (lane 0), or the track of one of its lanes.
  uint64_t thread_or_lane_track(int64_t pid, int64_t tid, uint64_t lane, std::string_view lane_name,
                                uint64_t lane_serial, std::string_view thread_name) {
    auto key = std::tuple<int64_t, int64_t, uint64_t, uint64_t>(pid, tid, lane,
                                                                lane == 0 ? 0 : lane_serial);
    if (last_track_uuid_ != 0 && key == last_track_key_) return last_track_uuid_;
    auto found = tracks_.find(key);
    if (found != tracks_.end()) {
      last_track_key_ = key;
      last_track_uuid_ = found->second;
      return found->second;
    }
    const uint64_t parent = process_uuid(pid);
    const uint64_t uuid = next_uuid_++;
    tracks_.emplace(key, uuid);
    size_t packet = begin_descriptor_packet(uuid);
    encoder_.varint_field(fields::track::kParentUuid, parent);
    encoder_.int_field(fields::track::kSiblingOrderRank, next_rank_[pid]++);
    if (lane == 0) {
      size_t descriptor = encoder_.begin_message(fields::track::kThread);
      encoder_.int_field(fields::thread::kPid, static_cast<int32_t>(pid));
      encoder_.int_field(fields::thread::kTid, static_cast<int32_t>(tid));
      if (!thread_name.empty()) encoder_.bytes_field(fields::thread::kThreadName, thread_name);
      encoder_.end_message(descriptor);
    } else {
      encoder_.bytes_field(fields::track::kName, lane_name.empty() ? "track " + std::to_string(lane)
                                                                   : std::string(lane_name));
    }
    end_descriptor_packet(packet);
    return uuid;
  }

  // A process's async track of one id, named after its first span.
  uint64_t async_track(int64_t pid, uint64_t id, std::string_view first_name) {
    auto key = std::pair<int64_t, uint64_t>(pid, id);
    auto found = async_tracks_.find(key);
    if (found != async_tracks_.end()) return found->second;
    const uint64_t parent = process_uuid(pid);
    const uint64_t uuid = next_uuid_++;
    async_tracks_.emplace(key, uuid);
    size_t packet = begin_descriptor_packet(uuid);
    encoder_.varint_field(fields::track::kParentUuid, parent);
    encoder_.int_field(fields::track::kSiblingOrderRank, next_rank_[pid]++);
    encoder_.bytes_field(fields::track::kName, first_name.empty() ? "async " + std::to_string(id)
                                                                  : std::string(first_name));
    end_descriptor_packet(packet);
    return uuid;
  }

  ByteSink& sink_;
  std::string out_;
  wire::ProtoEncoder encoder_;
  int64_t unix_offset_ns_ = 0;
  size_t descriptor_ = 0;
  bool refused_ = false;
  std::string command_line_;
  int64_t run_pid_ = 0;
  uint64_t next_uuid_ = 1;
  uint64_t global_track_ = 0;
  std::unordered_map<int64_t, uint64_t> processes_;
  std::unordered_map<int64_t, int32_t> next_rank_;  // per process: its tracks so far
  std::map<std::tuple<int64_t, int64_t, uint64_t, uint64_t>, uint64_t> tracks_;
  std::tuple<int64_t, int64_t, uint64_t, uint64_t> last_track_key_;  // the last one looked up
  uint64_t last_track_uuid_ = 0;
  std::map<std::pair<int64_t, uint64_t>, uint64_t> async_tracks_;
  std::map<std::pair<int64_t, std::string>, uint64_t> counter_tracks_;
  Interned names_, categories_, keys_;
};

}  // namespace

std::optional<std::string> convert_native_to_perfetto(const std::string& path, ByteSink& sink,
                                                      StreamedConversion* counts) {
  FileClock clock;
  if (auto problem = scan_file_clock(path, &clock)) return problem;
  NativeTail tail(path);
  if (clock.found) tail.use_clock(clock.first, clock.last);
  const int64_t unix_offset = clock.found ? clock.first.realtime_ns - clock.first.monotonic_ns : 0;
  StreamedConversion local;
  StreamedConversion& count = counts != nullptr ? *counts : local;
  count = {};

  // The run info comes first in a file opsight writes: read up to the first events chunk
  // would be needed to know the command line before the first descriptor. The writer is
  // therefore started lazily, at the first event, with what the tail has read by then.
  StreamingPerfettoWriter writer(sink, unix_offset);
  bool started = false;
  auto start = [&] {
    if (started) return;
    started = true;
    std::string command_line;
    int64_t pid = 0;
    for (const auto& entry : tail.run_info()) {
      if (entry.first == "command_line") command_line = entry.second;
      if (entry.first == "pid") pid = std::strtoll(entry.second.c_str(), nullptr, 10);
    }
    writer.start(clock.found ? clock.first.monotonic_ns : 0, clock.found, command_line, pid);
  };

  TailVisitor visitor;
  visitor.on_begin = [&](const BegunSpan& span) {
    start();
    writer.begin(span);
  };
  visitor.on_span = [&](const EndedSpan& span) {
    start();
    writer.end(span);
    ++(span.async ? count.async_slices : count.slices);
  };
  visitor.on_instant = [&](const TailInstant& instant) {
    start();
    writer.instant(instant);
    ++count.instants;
  };
  visitor.on_counter_sample = [&](const TailCounterSample& sample) {
    start();
    writer.counter(sample);
    ++count.counter_samples;
  };
  visitor.on_flow = [&] { ++count.flows_left_out; };

  if (!tail.poll(visitor)) return tail.error();
  tail.finish(visitor);
  start();  // an empty run still gets its sequence's first packets
  writer.flush();
  if (writer.refused()) return std::string("the output refused bytes");
  count.complete = tail.finished();
  return std::nullopt;
}

}  // namespace opsight::io
