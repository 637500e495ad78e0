"""The flight recorder from Python and from ``opsight run`` (docs/production.md): a ring of
the last events kept in memory, dumped by ``opsight.dump()``, an exception leaving a root
span, ``opsight ctl PID dump``, SIGUSR2, and at the end as the run's output; bad specs are
refused with a message that names them. (The ring's own bounds and the C++ triggers are
tested in src/record/ring_sink_test.cc and src/session/flight_recorder_test.cc.)"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import opsight
import opsight._native as _native
from opsight.exit_codes import USAGE_ERROR

from conftest import OPSIGHT, PYTHON, clean_environment, opsight_run, run, wait_for, write


def extra(path: str | Path) -> dict[str, str]:
    return dict(_native.read_trace(str(path)).run_info()["extra"])


def test_a_profile_with_a_ring_dumps_on_request_and_keeps_its_trace(tmp_path):
    @opsight.trace
    def serve(i):
        return i * 2

    with opsight.profile(ring="60s", dump_prefix=tmp_path / "svc") as profile:
        for i in range(20):
            serve(i)
        path = opsight.dump()
        assert path == str(tmp_path / "svc.dump-1.opsight")
        serve(99)
    dumped = extra(path)
    assert dumped["dump_trigger"] == "opsight.dump()"
    assert dumped["ring_dropped_events"] == "0"
    assert sum(row["count"] for row in profile.summary() if row["name"].endswith("serve")) == 21
    assert not (tmp_path / "svc.dump-2.opsight").exists()


def test_dump_without_a_ring_says_why(tmp_path):
    try:
        opsight.dump()
    except RuntimeError as error:
        assert "no recording session" in str(error)
    else:
        raise AssertionError("opsight.dump() without a session did not raise")
    with opsight.profile():
        try:
            opsight.dump()
        except RuntimeError as error:
            assert "no flight recorder" in str(error)
        else:
            raise AssertionError("opsight.dump() without a ring did not raise")


def test_an_exception_leaving_a_root_span_dumps(tmp_path):
    @opsight.trace
    def handle():
        raise ValueError("bad request")

    with opsight.profile(ring="30s", dump_prefix=tmp_path / "svc"):
        try:
            handle()
        except ValueError:
            pass
        assert wait_for(lambda: (tmp_path / "svc.dump-1.opsight").exists())
    trigger = extra(tmp_path / "svc.dump-1.opsight")["dump_trigger"]
    assert trigger.startswith("exception ValueError in "), trigger


def test_a_bad_ring_is_refused_where_it_is_given(tmp_path):
    try:
        opsight.profile(ring="sixty").start()
    except RuntimeError as error:
        assert "ring 'sixty'" in str(error)
    else:
        raise AssertionError("a bad ring was accepted")
    result = opsight_run(["--ring", "5x", "--no-store", "--", PYTHON, "-c", "pass"], tmp_path)
    assert result.returncode == USAGE_ERROR
    assert "ring '5x'" in result.stderr
    result = opsight_run(["--dump-on-slow", "f>1ms", "--no-store", "--", PYTHON, "-c", "pass"],
                         tmp_path)
    assert result.returncode == USAGE_ERROR
    assert "need --ring" in result.stderr
    result = opsight_run(["--ring", "60s", "--dump-on-slow", "f>1", "--no-store", "--",
                          PYTHON, "-c", "pass"], tmp_path)
    assert result.returncode == USAGE_ERROR
    assert "dump-on-slow rule 'f>1'" in result.stderr


SERVER = """
    import os, sys, time
    import opsight

    @opsight.trace
    def handle(i):
        time.sleep(0.001)
        return i

    open("pid", "w").write(str(os.getpid()))
    i = 0
    while not os.path.exists("stop"):
        handle(i)
        i += 1
    open("served", "w").write(str(i))
"""


def test_opsight_run_with_a_ring_dumps_on_ctl_and_on_sigusr2_and_at_the_end(tmp_path):
    write(tmp_path, "server.py", SERVER)
    process = subprocess.Popen(
        [OPSIGHT, "run", "--ring", "60s", "-o", "run.opsight", "--no-store", "--report",
         "summary", "--", PYTHON, "server.py"],
        cwd=tmp_path, env=clean_environment(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True)
    try:
        assert wait_for(lambda: (tmp_path / "pid").exists(), timeout=30)
        pid = int((tmp_path / "pid").read_text())
        time.sleep(0.3)
        ctl = run([OPSIGHT, "ctl", str(pid), "dump"], tmp_path)
        assert ctl.returncode == 0, ctl.stderr
        first = tmp_path / "run-dumps" / f"{pid}.dump-1.opsight"
        assert ctl.stdout.strip() == f"process {pid}: flight recorder dumped to {first}"
        assert extra(first)["dump_trigger"] == "opsight ctl dump"
        os.kill(pid, signal.SIGUSR2)
        second = tmp_path / "run-dumps" / f"{pid}.dump-2.opsight"
        assert wait_for(second.exists, timeout=10)
        assert extra(second)["dump_trigger"] == "SIGUSR2"
        assert not (tmp_path / "run.opsight").exists()  # nothing written until the end
        (tmp_path / "stop").write_text("")
        _, stderr = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0, stderr
    served = int((tmp_path / "served").read_text())
    final = extra(tmp_path / "run.opsight")
    assert final["dump_trigger"] == "session end"
    assert final["dumps_written"] == "2"
    assert "flight recorder (ring 60.000 s, 256 MiB)" in stderr
    assert "2 dump(s) in" in stderr
    report = run([OPSIGHT, "report", "run.opsight", "--summary", "--format", "json"], tmp_path)
    calls = sum(row["count"] for row in json.loads(report.stdout) if row["name"].endswith("handle"))
    assert calls == served  # a 60 s ring held the whole run
    assert "0 older events dropped, dumped on session end" in stderr
