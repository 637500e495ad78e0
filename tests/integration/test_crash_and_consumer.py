"""A recording process killed with SIGKILL leaves a readable file; an installed opsight
works for a CMake consumer through find_package."""
import json
import os
import pathlib
import re
import shutil
import signal
import subprocess
import threading
import time

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


def run_then_kill(program, env, outer_spans, linger_s):
    """Runs the victim until it reports `outer_spans` finished (or 30 s pass), lets it run
    `linger_s` more, then SIGKILLs it. Returns the last count it printed."""
    victim = subprocess.Popen([str(program)], env=env, stdout=subprocess.PIPE, text=True)
    try:
        finished = 0
        deadline = time.monotonic() + 30
        while finished < outer_spans and time.monotonic() < deadline:
            line = victim.stdout.readline()
            if line:
                finished = int(line)
        time.sleep(linger_s)
    finally:
        victim.send_signal(signal.SIGKILL)
        victim.wait(timeout=10)
    assert victim.returncode == -signal.SIGKILL
    return finished


def test_sigkill_leaves_a_file_readable_up_to_its_last_whole_chunk(opsight_cli, build_program, tmp_path):
    program = build_program("opsight_record_until_killed")
    output = tmp_path / "killed.opsight"
    env = dict(os.environ, OPSIGHT_OUTPUT=str(output))
    finished = run_then_kill(program, env, outer_spans=200, linger_s=0.3)  # several flushes
    assert finished >= 200

    result = opsight_cli("report", output, "--summary", "--format", "json")
    assert result.returncode == 2, result.stderr  # damaged: no end, but readable
    assert str(output) in result.stderr and re.search(r"at byte \d+", result.stderr)
    rows = {row["name"]: row for row in json.loads(result.stdout)}
    tree = opsight_cli("report", output, "--tree", "--max-roots", "2", "--format", "json")
    assert tree.returncode == 2 and tree.stdout.count('"outer"') >= 1
    # On a busy machine the writer can fall behind and the memory bound makes the threads
    # drop events; the file must say so even though the footer never came (kDropsSoFar).
    dropped = json.loads(tree.stdout)["events_dropped"]
    # Every outer span finished before the last flush is there, each with its 100 inners;
    # the last one may have been cut by the kill (kept, flagged unfinished, fewer inners).
    # Each dropped event can cost at most one span.
    assert rows["outer"]["count"] >= finished - 50 - dropped
    expected_inner_low = 100 * (rows["outer"]["count"] - 1) - dropped
    expected_inner_high = 100 * rows["outer"]["count"] + dropped
    assert expected_inner_low <= rows["inner"]["count"] <= expected_inner_high, (dropped, rows)
    assert rows["worker_step"]["count"] > 0
    assert rows["inner"]["min_ns"] >= 0


def test_a_killed_recording_reads_through_a_window_by_a_rebuilt_index(opsight_cli, build_program,
                                                                        tmp_path):
    # SIGKILL leaves no time index (it is written at stop): `--window` rebuilds it by a scan,
    # says so, and shows the spans of the window only (docs/native-format.md, "Time index").
    program = build_program("opsight_record_until_killed")
    output = tmp_path / "killed.opsight"
    env = dict(os.environ, OPSIGHT_OUTPUT=str(output))
    run_then_kill(program, env, outer_spans=200, linger_s=0.3)

    whole = opsight_cli("report", output, "--summary", "--format", "json")
    part = opsight_cli("report", output, "--window", "0:20ms", "--summary", "--format", "json")
    assert part.returncode == 2, part.stderr  # damaged (no end) but readable, as the whole
    assert "no usable time index (rebuilt by a scan" in part.stderr, part.stderr
    whole_rows = {row["name"]: row for row in json.loads(whole.stdout)}
    part_rows = {row["name"]: row for row in json.loads(part.stdout)}
    assert 0 < part_rows["inner"]["count"] < whole_rows["inner"]["count"]

    converted = tmp_path / "window.json"
    result = opsight_cli("convert", output, converted, "--window", "5ms:10ms")
    assert result.returncode == 2, result.stderr
    assert json.loads(converted.read_text())["traceEvents"]

    bad = opsight_cli("report", output, "--window", "20ms")
    assert bad.returncode == 64 and "--window 20ms: expected FROM:TO" in bad.stderr, bad.stderr
    bad = opsight_cli("report", output, "--window", "2:3s")
    assert bad.returncode == 64 and "needs a unit" in bad.stderr, bad.stderr


def test_a_killed_process_that_dropped_events_leaves_a_file_that_counts_them(opsight_cli, build_program,
                                                                            tmp_path):
    # The output is a pipe drained at about 6 MB/s, a slow disk: the spinning main thread
    # outruns the writer, the 1 MiB bound fills and the threads drop, long before the kill.
    program = build_program("opsight_record_until_killed")
    pipe = tmp_path / "slow.opsight"  # the name says the format
    os.mkfifo(pipe)
    output = tmp_path / "dropping.opsight"

    def drain_slowly():
        with open(pipe, "rb") as source, open(output, "wb") as target:
            while block := source.read(32768):
                target.write(block)
                time.sleep(0.005)

    drainer = threading.Thread(target=drain_slowly)
    drainer.start()
    env = dict(os.environ, OPSIGHT_OUTPUT=str(pipe), OPSIGHT_BUFFER_MB="1")
    try:
        run_then_kill(program, env, outer_spans=2000, linger_s=1.0)  # several flush rounds
    finally:
        try:  # if the victim never opened the pipe, let the drainer see an empty stream
            os.close(os.open(pipe, os.O_WRONLY | os.O_NONBLOCK))
        except OSError:
            pass
        drainer.join(timeout=60)
    assert not drainer.is_alive()
    tree = opsight_cli("report", output, "--tree", "--max-roots", "1", "--format", "json")
    assert tree.returncode == 2, tree.stderr
    document = json.loads(tree.stdout)
    assert document["events_dropped"] > 0, document
    text = opsight_cli("report", output, "--summary")
    assert re.search(r"[1-9][\d,]* events? dropped", text.stdout), text.stdout[-400:]


def test_cmake_consumer_of_the_installed_package(tmp_path):
    prefix = ROOT / ".venv"
    if not (prefix / "lib" / "cmake" / "opsight" / "opsightConfig.cmake").is_file():
        pytest.fail("opsight is not installed in .venv: run `make install`")
    build = tmp_path / "consumer-build"
    subprocess.run(["cmake", "-S", str(ROOT / "tests" / "consumer"), "-B", str(build), "-G", "Ninja",
                    f"-DCMAKE_PREFIX_PATH={prefix}"], check=True, capture_output=True, text=True)
    subprocess.run(["cmake", "--build", str(build)], check=True, capture_output=True, text=True)
    trace = tmp_path / "consumer.json"
    ran = subprocess.run([str(build / "consumer"), str(trace)], capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0, ran.stderr
    assert "fibonacci(10) = 55" in ran.stdout
    events = json.loads(trace.read_text())["traceEvents"]
    calls = [event for event in events if event.get("ph") == "X" and event["name"] == "fibonacci"]
    assert len(calls) == 177  # calls of a naive fibonacci(10)
