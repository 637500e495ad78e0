"""A trace whose every exported field the test knows in advance, for the export tests
against real servers (test_export_kafka.py, test_export_loki.py).

It is written as opsight's own Chrome JSON (``otherData`` with ``writer: opsight``: the run's
trace id, its Unix offset and time base; ``opsight.span_id`` / ``opsight.parent_span_id`` in
each slice's args), so that the test, not opsight, chooses the ids and the times: two
processes, nested spans on two threads, a server span, typed attributes, an exception, and
names that need escaping. ``expected_spans()`` says what every exporter must carry for each
span: ids, parent, start and end in Unix nanoseconds, kind, status, attributes, resource.
"""

from __future__ import annotations

import json
import pathlib
import time
from typing import Any

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
TIME_BASE_NS = 5_000_000_000
HOST = "export-test-host"
COMMAND_LINE = "/usr/bin/python3 serve.py --port 8000"
SERVER_PID, WORKER_PID = 4242, 4343
DECODER_TID = 4244

# name, pid, tid, span id, parent span id, start (after the time base) and duration in ns, args
SPANS: list[dict[str, Any]] = [
    dict(name="request", pid=SERVER_PID, tid=SERVER_PID, span_id="00000000000000a1", parent=None,
         ts_ns=0, dur_ns=9_000_123,
         args={"span.kind": "server", "http.route": "/predict", "batch": 8, "ratio": 0.25,
               "cached": True}),
    dict(name="preprocess", pid=SERVER_PID, tid=SERVER_PID, span_id="00000000000000a2",
         parent="00000000000000a1", ts_ns=10_001, dur_ns=1_000_500,
         args={"shape": "[4, 64]"}),
    dict(name="forward", pid=SERVER_PID, tid=SERVER_PID, span_id="00000000000000a3",
         parent="00000000000000a1", ts_ns=1_100_002, dur_ns=7_000_007,
         args={"layers": 12}),
    dict(name="postprocess", pid=SERVER_PID, tid=SERVER_PID, span_id="00000000000000a4",
         parent="00000000000000a1", ts_ns=8_200_500, dur_ns=700_250,
         args={"exception.type": "ValueError", "exception.message": 'bad "input"\n'}),
    dict(name="decode", pid=SERVER_PID, tid=DECODER_TID, span_id="00000000000000c1",
         parent=None, ts_ns=300_000, dur_ns=4_000_000, args={"tokens": 128}),
    dict(name='tokenize ✓ "quoted"', pid=WORKER_PID, tid=WORKER_PID, span_id="00000000000000b1",
         parent=None, ts_ns=50_075, dur_ns=20_001, args={"text": "naïve \\ back"}),
]
THREAD_NAMES = {(SERVER_PID, SERVER_PID): "main", (SERVER_PID, DECODER_TID): "decoder",
                (WORKER_PID, WORKER_PID): "tokenizer"}
PROCESS_NAMES = {SERVER_PID: "server", WORKER_PID: "worker"}


def write(path: pathlib.Path, unix_offset_ns: int) -> pathlib.Path:
    """Writes the trace; its spans start ``unix_offset_ns + TIME_BASE_NS`` after the epoch."""
    events: list[dict[str, Any]] = []
    for pid, name in PROCESS_NAMES.items():
        events.append({"ph": "M", "name": "process_name", "pid": pid, "tid": 0,
                       "args": {"name": name}})
    for (pid, tid), name in THREAD_NAMES.items():
        events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid,
                       "args": {"name": name}})
    for span in SPANS:
        args = {"opsight.span_id": span["span_id"], **span["args"]}
        if span["parent"]:
            args["opsight.parent_span_id"] = span["parent"]
        events.append({"ph": "X", "pid": span["pid"], "tid": span["tid"], "name": span["name"],
                       # µs with three decimals: a double's shortest form, read back exactly
                       "ts": span["ts_ns"] / 1000, "dur": span["dur_ns"] / 1000,
                       "args": args})
    document = {
        "traceEvents": events, "displayTimeUnit": "ns",
        "otherData": {"writer": "opsight", "source_format": "opsight",
                      "command_line": COMMAND_LINE, "host": HOST, "trace_id": TRACE_ID,
                      "pid": SERVER_PID, "time_base_ns": TIME_BASE_NS,
                      "unix_offset_ns": unix_offset_ns, "complete": True}}
    path.write_text(json.dumps(document, ensure_ascii=False), encoding="utf-8")
    return path


