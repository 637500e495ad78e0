"""Switching tracing off and on at run time: ``opsight.disable()``/``enable()`` from inside
(the originals are put back: ``module.func is original``), and ``opsight ctl PID off|on|status``
and ``opsight ctl list`` from outside, against a running traced program."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

import opsight
from opsight import _native
from opsight._capture import instrument
from opsight._capture.instrument import Instrumenter
from opsight.targets import parse_targets

from conftest import OPSIGHT, clean_environment, run, spans_of, wait_for, write


@opsight.trace
def decorated():
    return "decorated"


@pytest.fixture
def installed(fresh_modules):
    write(fresh_modules, "switchable.py", """
        def compute(x):
            return x + 1

        class Worker:
            def run(self):
                return "ran"

            @classmethod
            def make(cls):
                return cls()
    """)
    import switchable

    originals = (switchable.compute, vars(switchable.Worker)["run"],
                 vars(switchable.Worker)["make"])
    instrumenter = Instrumenter(parse_targets(
        "- {module: switchable, function: compute}\n"
        "- {module: switchable, class: Worker, function: '*'}\n", filename="t.yaml"))
    instrumenter.install()
    instrument.installed = instrumenter
    yield switchable, originals
    instrument.installed = None
    instrumenter.uninstall()


def test_disable_puts_the_originals_back_and_enable_reinstalls(installed):
    module, (compute, run_method, make) = installed
    wrapped = module.compute
    assert wrapped is not compute and wrapped.__wrapped__ is compute

    opsight.disable()
    assert not opsight.enabled()
    assert module.compute is compute
    assert vars(module.Worker)["run"] is run_method
    assert vars(module.Worker)["make"] is make
    with opsight.profile() as prof:
        assert module.compute(1) == 2
        assert module.Worker.make().run() == "ran"
        assert decorated() == "decorated"
    assert prof.dataframe().empty

    opsight.enable()
    assert opsight.enabled()
    assert module.compute is wrapped
    with opsight.profile() as prof:
        module.compute(1)
        module.Worker.make().run()
        decorated()
    assert sorted(prof.dataframe()["name"]) == ["Worker.make", "Worker.run", "compute",
                                                "decorated"]


def test_switching_twice_is_harmless(installed):
    module, (compute, _, _) = installed
    opsight.disable()
    opsight.disable()
    assert module.compute is compute
    opsight.enable()
    opsight.enable()
    assert module.compute.__wrapped__ is compute


def test_disable_while_recording_keeps_open_spans_whole(installed):
    module, _ = installed

    @opsight.trace
    def outer():
        opsight.disable()
        module.compute(1)  # unwrapped now: no span
        opsight.enable()
        return module.compute(2)

    with opsight.profile() as prof:
        assert outer() == 3
    frame = prof.dataframe().sort_values("start")
    assert list(frame["name"]) == [outer.__qualname__, "compute"]
    assert not frame["unfinished"].any()
    assert list(frame["depth"]) == [0, 1]


def test_native_switch_without_targets():
    _native.set_tracing_enabled(False)
    try:
        with opsight.profile() as prof:
            decorated()
    finally:
        _native.set_tracing_enabled(True)
    assert prof.dataframe().empty


# ---- from outside: opsight ctl ------------------------------------------------------------

PROGRAM = """
    import inspect, json, os, pathlib, sys, time
    import opsight
    import lib

    ORIGINAL = inspect.unwrap(lib.compute)
    assert ORIGINAL is not lib.compute, "the target was not wrapped"

    @opsight.trace
    def step():
        pass

    counts = {"wrapped": 0, "original": 0, "ambiguous": 0, "decorated on": 0,
              "decorated ambiguous": 0}
    seen = set()
    pathlib.Path("pid").write_text(str(os.getpid()))
    deadline = time.monotonic() + 30
    while not os.path.exists("stop") and time.monotonic() < deadline:
        before = lib.compute is ORIGINAL
        lib.compute(1)
        after = lib.compute is ORIGINAL
        key = "ambiguous" if before != after else ("original" if after else "wrapped")
        counts[key] += 1
        enabled_before = opsight.enabled()
        step()
        enabled_after = opsight.enabled()
        if enabled_before != enabled_after:
            counts["decorated ambiguous"] += 1
        elif enabled_after:
            counts["decorated on"] += 1
        state = "off" if after else "on"
        if state not in seen or counts[key] % 50 == 0:
            seen.add(state)
            pathlib.Path("observed.tmp").write_text(json.dumps([state, counts]))
            os.replace("observed.tmp", "observed")
        time.sleep(0.0005)
    print(json.dumps(counts))
