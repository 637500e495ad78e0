#!/usr/bin/env python3
"""Writes the golden .pftrace files that src/io/perfetto/perfetto_reader_test.cc reads: track
events as Perfetto's SDK writes them, built with the `perfetto` PyPI package's own trace
protos (perfetto.trace_builder.proto_builder.TraceProtoBuilder; requirements/test.txt pins
the version), so that the reader is checked against the real message definitions, not
against opsight's writer.

  sdk_track_events.pftrace  what the C++ SDK writes: a process, two threads, a named track,
                            counter tracks (a unit, a multiplier, incremental values), all
                            names, categories and annotation names/values interned per
                            sequence, the SDK's incremental sequence-scoped clock (id 64, in
                            microseconds) anchored by a snapshot to BOOTTIME and REALTIME,
                            TrackEventDefaults (default track, extra counter tracks), a
                            slice begun on one sequence and ended on another, flows
                            (flow_ids, terminating_flow_ids, the older varint fields), every
                            debug-annotation value kind, an incremental-state reset that
                            reuses iids, and a sequence that needs state it never got
  sdk_plain_strings.pftrace what a Python script writes following Perfetto's docs: names as
                            strings, track_uuid on every event, absolute BOOTTIME times

Usage: .venv/bin/python tests/data/perfetto_sdk/generate.py [OUTPUT_DIR]  (default: here)
"""

import os
import sys

from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import (
    BuiltinClock, CounterDescriptor, TracePacket, TrackEvent)
from perfetto.trace_builder.proto_builder import TraceProtoBuilder

CLEARED = TracePacket.SEQ_INCREMENTAL_STATE_CLEARED
NEEDS_STATE = TracePacket.SEQ_NEEDS_INCREMENTAL_STATE
BEGIN, END = TrackEvent.TYPE_SLICE_BEGIN, TrackEvent.TYPE_SLICE_END
INSTANT, COUNTER = TrackEvent.TYPE_INSTANT, TrackEvent.TYPE_COUNTER

PROCESS, MAIN, IO, REQUESTS, QUEUE, MEMORY, CPU_TIME = 100, 101, 102, 103, 104, 105, 106
BOOT_NS = 5_000_000_000          # BOOTTIME at the snapshot
WALL_NS = 1_700_000_000_000_000_000  # REALTIME at the snapshot
CLOCK_US = 1_000                 # the incremental clock's value at the snapshot (microseconds)


def descriptor(builder, uuid, sequence, **fields):
    packet = builder.add_packet()
    packet.trusted_packet_sequence_id = sequence
    packet.track_descriptor.uuid = uuid
    for key, value in fields.items():
        setattr(packet.track_descriptor, key, value)
    return packet.track_descriptor


def event_packet(builder, sequence, delta_us, needs_state=True):
    packet = builder.add_packet()
    packet.trusted_packet_sequence_id = sequence
    packet.timestamp = delta_us  # on the incremental clock: microseconds since the last
    if needs_state:
        packet.sequence_flags = NEEDS_STATE
    return packet


def start_sequence(builder, sequence, default_track, extra_counters=()):
    packet = builder.add_packet()
    packet.trusted_packet_sequence_id = sequence
    packet.sequence_flags = CLEARED
    packet.timestamp = BOOT_NS
    defaults = packet.trace_packet_defaults
    defaults.timestamp_clock_id = 64
    defaults.track_event_defaults.track_uuid = default_track
    defaults.track_event_defaults.extra_counter_track_uuids.extend(extra_counters)
    snapshot = packet.clock_snapshot
    snapshot.primary_trace_clock = BuiltinClock.BUILTIN_CLOCK_BOOTTIME
    for clock_id, value in ((BuiltinClock.BUILTIN_CLOCK_BOOTTIME, BOOT_NS),
                            (BuiltinClock.BUILTIN_CLOCK_REALTIME, WALL_NS)):
        clock = snapshot.clocks.add()
        clock.clock_id, clock.timestamp = clock_id, value
    clock = snapshot.clocks.add()
    clock.clock_id, clock.timestamp = 64, CLOCK_US
    clock.unit_multiplier_ns, clock.is_incremental = 1000, True


def intern(packet, names=(), categories=(), annotation_names=(), strings=()):
    for field, entries, text in ((packet.interned_data.event_names, names, "name"),
                                 (packet.interned_data.event_categories, categories, "name"),
                                 (packet.interned_data.debug_annotation_names,
                                  annotation_names, "name"),
                                 (packet.interned_data.debug_annotation_string_values,
                                  strings, "str")):
        for iid, value in entries:
            entry = field.add()
            entry.iid = iid
            setattr(entry, text, value.encode() if text == "str" else value)


