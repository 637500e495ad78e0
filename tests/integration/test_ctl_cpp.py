"""`opsight ctl` switches a C++ program traced through OPSIGHT_OUTPUT: the core's control
watcher pauses and resumes its session, and the trace shows the gap. The CLI side is the
Python package's (`python -m opsight ctl`, with the interpreter running the tests)."""
import json
import os
import subprocess
import sys
import time

import opsight


def wait_for(predicate, timeout=20.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return predicate()


def test_ctl_switches_a_cpp_program_off_and_on_and_its_trace_shows_the_gap(build_program, tmp_path):
    program = build_program("opsight_switchable_loop")
    control = tmp_path / "control"
    output = tmp_path / "loop.opsight"
    progress_file = tmp_path / "progress"
    environment = {key: value for key, value in os.environ.items() if not key.startswith("OPSIGHT_")}
    environment.update(OPSIGHT_OUTPUT=str(output), OPSIGHT_CONTROL_DIR=str(control))

    def ctl(*arguments):
        return subprocess.run([sys.executable, "-m", "opsight", "ctl", *map(str, arguments)],
                              capture_output=True, text=True, timeout=60, env=environment)

    def progress():
        try:
            on, off = progress_file.read_text().split()
            return int(on), int(off)
        except (OSError, ValueError):
            return None

    traced = subprocess.Popen([str(program), str(tmp_path / "stop"), str(progress_file)],
                              env=environment, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True)
    pid = traced.pid
    try:
        assert wait_for(lambda: progress() is not None and progress()[0] >= 20), "it did not start"
        status = ctl(pid)
        assert (status.returncode, status.stdout) == (0, f"process {pid}: tracing on\n"), status.stderr
        assert f"{pid}\ton" in ctl("list").stdout.splitlines()

        switched = ctl(pid, "off")
        assert (switched.returncode, switched.stdout) == (0, f"process {pid}: tracing off\n")
        off_before = progress()[1]
        assert wait_for(lambda: progress()[1] >= off_before + 200)  # a stretch of spans unrecorded
        assert ctl(pid, "status").stdout == f"process {pid}: tracing off\n"

        # A C++ program counts no requests: a budget is refused, its state left alone.
        budget = ctl(pid, "requests", 5, "--timeout", 0.5)
        assert budget.returncode == 1 and "a C++ program cannot" in budget.stderr, budget.stderr
        assert ctl(pid, "status").stdout == f"process {pid}: tracing off\n"

        switched = ctl(pid, "on")
        assert (switched.returncode, switched.stdout) == (0, f"process {pid}: tracing on\n")
        on_before = progress()[0]
        assert wait_for(lambda: progress()[0] >= on_before + 40)
    finally:
        (tmp_path / "stop").write_text("")
        stdout, stderr = traced.communicate(timeout=60)
    assert traced.returncode == 0, stderr
    assert "opsight:" not in stderr
    counts = json.loads(stdout)
    assert counts["on"] > 0 and counts["off"] >= 200

    steps = sorted(start for _, start, _ in opsight.load(output).trace.slice_times("step"))
    # a span for every iteration made while recording, none for those made while off
    assert counts["on"] <= len(steps) <= counts["on"] + counts["straddled"]
    largest_gap = max(later - earlier for earlier, later in zip(steps, steps[1:]))
    assert largest_gap >= counts["longest_off_ns"] >= 199 * 500_000  # 200 iterations, 0.5 ms apart
    # the watcher cleaned up at exit
    assert not (control / f"{pid}.state").exists()
    assert ctl(pid).returncode == 1
