"""Perfetto protobuf output (``.pftrace``), decoded with Perfetto's own message classes.

The ``perfetto`` package on PyPI (pinned in requirements/test.txt) ships
``perfetto_trace_pb2``, generated from Perfetto's trace protos: parsing the files opsight
writes with it checks every field number and wire type against the published format (a
field written with a wrong number or type would come back unknown, which the tests refuse),
and the assertions check what the fields say. Perfetto's ``TraceProcessor`` is not used: it
downloads its binary at run time.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading

import pytest

from conftest import OPSIGHT, clean_environment, require

require("perfetto")

import opsight  # noqa: E402  (after the skip)
from opsight import _native  # noqa: E402
from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as perfetto_trace  # noqa: E402

TrackEvent = perfetto_trace.TrackEvent
MONOTONIC = perfetto_trace.BuiltinClock.Value("BUILTIN_CLOCK_MONOTONIC")


def assert_no_unknown_fields(message, where="Trace"):
    """Every field opsight wrote is one the message declares, with its wire type."""
    from google.protobuf import unknown_fields

    unknown = unknown_fields.UnknownFieldSet(message)
    assert len(unknown) == 0, f"{where}: unknown fields {[f.field_number for f in unknown]}"
    for field, value in message.ListFields():
        if field.message_type is None:
            continue
        values = value if field.is_repeated else [value]
        for index, item in enumerate(values):
            assert_no_unknown_fields(item, f"{where}.{field.name}[{index}]")


class Decoded:
    """A .pftrace parsed with Perfetto's classes: descriptors by uuid, interned strings
    resolved, and every track event with its packet's timestamp."""

    def __init__(self, data: bytes) -> None:
        self.trace = perfetto_trace.Trace()
        self.trace.ParseFromString(data)
        assert_no_unknown_fields(self.trace)
        self.tracks = {}
        self.events = []  # (timestamp, TrackEvent, resolved name)
        names, categories, annotation_names, strings = {}, {}, {}, {}
        for packet in self.trace.packet:
            assert packet.trusted_packet_sequence_id == 1
            if packet.HasField("track_descriptor"):
                descriptor = packet.track_descriptor
                assert descriptor.uuid not in self.tracks
                self.tracks[descriptor.uuid] = descriptor
            if packet.HasField("interned_data"):
                interned = packet.interned_data
                for table, entries in ((names, interned.event_names),
                                       (categories, interned.event_categories),
                                       (annotation_names, interned.debug_annotation_names)):
                    for entry in entries:
                        assert entry.iid not in table, f"iid {entry.iid} sent twice"
                        table[entry.iid] = entry.name
                for entry in interned.debug_annotation_string_values:
                    strings[entry.iid] = entry.str.decode()
            if packet.HasField("track_event"):
                assert packet.sequence_flags == packet.SEQ_NEEDS_INCREMENTAL_STATE
                event = packet.track_event
                name = names[event.name_iid] if event.HasField("name_iid") else None
                args = {}
                for annotation in event.debug_annotations:
                    kind = annotation.WhichOneof("value")
                    value = (strings[annotation.string_value_iid] if kind == "string_value_iid"
                             else getattr(annotation, kind))
                    args[annotation_names[annotation.name_iid]] = value
                self.events.append((packet.timestamp, event, name,
                                    [categories[i] for i in event.category_iids], args))
        self.names = names

    def track(self, predicate):
        found = [track for track in self.tracks.values() if predicate(track)]
        assert len(found) == 1, found
        return found[0]

    def on_track(self, uuid):
        return [(ts, event, name, categories, args)
                for ts, event, name, categories, args in self.events if event.track_uuid == uuid]


@opsight.trace
def work(n=1):
    return sum(range(n))


def test_profile_writes_typed_tracks_slices_args_instants_and_counters(tmp_path):
    path = tmp_path / "run.pftrace"
    with opsight.profile(str(path)) as prof:
        with prof.record("outer", batch=4, ratio=0.5, stage="warm", cached=True):
            work()
            work()
        _native.instant("marker")
        _native.counter("queue_depth", 3.0)
        _native.counter("queue_depth", 5.0)
    assert not os.path.exists(str(path) + ".opsight.tmp")  # the native stream was converted
    assert sorted(prof.dataframe()["name"]) == ["outer", "work", "work"]  # kept in memory too

    decoded = Decoded(path.read_bytes())
    first = decoded.trace.packet[0]
    assert first.sequence_flags == first.SEQ_INCREMENTAL_STATE_CLEARED
    assert first.trace_packet_defaults.timestamp_clock_id == MONOTONIC
    snapshots = [p.clock_snapshot for p in decoded.trace.packet if p.HasField("clock_snapshot")]
    assert len(snapshots) == 1 and snapshots[0].primary_trace_clock == MONOTONIC

    process = decoded.track(lambda t: t.HasField("process") and t.process.pid == os.getpid())
    thread = decoded.track(lambda t: t.HasField("thread")
                           and t.thread.tid == threading.get_native_id())
    assert thread.thread.pid == os.getpid()
    assert thread.parent_uuid == process.uuid

    events = decoded.on_track(thread.uuid)
    kinds = [(TrackEvent.Type.Name(event.type), name) for _, event, name, _, _ in events]
    assert kinds[:6] == [("TYPE_SLICE_BEGIN", "outer"), ("TYPE_SLICE_BEGIN", "work"),
                         ("TYPE_SLICE_END", None), ("TYPE_SLICE_BEGIN", "work"),
                         ("TYPE_SLICE_END", None), ("TYPE_SLICE_END", None)]
    times = [ts for ts, *_ in events[:6]]
    assert times == sorted(times) and times[0] < times[-1]
    outer = events[0]
    assert outer[3] == ["record"]
    assert outer[4] == {"batch": 4, "ratio": 0.5, "stage": "warm", "cached": True}
    assert list(decoded.names.values()).count("work") == 1  # interned once, used twice

    instants = [(event.track_uuid, name) for _, event, name, _, _ in decoded.events
                if event.type == TrackEvent.TYPE_INSTANT]
    assert instants == [(thread.uuid, "marker")]

    counter = decoded.track(lambda t: t.HasField("counter") and t.name == "queue_depth")
    assert counter.parent_uuid == process.uuid
    values = [event.double_counter_value for _, event, *_ in decoded.on_track(counter.uuid)]
    assert values == [3.0, 5.0]
    assert all(event.type == TrackEvent.TYPE_COUNTER for _, event, *_ in
               decoded.on_track(counter.uuid))


