"""``opsight ctl``'s control directory against another local user (issue 14): a directory
someone else made first, or open to others, or a symlink, is refused with one warning and
the traced program runs on, uncontrollable; symlinks planted at the names a traced process
or ``opsight ctl`` write never make them overwrite the file they point at."""

from __future__ import annotations

import os
import subprocess
import time

import pytest

from conftest import OPSIGHT, PYTHON, clean_environment, run, spans_of, wait_for, write

PROGRAM = """
    import os, pathlib, time
    import opsight

    @opsight.trace
    def step():
        pass

    pathlib.Path("pid").write_text(str(os.getpid()))
    deadline = time.monotonic() + 30
    while not os.path.exists("stop") and time.monotonic() < deadline:
        step()
        time.sleep(0.002)
    print("enabled" if opsight.enabled() else "disabled")
"""


def start(tmp_path, control, command=None):
    write(tmp_path, "app.py", PROGRAM)
    return subprocess.Popen(
        command or [PYTHON, "app.py"], cwd=tmp_path, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
        env=clean_environment(OPSIGHT_OUTPUT="trace.opsight", OPSIGHT_CONTROL_DIR=str(control),
                              VICTIM=str(tmp_path / "victim")))


def finish(tmp_path, traced):
    (tmp_path / "stop").write_text("")
    stdout, stderr = traced.communicate(timeout=30)
    return stdout, stderr


def ctl(arguments, tmp_path, control, command=None):
    return run(command or [OPSIGHT, "ctl", *arguments], tmp_path,
               OPSIGHT_CONTROL_DIR=str(control), VICTIM=str(tmp_path / "victim"))


@pytest.mark.parametrize("attack", ["open to all", "symlink"])
def test_a_control_directory_others_can_use_is_refused_and_the_program_runs_on(tmp_path, attack):
    control = tmp_path / "control"
    if attack == "open to all":  # made first by another user, for everyone
        control.mkdir()
        control.chmod(0o777)
        planted_in, expected = control, f"control directory {control} has mode 0777"
    else:  # pointing at a directory the attacker reads
        planted_in = tmp_path / "elsewhere"
        planted_in.mkdir(mode=0o700)
        control.symlink_to(planted_in)
        expected = f"control directory {control} is a symbolic link"
    traced = start(tmp_path, control)
    try:
        assert wait_for(lambda: (tmp_path / "pid").exists()), "the program did not start"
        pid = int((tmp_path / "pid").read_text())
        (planted_in / f"{pid}.request").write_text("off")  # the attacker's request
        refused = ctl([str(pid), "off"], tmp_path, control)
        assert refused.returncode == 1
        assert f"process {pid} is not traced by opsight" in refused.stderr
        assert f"{expected}" in refused.stderr and "not used" in refused.stderr
        listed = ctl(["list"], tmp_path, control)
        assert listed.stdout == "no traced processes\n" and expected in listed.stderr
        time.sleep(0.4)  # ample time to obey the planted request (the watcher polls at 100 ms)
    finally:
        stdout, stderr = finish(tmp_path, traced)
    assert traced.returncode == 0, stderr
    assert stdout == "enabled\n"  # the planted request was never obeyed
    warnings = [line for line in stderr.splitlines() if line.startswith("opsight:")]
    assert len(warnings) == 1, stderr
    assert warnings[0].startswith(f"opsight: {expected}")
    assert "opsight ctl cannot switch the tracing of this process" in warnings[0]
    assert sorted(os.listdir(planted_in)) == [f"{pid}.request"]  # nothing published there
    assert (spans_of(tmp_path / "trace.opsight")["name"] == "step").sum() > 0  # still traced


def test_planted_symlinks_never_make_anyone_overwrite_the_file_they_point_at(tmp_path):
    control = tmp_path / "control"
    control.mkdir(mode=0o700)
    victim = tmp_path / "victim"
    victim.write_text("precious")
    # The shell plants symlinks at the names the process it becomes (exec keeps the pid)
    # will write: its state file, the temporary file written before the rename, and its
    # request file.
    plant_then_run = ['sh', '-c', 'cd control && ln -s "$VICTIM" $$.state && '
                      'ln -s "$VICTIM" $$.state.$$.tmp && ln -s "$VICTIM" $$.request && '
                      'cd .. && exec "$0" app.py', PYTHON]
    traced = start(tmp_path, control, plant_then_run)
    try:
        assert wait_for(lambda: (tmp_path / "pid").exists()), "the program did not start"
        pid = int((tmp_path / "pid").read_text())
        state = control / f"{pid}.state"
        assert wait_for(lambda: state.exists() and not state.is_symlink())
        assert state.read_text() == "on" and victim.read_text() == "precious"
        assert not (control / f"{pid}.request").exists()  # a stale request: removed

        (control / f"{pid}.state.{pid}.tmp").symlink_to(victim)  # again, before a switch
        switched = ctl([str(pid), "off"], tmp_path, control)
        assert (switched.returncode, switched.stdout) == (0, f"process {pid}: tracing off\n")
        assert state.read_text() == "off" and not state.is_symlink()
        # opsight ctl's own temporary request file, planted the same way
        ctl_plants = ['sh', '-c', f'ln -s "$VICTIM" control/{pid}.request.$$.tmp && '
                      f'exec "$0" ctl {pid} on', OPSIGHT]
        switched = ctl([], tmp_path, control, ctl_plants)
        assert (switched.returncode, switched.stdout) == (0, f"process {pid}: tracing on\n")
        assert state.read_text() == "on"
    finally:
        stdout, stderr = finish(tmp_path, traced)
    assert traced.returncode == 0, stderr
    assert stdout == "enabled\n"
    assert victim.read_text() == "precious"
    assert not [name for name in os.listdir(control) if name.startswith(f"{pid}.")]
    assert "opsight:" not in stderr
