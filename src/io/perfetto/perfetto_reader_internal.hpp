// The shared internal state of the Perfetto reader (read_perfetto, io.hpp): the class
// PerfettoReader, its per-sequence, per-track and per-event state, and the few small helpers
// every pass uses. Private to src/io/perfetto/; its methods are defined by seam in
//   perfetto_reader.cc              the read: pass 1 and pass 2 over the packets (framing,
//                                   sequences, interned data, defaults), the end of the read;
//   perfetto_reader_tracks.cc       track descriptors (process, thread, named, counter
//                                   tracks) and the model tracks they become;
//   perfetto_reader_clocks.cc       clock snapshots, the trace clock, sequence-scoped clocks;
//   perfetto_reader_events.cc       track events -> slices, instants, counters, flows, and
//                                   their pairing at the end of the read;
//   perfetto_reader_annotations.cc  debug annotations -> args (JSON text for nested values).
// The helpers called once per event are defined inline here, so that splitting the reader
// over several files costs the hot path no calls. perfetto_reader.cc says how the format maps
// to the model.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "io/io.hpp"
#include "io/perfetto/perfetto_fields.hpp"
#include "trace/trace.hpp"
#include "wire/proto_decoder.hpp"

namespace opsight::io::perfetto_reading {

namespace fields = perfetto::fields;
using trace::ArgValue;
using trace::kNoRow;
using trace::RowIndex;
using trace::StringId;
using trace::TrackId;
using wire::ProtoDecodeError;
using wire::ProtoField;
using wire::ProtoReader;

inline constexpr uint32_t kNone = std::numeric_limits<uint32_t>::max();
inline constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();
inline constexpr int64_t kInt64Min = std::numeric_limits<int64_t>::min();
// Parent chains and nested annotations deeper than this are damage (or not worth showing).
inline constexpr int kMaxParentHops = 64;
inline constexpr int kMaxNesting = 16;
inline constexpr int64_t kMaxTime = int64_t{1} << 62;

inline int64_t add_saturating(int64_t a, int64_t b) {
  int64_t sum;
  if (__builtin_add_overflow(a, b, &sum)) return b > 0 ? kInt64Max : kInt64Min;
  return sum;
}
inline int64_t multiply_saturating(int64_t a, int64_t b) {
  int64_t product;
  if (__builtin_mul_overflow(a, b, &product)) return (a < 0) == (b < 0) ? kInt64Max : kInt64Min;
  return product;
}
inline int64_t difference_saturating(int64_t a, int64_t b) {
  int64_t difference;
  if (__builtin_sub_overflow(a, b, &difference)) return a > b ? kInt64Max : kInt64Min;
  return difference;
}
inline int64_t clamp_to_int64(uint64_t value) {
  return value > static_cast<uint64_t>(kInt64Max) ? kInt64Max : static_cast<int64_t>(value);
}

// Throws: the field has the wrong wire type (perfetto_reader.cc; kept out of the hot path).
[[noreturn, gnu::cold, gnu::noinline]] void wrong_wire_type(const ProtoReader& reader,
                                                            const ProtoField& field,
                                                            uint32_t wire_type);
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

// Reads one .pftrace into a Trace (read_perfetto); one reader per read, used by one thread.
// Its state: the input, pass 1's descriptors and clock snapshots, the packet sequences,
// the track states by uuid, and the events kept until the end of the read (ends, flows).
class PerfettoReader {
 public:
  explicit PerfettoReader(std::string_view file) : file_(file), begin_(file.data()) {}

  ReadResult read();

 private:
  trace::Trace& trace() { return result_.trace; }

  // A snapshot's clocks as (clock id, ns); sequence-scoped clocks are left to pass 2.
  using Snapshot = std::vector<std::pair<uint64_t, int64_t>>;

  struct ClockValue {
    uint64_t id = 0;
    uint64_t value = 0;
    bool incremental = false;
    int64_t multiplier = 1;
  };

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

  static constexpr uint64_t kTypeComplete = 1000;  // a legacy 'X' event: not a TrackEvent type

  static constexpr int64_t kOpen = -1;  // the duration of a slice not yet ended

  // ---- the read, both passes over the packets and the end of the read (perfetto_reader.cc)
  void scan_descriptors_and_clocks();
  void read_packets();
  void read_packet(std::string_view bytes);
  void read_defaults(std::string_view bytes, Sequence& seq);
  void read_interned_data(std::string_view bytes, Sequence& seq);
  void finish();

  // ---- track descriptors and what they become in the model (perfetto_reader_tracks.cc)
  void scan_descriptor(std::string_view bytes);
  void scan_process(std::string_view bytes, Descriptor& descriptor);
  void scan_thread(std::string_view bytes, Descriptor& descriptor);
  void scan_counter(std::string_view bytes, Descriptor& descriptor);
  void read_legacy_process(std::string_view bytes);
  void read_legacy_thread(std::string_view bytes, Sequence& seq);
  TrackState resolve(uint64_t uuid);
  uint32_t legacy_thread_state(int64_t pid, int64_t tid);
  void apply_process(const Descriptor& descriptor);
  void materialize(uint32_t index, int depth = 0);
  TrackId slice_track(uint32_t index);
  TrackId instant_track(uint32_t index);

  // ---- clock snapshots and the conversion to the trace clock (perfetto_reader_clocks.cc)
  void scan_clock_snapshot(std::string_view bytes);
  ClockValue read_clock(std::string_view bytes);
  void choose_trace_clock();
  void read_sequence_clocks(std::string_view bytes, Sequence& seq);

  // ---- track events: slices, instants, counters, flows (perfetto_reader_events.cc)
  void read_track_event(std::string_view bytes, uint64_t raw_ts, uint64_t clock, Sequence& seq);
  StringId category_of(Sequence& seq);
  void add_extra_counters(const std::vector<double>& values, const std::vector<uint64_t>& uuids,
                          const std::vector<uint64_t>& default_uuids, int64_t ts);
  void pair_slices();
  void resolve_flows();
  void order_counters();

  // ---- debug annotations -> args (perfetto_reader_annotations.cc)
  void decode_annotations(Sequence& seq);
  static void append_double_json(std::string& out, double value);
  static void append_string_json(std::string& out, std::string_view text);
  void append_annotation_json(std::string& out, std::string_view bytes, Sequence& seq, int depth);
  std::string_view annotation_name(std::string_view bytes, Sequence& seq);
  void append_nested_json(std::string& out, std::string_view bytes, int depth);

  // ---- small helpers of every event (inline: the hot path)
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

  Sequence& sequence(uint64_t id) {
    if (id == last_sequence_id_ && last_sequence_ != nullptr) return *last_sequence_;
    last_sequence_id_ = id;
    last_sequence_ = &sequences_[id];
    return *last_sequence_;
  }

  // The time of an event on the trace clock (once per event: always inlined).
  [[gnu::always_inline]] int64_t packet_time(uint64_t raw, uint64_t clock, Sequence& seq) {
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

  StringId lookup(const InternTable& table, uint64_t iid) {
    StringId id = table.find(iid);
    if (id != kNone) return id;
    ++unknown_interned_ids_;
    return 0;
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

}  // namespace opsight::io::perfetto_reading