def recent_unix_offset_ns() -> int:
    """An offset that puts the spans an hour ago (log stores keep recent entries)."""
    return (time.time_ns() - 3600 * 10**9) // 10**9 * 10**9 - TIME_BASE_NS


_MASK64 = (1 << 64) - 1


def _mix64(value: int) -> int:
    """The splitmix64 finaliser (trace::mix64)."""
    value = (value + 0x9E3779B97F4A7C15) & _MASK64
    value = ((value ^ (value >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    value = ((value ^ (value >> 27)) * 0x94D049BB133111EB) & _MASK64
    return value ^ (value >> 31)


def root_trace_id(span_id_hex: str) -> str:
    """The trace a root span that joined none is exported in, derived from its span id as
    docs/export.md ("Traces per root span") says, computed here on the test's side."""
    span_id = int(span_id_hex, 16)
    return f"{_mix64(span_id ^ 0x6F70736967687421):016x}{_mix64(span_id):016x}"


def trace_of(span_id_hex: str) -> str:
    """The trace of a span of SPANS: its root's own (the sample joins no trace)."""
    by_id = {span["span_id"]: span for span in SPANS}
    while by_id[span_id_hex]["parent"]:
        span_id_hex = by_id[span_id_hex]["parent"]
    return root_trace_id(span_id_hex)


def expected_spans(unix_offset_ns: int, service: str) -> dict[str, dict[str, Any]]:
    """By span id: what every exporter must carry for the span."""
    out = {}
    for span in SPANS:
        start = unix_offset_ns + TIME_BASE_NS + span["ts_ns"]
        args = dict(span["args"])
        kind = args.pop("span.kind", "internal")
        exception_type = args.pop("exception.type", None)
        exception_message = args.pop("exception.message", None)
        attributes = {**args, "thread.id": span["tid"],
                      "thread.name": THREAD_NAMES[(span["pid"], span["tid"])]}
        resource = {"service.name": service, "host.name": HOST, "process.pid": span["pid"],
                    "telemetry.sdk.name": "opsight", "telemetry.sdk.language": "cpp"}
        if span["pid"] == SERVER_PID:
            resource["process.command_line"] = COMMAND_LINE
        out[span["span_id"]] = {
            "name": span["name"], "span_id": span["span_id"], "parent": span["parent"],
            "trace": trace_of(span["span_id"]),
            "pid": span["pid"], "start_unix_ns": start,
            "end_unix_ns": start + span["dur_ns"], "kind": kind,
            "error": (f"{exception_type}: {exception_message}" if exception_type else None),
            "exception": ({"exception.type": exception_type,
                           "exception.message": exception_message} if exception_type else None),
            "attributes": attributes, "resource": resource,
        }
    return out


#: A program for `opsight run --export-live`: 31 spans, "done" on stdout, then it waits for
#: the file named by its argument (the test's release) before a last span.
LIVE_PROGRAM = """\
import os, sys, time
import opsight
with opsight.span("warm-up"):
    for i in range(30):
        with opsight.span("step", index=i):
            time.sleep(0.001)
print("done", flush=True)
deadline = time.monotonic() + 60  # running until the test has seen the first spans
while not os.path.exists(sys.argv[1]) and time.monotonic() < deadline:
    time.sleep(0.05)
with opsight.span("after release"):
    pass
"""
