"""`opsight run --merge stream` keeps what a merge in memory gives: the run is exported at
its end from the processes' files (the live exporter started late) and saved in the run
store as its merged file, with what the exports did in its run info (issue 28 item 3)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from conftest import require
from test_otel_settings import _Receiver, _span_count

PROGRAM = """
import subprocess, sys
import opsight
@opsight.trace
def work(n):
    return sum(range(n))
for i in range(50):
    work(100)
if len(sys.argv) == 1:
    subprocess.run([sys.executable, __file__, 'child'], check=True)
"""


def _run(tmp_path, merge: str, *arguments: str) -> tuple[subprocess.CompletedProcess, str]:
    program = tmp_path / "app.py"
    program.write_text(PROGRAM)
    output = tmp_path / f"{merge}.opsight"
    environment = {key: value for key, value in os.environ.items()
                   if not key.startswith(("OTEL_", "OPSIGHT_"))}
    done = subprocess.run([sys.executable, "-m", "opsight", "run", "--merge", merge,
                           "--report", "summary", "--store", str(tmp_path / "runs.db"),
                           "-o", str(output), *arguments, "--", sys.executable, str(program)],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path,
                          env=environment)
    return done, str(output)


def _stored(tmp_path) -> dict:
    shown = subprocess.run([sys.executable, "-m", "opsight", "show", "latest", "--store",
                            str(tmp_path / "runs.db"), "--format", "json"],
                           capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0, shown.stderr
    return json.loads(shown.stdout)["run"]


def _report(tmp_path, *arguments: str) -> str:
    from opsight._core_command import core_command_path

    environment = dict(os.environ, OPSIGHT_HOME=str(tmp_path))
    done = subprocess.run([core_command_path(), "report", *arguments], capture_output=True,
                          text=True, timeout=120, env=environment)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_streamed_merge_is_exported_from_the_files_and_saved_in_the_store(tmp_path):
    require("opentelemetry.proto")
    import opsight._native as native

    received = {}
    for merge in ("stream", "whole"):
        receiver = _Receiver()
        try:
            done, output = _run(tmp_path, merge, "--export", f"otlp={receiver.url}")
        finally:
            receiver.close()
        assert done.returncode == 0, done.stderr
        received[merge] = sum(_span_count(body) for _, body in receiver.requests)
        trace = native.read_trace(output)
        slices = trace.run_info()["slices"]
        assert received[merge] == slices, (merge, done.stderr)
        # What the export did is in the merged file's run info, as note_export puts it.
        exported = [line for line in trace.render("summary", "text", "total", 0, 0).splitlines()
                    if "exported" in line and receiver.url in line]
        assert exported, (merge, trace.render("summary", "text", "total", 0, 0))
        stored = _stored(tmp_path)
        assert stored["slices"] == slices, stored
        assert stored["name"] == "app.py", stored
        if merge == "stream":
            assert "merged streaming" in done.stderr, done.stderr
            assert "saved as run" in done.stderr, done.stderr
            assert "opsight summary" in done.stderr, done.stderr
            # The stored run reports streaming (its trace written to a hidden file first)
            # as it does read whole, and leaves no file behind.
            summaries = [_report(tmp_path, "latest", "--summary", "--stream", stream)
                         for stream in ("on", "off")]
            assert summaries[0] == summaries[1] and "work" in summaries[0], summaries
            traces = tmp_path / "runs.db.traces"
            assert not traces.exists() or not list(traces.glob(".reading-*"))
    # Two runs of the program: the same spans (2 processes, 50 calls each and their modules).
    assert received["stream"] == received["whole"] >= 100


def test_a_streamed_merge_whose_export_dropped_spans_exits_75_and_says_so(tmp_path):
    receiver = _Receiver(status=401)
    try:
        done, output = _run(tmp_path, "stream", "--export", f"otlp={receiver.url}")
    finally:
        receiver.close()
    assert done.returncode == 75, done.stderr
    assert "HTTP 401 Unauthorized" in done.stderr and "permanent" in done.stderr, done.stderr
    assert "merged streaming" in done.stderr, done.stderr
    assert os.path.getsize(output) > 0


def test_a_pushgateway_target_needs_the_trace_in_memory_and_says_so(tmp_path):
    receiver = _Receiver()
    try:
        done, _ = _run(tmp_path, "stream", "--export", f"pushgateway={receiver.url}")
    finally:
        receiver.close()
    assert done.returncode == 0, done.stderr
    assert ("--merge stream: pushgateway=" in done.stderr
            and "is sent from the trace in memory: the files are merged in memory"
            in done.stderr), done.stderr
    assert "merged streaming" not in done.stderr, done.stderr
    assert receiver.requests, "the Pushgateway got nothing"