def sdk_track_events():
    builder = TraceProtoBuilder()
    # Descriptors, as the SDK writes them on the sequence of their first use.
    process = descriptor(builder, PROCESS, 1).process
    process.pid, process.process_name = 42, "sdk_server"
    process.cmdline.extend(["python", "serve.py"])
    thread = descriptor(builder, MAIN, 1, parent_uuid=PROCESS).thread
    thread.pid, thread.tid, thread.thread_name = 42, 43, "main"
    thread = descriptor(builder, IO, 2, parent_uuid=PROCESS).thread
    thread.pid, thread.tid, thread.thread_name = 42, 44, "io"
    descriptor(builder, REQUESTS, 1, parent_uuid=PROCESS, static_name="requests")
    counter = descriptor(builder, QUEUE, 1, parent_uuid=PROCESS, name="queue depth").counter
    counter.unit = CounterDescriptor.UNIT_COUNT
    counter.is_incremental = True
    counter = descriptor(builder, MEMORY, 1, parent_uuid=PROCESS, name="heap").counter
    counter.unit, counter.unit_multiplier = CounterDescriptor.UNIT_SIZE_BYTES, 1024
    counter = descriptor(builder, CPU_TIME, 1, parent_uuid=MAIN).counter
    counter.type = CounterDescriptor.COUNTER_THREAD_TIME_NS
    counter.unit = CounterDescriptor.UNIT_TIME_NS

    start_sequence(builder, 1, MAIN, extra_counters=[CPU_TIME])
    # Clock 64 counts microseconds from 1000 at the snapshot (BOOTTIME 5 s); each packet's
    # timestamp adds to the last. First: 2000, BOOTTIME 5 s + 1 ms.
    packet = event_packet(builder, 1, 1000)
    intern(packet, names=[(1, "handle")], categories=[(1, "rpc"), (2, "net")],
           annotation_names=[(1, "size"), (2, "user"), (3, "shape"), (4, "ids")],
           strings=[(1, "alice")])
    event = packet.track_event
    event.type, event.name_iid = BEGIN, 1
    event.category_iids.extend([1, 2])
    event.extra_counter_values.append(250)  # CPU time, through the defaults
    event.flow_ids.append(7)
    for make in (lambda a: (setattr(a, "name_iid", 1), setattr(a, "int_value", -7)),
                 lambda a: (setattr(a, "name_iid", 2), setattr(a, "string_value_iid", 1)),
                 lambda a: (setattr(a, "name", "path"), setattr(a, "string_value", "/v1")),
                 lambda a: (setattr(a, "name", "big"), setattr(a, "uint_value", 2**64 - 1)),
                 lambda a: (setattr(a, "name", "ratio"), setattr(a, "double_value", 0.25)),
                 lambda a: (setattr(a, "name", "ok"), setattr(a, "bool_value", True)),
                 lambda a: (setattr(a, "name", "where"), setattr(a, "pointer_value", 0xbeef)),
                 lambda a: (setattr(a, "name", "legacy"),
                            setattr(a, "legacy_json_value", '{"a":1}'))):
        make(event.debug_annotations.add())
    shape = event.debug_annotations.add()
    shape.name_iid = 3
    for key, value in (("rows", 8), ("cols", 1024)):
        entry = shape.dict_entries.add()
        entry.name, entry.int_value = key, value
    ids = event.debug_annotations.add()
    ids.name_iid = 4
    for value in ("a", "b"):
        ids.array_values.add().string_value = value
    nested = event.debug_annotations.add()
    nested.name = "nested"
    nested.nested_value.nested_type = nested.nested_value.DICT
    nested.nested_value.dict_keys.append("k")
    nested.nested_value.dict_values.add().int_value = 3

    packet = event_packet(builder, 1, 100)  # +1.1 ms: a child on the default track
    intern(packet, names=[(2, "parse")])
    packet.track_event.type, packet.track_event.name_iid = BEGIN, 2
    packet.track_event.flow_ids_old.append(9)
    packet = event_packet(builder, 1, 50)
    packet.track_event.type = END
    packet = event_packet(builder, 1, 50)  # +1.2 ms: an instant
    intern(packet, names=[(3, "mark")])
    packet.track_event.type, packet.track_event.name_iid = INSTANT, 3
    packet = event_packet(builder, 1, 0)  # +1.2 ms: a request begins on the named track
    intern(packet, names=[(4, "request")])
    event = packet.track_event
    event.type, event.name_iid, event.track_uuid = BEGIN, 4, REQUESTS
    event.terminating_flow_ids.append(7)
    for delta, value in ((0, 3), (100, 2)):  # queue depth, incremental: 3, then 5
        packet = event_packet(builder, 1, delta)
        packet.track_event.type, packet.track_event.track_uuid = COUNTER, QUEUE
        packet.track_event.counter_value = value
    packet = event_packet(builder, 1, 0)  # +1.3 ms: heap 2 KiB
    packet.track_event.type, packet.track_event.track_uuid = COUNTER, MEMORY
    packet.track_event.double_counter_value = 2.0
    packet = event_packet(builder, 1, 700)  # +2 ms: "handle" ends
    packet.track_event.type = END
    packet.track_event.extra_counter_values.append(900)

    # Sequence 2 (the io thread): iid 1 means something else here.
    start_sequence(builder, 2, IO)
    packet = event_packet(builder, 2, 1500)  # 2500 us on this clock: 1.5 ms after the snapshot
    intern(packet, names=[(1, "read")])
    packet.track_event.type, packet.track_event.name_iid = BEGIN, 1
    packet.track_event.terminating_flow_ids_old.append(9)
    packet = event_packet(builder, 2, 100)
    packet.track_event.type = END
    packet = event_packet(builder, 2, 900)  # 2.5 ms: ends the request begun on sequence 1
    packet.track_event.type, packet.track_event.track_uuid = END, REQUESTS
    packet = event_packet(builder, 2, 100)  # 2.6 ms: never ended
    intern(packet, names=[(2, "drain")])
    packet.track_event.type, packet.track_event.name_iid = BEGIN, 2

    # Sequence 1 again, after a reset: iid 1 is now "retry", the defaults are gone.
    packet = builder.add_packet()
    packet.trusted_packet_sequence_id = 1
    packet.sequence_flags = CLEARED
    packet.timestamp = BOOT_NS + 3_000_000  # BOOTTIME: the defaults were cleared
    intern(packet, names=[(1, "retry")])
    packet.track_event.type, packet.track_event.name_iid = INSTANT, 1
    packet.track_event.track_uuid = MAIN

    # Sequence 3 never cleared its state: its packet is skipped.
    packet = builder.add_packet()
    packet.trusted_packet_sequence_id = 3
    packet.sequence_flags = NEEDS_STATE
    packet.timestamp = BOOT_NS + 4_000_000
    packet.track_event.type, packet.track_event.name_iid = INSTANT, 1
    packet.track_event.track_uuid = MAIN
    return builder.serialize()


