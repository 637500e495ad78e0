"""`opsight export ... --to loki=URL` against a real store that speaks Loki's push API:
VictoriaLogs (real_servers.py; Grafana Loki itself is AGPL and not used). The entries are
queried back with LogsQL and compared with the trace the test wrote (export_sample.py):
one entry per span, its time the span's start to the nanosecond, its labels (service_name,
span_name, status) and every field of its JSON line (ids, parent, kind, pid, duration,
error, typed attributes)."""

from __future__ import annotations

import calendar
import json
import subprocess
import sys
import time

import pytest

import export_sample
from real_servers import victorialogs_server  # noqa: F401 (fixture)

SERVICE = "inference"


def unix_ns(rfc3339: str) -> int:
    """'2026-11-25T16:57:41.0082005Z' -> Unix nanoseconds, exactly (datetime keeps µs)."""
    seconds, _, fraction = rfc3339.rstrip("Z").partition(".")
    whole = time.strptime(seconds, "%Y-%m-%dT%H:%M:%S")
    return calendar.timegm(whole) * 10**9 + int((fraction + "000000000")[:9])


def expected_fields(want: dict) -> dict[str, str]:
    """The fields VictoriaLogs makes of the span's JSON line: nested keys joined by dots,
    every value as text, the span name moved to _msg (the URL's _msg_field=name)."""
    def text(value):
        return json.dumps(value) if isinstance(value, bool) else str(value)

    fields = {"trace_id": want["trace"], "span_id": want["span_id"],
              "pid": str(want["pid"]),
              "duration_ns": str(want["end_unix_ns"] - want["start_unix_ns"])}
    if want["parent"]:
        fields["parent_span_id"] = want["parent"]
    if want["kind"] != "internal":
        fields["kind"] = want["kind"]
    if want["error"]:
        fields["error"] = want["error"]
    for key, value in want["attributes"].items():
        fields[f"attributes.{key}"] = text(value)
    fields.update(service_name=SERVICE, span_name=want["name"],
                  status="error" if want["error"] else "ok")
    return fields


@pytest.fixture()
def sample(tmp_path):
    offset = export_sample.recent_unix_offset_ns()
    return (export_sample.write(tmp_path / "sample.json", offset),
            export_sample.expected_spans(offset, SERVICE))


def test_one_line_per_span_with_its_labels_time_and_fields(opsight_cli, victorialogs_server,
                                                           sample):
    trace, expected = sample
    url = f"{victorialogs_server.loki_push_url}?_msg_field=name"
    done = opsight_cli("export", trace, "--to", f"loki={url}", "--service", SERVICE,
                       "--batch-size", "4", "--format", "json", timeout=60)
    assert done.returncode == 0, done.stderr
    report, = json.loads(done.stdout)
    assert report["target"] == f"loki {url}"
    assert (report["spans"], report["sent"], report["dropped"], report["requests"]) == (6, 6, 0, 2)

    request_trace = expected["00000000000000a1"]["trace"]  # the request's, and its 3 children's
    entries = victorialogs_server.wait_for(f'trace_id:"{request_trace}"', count=4)
    for root in ("00000000000000b1", "00000000000000c1"):  # the two other roots: a trace each
        entries += victorialogs_server.wait_for(f'trace_id:"{expected[root]["trace"]}"', count=1)
    assert len(entries) == 6
    by_span = {entry["span_id"]: entry for entry in entries}
    assert set(by_span) == set(expected)
    for span_id, want in expected.items():
        entry = dict(by_span[span_id])
        assert entry.pop("_msg") == want["name"]
        assert unix_ns(entry.pop("_time")) == want["start_unix_ns"], want["name"]
        stream = entry.pop("_stream")
        assert f'status="{"error" if want["error"] else "ok"}"' in stream
        entry.pop("_stream_id")
        assert entry == expected_fields(want), want["name"]

    # The labels are stream fields, as LogsQL's stream filters and Loki's selectors use them.
    errors = victorialogs_server.query(f'{{service_name="{SERVICE}",status="error"}}')
    assert [entry["_msg"] for entry in errors] == ["postprocess"]
    requests = victorialogs_server.query('{span_name="request"} | fields duration_ns, kind')
    assert requests == [{"duration_ns": "9000123", "kind": "server"}]


def test_spans_stream_to_the_log_store_while_the_program_runs(victorialogs_server, tmp_path):
    """`opsight run --export-live --export loki=...`: lines arrive while the program still
    runs, and in the end every span of the run's file is there once."""
    script = tmp_path / "streamed.py"
    script.write_text(export_sample.LIVE_PROGRAM)
    output = tmp_path / "streamed.opsight"
    run = subprocess.Popen(
        [sys.executable, "-m", "opsight", "run", "--no-store", "--report", "none", "-o",
         str(output), "--export-live", "--export",
         f"loki={victorialogs_server.loki_push_url}?_msg_field=name", "--service", "live-logs",
         "--", sys.executable, str(script), str(tmp_path / "release")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert run.stdout.readline() == "done\n"
        victorialogs_server.wait_for('{service_name="live-logs",span_name="step"}', count=1,
                                     timeout=30)
        assert run.poll() is None
    finally:
        (tmp_path / "release").touch()
        _, stderr = run.communicate(timeout=60)
    assert run.returncode == 0, stderr
    assert "dropped" not in stderr, stderr

    import opsight
    trace = opsight.load(output).trace
    expected = set(trace.slice_columns()["span_id"])
    entries = victorialogs_server.wait_for('{service_name="live-logs"}', count=len(expected))
    assert sorted(entry["span_id"] for entry in entries) == sorted(expected)
    columns = trace.slice_columns()  # each line in its span's trace, as the file gives it
    assert {entry["span_id"]: entry["trace_id"] for entry in entries} == dict(
        zip(columns["span_id"], columns["trace_id"]))
    assert sorted(entry["_msg"] for entry in entries if entry["_msg"] != "step") == [
        "after release", "warm-up"]