def test_flows_and_async_spans_recorded_from_python(tmp_path):
    path = tmp_path / "flows.pftrace"
    handed = {}

    def consumer():
        with opsight.span("consume"):
            opsight.flow_in(handed["id"])
            opsight.end_async(77)

    with opsight.profile(str(path)):
        with opsight.span("produce"):
            handed["id"] = opsight.flow_out()
            opsight.begin_async("queued", 77)
        worker = threading.Thread(target=consumer)
        worker.start()
        worker.join()
    decoded = Decoded(path.read_bytes())

    begins = {name: event for _, event, name, _, _ in decoded.events
              if event.type == TrackEvent.TYPE_SLICE_BEGIN}
    produce, consume = begins["produce"], begins["consume"]
    assert produce.track_uuid != consume.track_uuid  # two threads
    assert len(produce.flow_ids) == 1
    assert list(consume.terminating_flow_ids) == list(produce.flow_ids)

    process = decoded.track(lambda t: t.HasField("process") and t.process.pid == os.getpid())
    queued = begins["queued"]
    track = decoded.tracks[queued.track_uuid]
    assert not track.HasField("thread") and not track.HasField("counter")
    assert track.name and track.parent_uuid == process.uuid
    ends = [ts for ts, event, *_ in decoded.on_track(track.uuid)
            if event.type == TrackEvent.TYPE_SLICE_END]
    assert len(ends) == 1


def chrome_trace_with_flows(path):
    """Two named processes, a named thread, a counter with two series and a flow from a
    request to its handler."""
    events = [
        {"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "client"}},
        {"ph": "M", "name": "process_name", "pid": 2, "args": {"name": "server"}},
        {"ph": "M", "name": "thread_name", "pid": 2, "tid": 20, "args": {"name": "handler"}},
        {"ph": "X", "name": "request", "cat": "rpc", "pid": 1, "tid": 10, "ts": 10, "dur": 100,
         "args": {"size": 512}},
        {"ph": "X", "name": "handle", "cat": "rpc", "pid": 2, "tid": 20, "ts": 40, "dur": 50},
        {"ph": "s", "name": "call", "cat": "rpc", "id": 7, "pid": 1, "tid": 10, "ts": 20},
        {"ph": "f", "bp": "e", "name": "call", "cat": "rpc", "id": 7, "pid": 2, "tid": 20,
         "ts": 50},
        {"ph": "C", "name": "memory", "pid": 2, "ts": 40, "args": {"heap": 100, "stack": 8}},
    ]
    path.write_text(json.dumps({"traceEvents": events}))


def test_convert_from_chrome_json_keeps_processes_counters_and_flows(tmp_path):
    source = tmp_path / "in.json"
    chrome_trace_with_flows(source)
    output = tmp_path / "out.pftrace"
    done = subprocess.run([OPSIGHT, "convert", str(source), str(output)], env=clean_environment(),
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    decoded = Decoded(output.read_bytes())

    client = decoded.track(lambda t: t.HasField("process") and t.process.pid == 1)
    server = decoded.track(lambda t: t.HasField("process") and t.process.pid == 2)
    assert (client.process.process_name, server.process.process_name) == ("client", "server")
    handler = decoded.track(lambda t: t.HasField("thread") and t.thread.tid == 20)
    assert handler.thread.thread_name == "handler"
    assert handler.parent_uuid == server.uuid

    series = {t.name: t for t in decoded.tracks.values() if t.HasField("counter")}
    assert sorted(series) == ["memory heap", "memory stack"]
    heap_track = next(track for name, track in series.items() if name.endswith("heap"))
    assert heap_track.parent_uuid == server.uuid
    heap = [event.double_counter_value for _, event, *_ in decoded.on_track(heap_track.uuid)]
    assert heap == [100.0]

    begins = {name: event for _, event, name, _, _ in decoded.events
              if event.type == TrackEvent.TYPE_SLICE_BEGIN}
    request, handle = begins["request"], begins["handle"]
    assert [a.int_value for a in request.debug_annotations] == [512]
    assert len(request.flow_ids) == 1
    assert list(handle.terminating_flow_ids) == list(request.flow_ids)


def test_perfetto_files_are_read_back(tmp_path):
    """A .pftrace opsight wrote reads back (src/io/perfetto/perfetto_reader.cc)."""
    path = tmp_path / "run.pftrace"
    with opsight.profile(str(path)):
        work()
    info = _native.read_trace(str(path)).run_info()
    assert info["source_format"] == "perfetto"
    assert info["slices"] > 0
    assert info["complete"]
