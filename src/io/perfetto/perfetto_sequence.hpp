// What both of opsight's Perfetto writers (the whole-trace writer, perfetto_writer.cc, and
// the streaming converter of a native file, native_to_perfetto.cc) write the same way: the
// one trusted packet sequence every packet is on, and that sequence's first two packets.
#pragma once

#include <cstdint>
#include <optional>

#include "io/perfetto/perfetto_fields.hpp"
#include "wire/proto_encoder.hpp"

namespace opsight::io::perfetto {

inline constexpr uint64_t kSequenceId = 1;

// The first packet clears the sequence's incremental state and makes monotonic the clock of
// every later packet on it; the second is a clock snapshot at `anchor_ns` on the monotonic
// clock, and on the realtime clock at `wall_ns` when it is known. Each packet is a whole
// TracePacket message of `encoder`.
inline void write_sequence_start(wire::ProtoEncoder& encoder, uint64_t anchor_ns,
                                 std::optional<uint64_t> wall_ns) {
  size_t packet = encoder.begin_message(fields::kTracePacket);
  encoder.varint_field(fields::packet::kTrustedPacketSequenceId, kSequenceId);
  encoder.bool_field(fields::packet::kFirstPacketOnSequence, true);
  encoder.bool_field(fields::packet::kIncrementalStateCleared, true);
  encoder.varint_field(fields::packet::kSequenceFlags, fields::packet::kSeqIncrementalStateCleared);
  size_t defaults = encoder.begin_message(fields::packet::kTracePacketDefaults);
  encoder.varint_field(fields::packet_defaults::kTimestampClockId, fields::kBuiltinClockMonotonic);
  encoder.end_message(defaults);
  encoder.end_message(packet);

  packet = encoder.begin_message(fields::kTracePacket);
  encoder.varint_field(fields::packet::kTrustedPacketSequenceId, kSequenceId);
  encoder.varint_field(fields::packet::kTimestamp, anchor_ns);
  size_t snapshot = encoder.begin_message(fields::packet::kClockSnapshot);
  size_t clock = encoder.begin_message(fields::clock_snapshot::kClocks);
  encoder.varint_field(fields::clock_snapshot::kClockId, fields::kBuiltinClockMonotonic);
  encoder.varint_field(fields::clock_snapshot::kTimestamp, anchor_ns);
  encoder.end_message(clock);
  if (wall_ns) {
    clock = encoder.begin_message(fields::clock_snapshot::kClocks);
    encoder.varint_field(fields::clock_snapshot::kClockId, fields::kBuiltinClockRealtime);
    encoder.varint_field(fields::clock_snapshot::kTimestamp, *wall_ns);
    encoder.end_message(clock);
  }
  encoder.varint_field(fields::clock_snapshot::kPrimaryTraceClock, fields::kBuiltinClockMonotonic);
  encoder.end_message(snapshot);
  encoder.end_message(packet);
}

}  // namespace opsight::io::perfetto