def sdk_plain_strings():
    builder = TraceProtoBuilder()
    process = descriptor(builder, 1, 7).process
    process.pid, process.process_name = 7, "script"
    thread = descriptor(builder, 2, 7, parent_uuid=1).thread
    thread.pid, thread.tid, thread.thread_name = 7, 8, "loop"
    descriptor(builder, 3, 7, name="global lane")
    counter = descriptor(builder, 4, 7, parent_uuid=1, name="temperature").counter
    counter.unit_name = "celsius"
    for ts, kind, name, track, extra in (
            (1000, BEGIN, "step", 2, None), (1100, BEGIN, "inner", 2, None),
            (1200, END, None, 2, None), (1300, END, None, 2, None),
            (1400, INSTANT, "tick", 3, None), (1500, BEGIN, "lane work", 3, None),
            (1600, END, None, 3, None), (1700, COUNTER, None, 4, 21.5)):
        packet = builder.add_packet()
        packet.trusted_packet_sequence_id = 7
        packet.timestamp = ts
        packet.track_event.type, packet.track_event.track_uuid = kind, track
        if name:
            packet.track_event.name = name
            packet.track_event.categories.append("demo")
        if extra is not None:
            packet.track_event.double_counter_value = extra
    return builder.serialize()


def main():
    folder = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    for name, build in (("sdk_track_events.pftrace", sdk_track_events),
                        ("sdk_plain_strings.pftrace", sdk_plain_strings)):
        with open(os.path.join(folder, name), "wb") as out:
            out.write(build())
        print(f"wrote {os.path.join(folder, name)}")


if __name__ == "__main__":
    main()
