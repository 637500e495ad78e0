"""A recording killed with SIGKILL has no time index: ``opsight index FILE`` appends one in
place, after which ``opsight report --window`` and ``opsight.load(path, window=...)`` read
only the chunks the window needs (docs/native-format.md, "Time index")."""

from __future__ import annotations

import json
import signal

import pytest

import opsight
from conftest import OPSIGHT, PYTHON, run, write

# Traced calls for about a second (so the stream writer hands many chunks to the file),
# then a pause for the writer, then SIGKILL: no footer, no index.
KILLED = """
    import os, signal, time
    import opsight

    @opsight.trace
    def step(n):
        return n + 1

    @opsight.trace
    def batch(n):
        return sum(step(i) for i in range(n))

    end = time.monotonic() + 1.0
    while time.monotonic() < end:
        batch(200)
    time.sleep(0.5)
    os.kill(os.getpid(), signal.SIGKILL)
"""


@pytest.fixture(scope="module")
def killed(tmp_path_factory):
    directory = tmp_path_factory.mktemp("killed")
    write(directory, "app.py", KILLED)
    completed = run([PYTHON, "app.py"], directory, OPSIGHT_OUTPUT="killed.opsight")
    assert completed.returncode == -signal.SIGKILL, completed.stderr
    path = directory / "killed.opsight"
    assert path.stat().st_size > 256 * 1024, "the recording must span several chunks"
    return path


def summary_rows(path, *window):
    done = run([OPSIGHT, "report", str(path), *window, "--summary", "--format", "json"],
               path.parent)
    assert done.returncode in (0, 2), done.stderr  # 2: the kill cut the file
    return {row["name"]: row for row in json.loads(done.stdout)}, done.stderr


def test_index_a_killed_recording_then_read_a_window(killed):
    whole, _ = summary_rows(killed)
    before, scanned = summary_rows(killed, "--window", "100ms:150ms")
    assert "no usable time index (rebuilt by a scan" in scanned, scanned
    size = killed.stat().st_size
    original = killed.read_bytes()

    done = run([OPSIGHT, "index", str(killed)], killed.parent)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"{killed}: indexed "), done.stdout
    appended = int(done.stdout.split("appended ")[1].split()[0])
    assert killed.stat().st_size == size + appended
    assert killed.read_bytes()[:size] == original  # the old bytes are never touched

    after, note = summary_rows(killed, "--window", "100ms:150ms")
    assert "no usable time index" not in note, note
    assert after == before  # the same window, read through the index instead of a scan
    assert 0 < after["step"]["count"] < whole["step"]["count"]

    # A second run refuses, naming the file, and appends nothing.
    again = run([OPSIGHT, "index", str(killed)], killed.parent)
    assert again.returncode == 1
    assert str(killed) in again.stderr and "already has a time index" in again.stderr
    assert killed.stat().st_size == size + appended

    # Python: the same window, through the index, decoding only some of the chunks.
    part = opsight.load(killed, window="100ms:150ms")
    extra = part.trace.run_info()["extra"]
    assert extra["native_index"] == "read", extra
    chunks_read = int(extra["window_chunks_read"])
    frame = part.dataframe()
    assert (frame["name"] == "step").sum() == after["step"]["count"]
    same = opsight.load(killed, start="100ms", end="150ms")
    assert len(same.dataframe()) == len(frame)
    total = opsight.load(killed).dataframe()
    assert len(frame) < len(total)
    indexed = int(done.stdout.split("(")[1].split()[0])  # "(N of events)"
    assert 0 < chunks_read < indexed, (chunks_read, indexed)


def test_index_refuses_what_it_cannot_index(tmp_path):
    write(tmp_path, "t.json", '{"traceEvents": []}')
    done = run([OPSIGHT, "index", "t.json"], tmp_path)
    assert done.returncode == 1
    assert "t.json: not an .opsight file" in done.stderr, done.stderr
    done = run([OPSIGHT, "index", "absent.opsight"], tmp_path)
    assert done.returncode == 1 and "absent.opsight: cannot open" in done.stderr
    assert "index" in run([OPSIGHT, "--help"], tmp_path).stdout


def test_load_window_takes_the_core_parser(killed):
    with pytest.raises(ValueError, match=r"window=3s:2s: the end comes before the start"):
        opsight.load(killed, window="3s:2s")
    with pytest.raises(ValueError, match="needs a unit"):
        opsight.load(killed, window="1:2s")
    with pytest.raises(ValueError, match="go together"):
        opsight.load(killed, start="1s")
