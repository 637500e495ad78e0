// Perfetto reader: clocks. Pass 1 keeps the global clocks of every ClockSnapshot; the trace
// clock (primary_trace_clock, else BOOTTIME) is chosen from them, with the conversions of the
// other clocks to it and run.unix_offset_ns when REALTIME is there. Pass 2 keeps each
// sequence's scoped clocks (ids 64-127, the SDK's incremental clock), which packet_time
// (perfetto_reader_internal.hpp) applies to every event's timestamp.
#include "io/perfetto/perfetto_reader_internal.hpp"

namespace opsight::io::perfetto_reading {

namespace {

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

}  // namespace

void PerfettoReader::scan_clock_snapshot(std::string_view bytes) {
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

PerfettoReader::ClockValue PerfettoReader::read_clock(std::string_view bytes) {
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
void PerfettoReader::choose_trace_clock() {
  trace_clock_ = primary_clock_ != 0 ? primary_clock_ : fields::kBuiltinClockBoottime;
  for (const Snapshot& snapshot : snapshots_) {
    auto trace_entry = std::find_if(snapshot.begin(), snapshot.end(),
                                    [&](const auto& clock) { return clock.first == trace_clock_; });
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

// The sequence-scoped clocks of a snapshot (the SDK's incremental clock): each keeps its
// value and the trace clock's time at that value.
void PerfettoReader::read_sequence_clocks(std::string_view bytes, Sequence& seq) {
  ProtoReader reader(bytes, begin_, "ClockSnapshot");
  ProtoField field;
  std::vector<ClockValue> clocks;
  while (reader.next(field))
    if (field.number == fields::clock_snapshot::kClocks) clocks.push_back(read_clock(field.bytes));
  // The reference: the trace clock if the snapshot has it, else its first global clock.
  const ClockValue* reference = nullptr;
  for (const ClockValue& clock : clocks) {
    bool scoped = clock.id >= fields::kFirstSequenceScopedClock &&
                  clock.id <= fields::kLastSequenceScopedClock;
    if (scoped) continue;
    if (reference == nullptr || clock.id == trace_clock_) reference = &clock;
  }
  for (const ClockValue& clock : clocks) {
    if (clock.id < fields::kFirstSequenceScopedClock || clock.id > fields::kLastSequenceScopedClock)
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

}  // namespace opsight::io::perfetto_reading