"""


def observed(directory):
    try:
        return json.loads((directory / "observed").read_text())
    except (OSError, ValueError):
        return None


def ctl(arguments, directory, control):
    return run([OPSIGHT, "ctl", *arguments], directory, OPSIGHT_CONTROL_DIR=str(control))


def test_ctl_switches_a_running_program(tmp_path):
    control = tmp_path / "control"
    write(tmp_path, "app.py", PROGRAM)
    write(tmp_path, "lib.py", "def compute(x):\n    return x * 2\n")
    write(tmp_path, "targets.yaml", "- {module: lib, function: compute}\n")
    traced = subprocess.Popen(
        [OPSIGHT, "run", "-c", "targets.yaml", "-o", "run.opsight", "--report", "none", "--",
         "python", "app.py"], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, env=clean_environment(OPSIGHT_CONTROL_DIR=str(control)))
    try:
        assert wait_for(lambda: (tmp_path / "pid").exists() and observed(tmp_path)), \
            "the program did not start"
        pid = int((tmp_path / "pid").read_text())

        status = ctl([str(pid)], tmp_path, control)
        assert (status.returncode, status.stdout) == (0, f"process {pid}: tracing on\n")
        listed = ctl(["list"], tmp_path, control)
        assert f"{pid}\ton" in listed.stdout.splitlines()

        switched = ctl([str(pid), "off"], tmp_path, control)
        assert (switched.returncode, switched.stdout) == (0, f"process {pid}: tracing off\n")
        # the program sees its own function again, and keeps calling it
        assert wait_for(lambda: observed(tmp_path)[0] == "off"
                        and observed(tmp_path)[1]["original"] >= 20)
        assert ctl([str(pid), "status"], tmp_path, control).stdout.endswith("tracing off\n")
        assert f"{pid}\toff" in ctl(["list"], tmp_path, control).stdout

        switched = ctl([str(pid), "on"], tmp_path, control)
        assert (switched.returncode, switched.stdout) == (0, f"process {pid}: tracing on\n")
        wrapped_before = observed(tmp_path)[1]["wrapped"]
        assert wait_for(lambda: observed(tmp_path)[0] == "on"
                        and observed(tmp_path)[1]["wrapped"] >= wrapped_before + 20)
    finally:
        (tmp_path / "stop").write_text("")
        stdout, stderr = traced.communicate(timeout=30)
    assert traced.returncode == 0, stderr
    counts = json.loads(stdout)
    assert counts["original"] > 0 and counts["wrapped"] > 0
    frame = spans_of(tmp_path / "run.opsight")
    computes = int((frame["name"] == "compute").sum())
    steps = int((frame["name"] == "step").sum())
    # a span for every call made while wrapped, none for the calls made while switched off
    assert counts["wrapped"] <= computes <= counts["wrapped"] + counts["ambiguous"]
    assert counts["decorated on"] <= steps <= counts["decorated on"] + counts[
        "decorated ambiguous"]
    # the process cleaned up its control files on exit
    assert not (control / f"{pid}.state").exists()
    assert ctl([str(pid)], tmp_path, control).returncode == 1


def test_ctl_errors(tmp_path):
    control = tmp_path / "control"
    listed = ctl(["list"], tmp_path, control)
    assert (listed.returncode, listed.stdout) == (0, "no traced processes\n")

    untraced = ctl([str(os.getpid()), "off"], tmp_path, control)
    assert untraced.returncode == 1
    assert f"process {os.getpid()} is not traced by opsight" in untraced.stderr

    gone = ctl(["999999999", "on"], tmp_path, control)
    assert gone.returncode == 1 and "no process 999999999" in gone.stderr

    assert ctl(["abc", "on"], tmp_path, control).returncode == 64
    assert ctl([str(os.getpid()), "sideways"], tmp_path, control).returncode != 0
