"""The opsight CLI as a user meets it: reports, conversion, the demo, and bad input."""
import json
import os
import pathlib
import re
import subprocess

import pytest


def quick_start_trace(build_program, path: pathlib.Path, iterations=3):
    program = build_program("examples/cpp/quick_start/opsight_quick_start")
    env = dict(os.environ, OPSIGHT_OUTPUT=str(path))
    done = subprocess.run([str(program), str(iterations)], env=env, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert path.is_file()
    return path


def test_version_and_help_on_every_command(opsight_cli):
    version = opsight_cli("--version")
    assert version.returncode == 0
    assert re.match(r"opsight \d+\.\d+\.\d+", version.stdout)
    for command in ([], ["report"], ["convert"], ["demo"]):
        shown = opsight_cli(*command, "--help")
        assert shown.returncode == 0, command
        assert "Usage" in shown.stdout or "usage" in shown.stdout.lower()


def test_missing_file_is_a_one_line_error_naming_it(opsight_cli, tmp_path):
    missing = tmp_path / "nope.opsight"
    result = opsight_cli("report", missing)
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and str(missing) in lines[0] and "No such file" in lines[0]


def test_unknown_flag_is_a_one_line_usage_error(opsight_cli, tmp_path):
    result = opsight_cli("report", tmp_path / "x.json", "--bogus")
    assert result.returncode == 64
    assert len(result.stderr.strip().splitlines()) == 1
    assert "--bogus" in result.stderr


def test_invalid_sort_key_names_the_valid_ones(opsight_cli, build_program, tmp_path):
    trace = quick_start_trace(build_program, tmp_path / "run.opsight")
    result = opsight_cli("report", trace, "--table", "--sort", "speed")
    assert result.returncode == 64
    assert "speed" in result.stderr and "total" in result.stderr


def test_not_a_trace_names_file_and_offset(opsight_cli, tmp_path):
    junk = tmp_path / "junk.opsight"
    junk.write_bytes(b"\x00\x01garbage that is not a trace" * 4)
    result = opsight_cli("report", junk)
    assert result.returncode == 1
    assert str(junk) in result.stderr and "byte 0" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_bad_json_names_file_and_byte_offset(opsight_cli, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"traceEvents": [{"ph": "X", "name": "a", "ts": 1, "dur": 2, "pid": 1, "tid": 1}, '
                   '{"ph": "X", "name": @}]}')
    result = opsight_cli("report", bad)
    assert result.returncode == 1
    assert str(bad) in result.stderr
    match = re.search(r"byte (\d+)", result.stderr)
    assert match, result.stderr
    assert abs(int(match.group(1)) - bad.read_text().index("@")) <= 2


def test_truncated_native_file_reports_what_was_whole(opsight_cli, build_program, tmp_path):
    trace = quick_start_trace(build_program, tmp_path / "full.opsight", iterations=4)
    data = trace.read_bytes()
    cut = tmp_path / "cut.opsight"
    cut.write_bytes(data[: len(data) - 10])  # inside the footer chunk
    result = opsight_cli("report", cut, "--summary", "--format", "json")
    assert result.returncode == 2
    assert str(cut) in result.stderr and re.search(r"at byte \d+", result.stderr)
    rows = {row["name"]: row for row in json.loads(result.stdout)}
    assert rows["func1"]["count"] == 4


def test_corrupt_chunk_stops_there(opsight_cli, build_program, tmp_path):
    trace = quick_start_trace(build_program, tmp_path / "full.opsight", iterations=2)
    data = bytearray(trace.read_bytes())
    position = len(data) // 2
    data[position] ^= 0xFF
    corrupt = tmp_path / "corrupt.opsight"
    corrupt.write_bytes(bytes(data))
    result = opsight_cli("report", corrupt)
    assert result.returncode == 2
    offset = int(re.search(r"at byte (\d+)", result.stderr).group(1))
    assert offset <= position
    assert "checksum" in result.stderr


def test_summary_tree_table_of_the_quick_start(opsight_cli, build_program, tmp_path):
    trace = quick_start_trace(build_program, tmp_path / "run.opsight", iterations=3)
    summary = json.loads(opsight_cli("report", trace, "--summary", "--format", "json", check=True).stdout)
    rows = {row["name"]: row for row in summary}
    assert rows["main"]["count"] == 1 and rows["func1"]["count"] == 3 and rows["func2"]["count"] == 3
    for key in ("name", "count", "total_ns", "min_ns", "mean_ns", "p50_ns", "p90_ns", "p99_ns", "max_ns"):
        assert key in rows["func2"]
    assert rows["func2"]["min_ns"] >= 25_000_000  # it sleeps 25 ms
    assert rows["func1"]["min_ns"] >= 40_000_000  # 15 ms + func2
    assert rows["main"]["total_ns"] >= rows["func1"]["total_ns"]

    tree = opsight_cli("report", trace, "--tree", check=True).stdout
    assert "main" in tree and "func1" in tree and "func2" in tree
    assert "overhead" in tree
    table = opsight_cli("report", trace, "--table", "--sort", "self", "--format", "csv", check=True).stdout
    header = table.splitlines()[0]
    assert "self" in header and "total" in header


def test_convert_round_trip_keeps_every_span(opsight_cli, build_program, tmp_path):
    native = quick_start_trace(build_program, tmp_path / "run.opsight", iterations=3)
    as_json = tmp_path / "run.json"
    back = tmp_path / "back.opsight"
    opsight_cli("convert", native, as_json, check=True)
    opsight_cli("convert", as_json, back, check=True)
    summaries = [json.loads(opsight_cli("report", path, "--format", "json", check=True).stdout)
                 for path in (native, as_json, back)]
    by_name = [{row["name"]: (row["count"], row["total_ns"], row["min_ns"], row["max_ns"]) for row in summary}
               for summary in summaries]
    assert by_name[0] == by_name[1] == by_name[2]


def test_convert_rejects_unknown_output_extension(opsight_cli, build_program, tmp_path):
    native = quick_start_trace(build_program, tmp_path / "run.opsight")
    result = opsight_cli("convert", native, tmp_path / "out.txt")
    assert result.returncode == 64 and "out.txt" in result.stderr


def test_env_activation_writes_chrome_json_that_follows_the_format(build_program, tmp_path):
    trace = quick_start_trace(build_program, tmp_path / "run.json", iterations=2)
    document = json.loads(trace.read_text())  # strict JSON
    events = document["traceEvents"]
    complete = [event for event in events if event["ph"] == "X"]
    assert sorted(event["name"] for event in complete) == ["func1", "func1", "func2", "func2", "main"]
    for event in complete:
        assert isinstance(event["pid"], int) and isinstance(event["tid"], int)
        assert event["dur"] >= 0 and event["ts"] >= 0
    names = {event["args"]["name"] for event in events if event["ph"] == "M" and event["name"] == "thread_name"}
    assert "main" in names
    counters = [event for event in events if event["ph"] == "C"]
    assert [event["args"] for event in counters] and all(
        isinstance(value, (int, float)) for event in counters for value in event["args"].values())
    assert not (tmp_path / "run.json.opsight.tmp").exists()


def test_quickstart_demo_prints_tree_and_summary_and_writes_both_files(opsight_cli, tmp_path):
    # `opsight demo` is the real-model demo (python/tests/test_demo.py); --quickstart runs
    # the C++ quick-start program.
    result = opsight_cli("demo", "--quickstart", "-o", tmp_path / "demo", "--iterations", "2",
                         timeout=60)
    assert result.returncode == 0, result.stderr
    assert "func2" in result.stdout and "p99" in result.stdout and "overhead" in result.stdout
    assert (tmp_path / "demo.opsight").is_file()
    json.loads((tmp_path / "demo.json").read_text())


def test_env_activation_expands_pid_and_spares_the_parents_file(build_program, tmp_path):
    program = build_program("examples/cpp/quick_start/opsight_quick_start")
    # "%p" becomes the process id.
    patterned = subprocess.run([str(program), "1"], env=dict(os.environ, OPSIGHT_OUTPUT=str(tmp_path / "run-%p.opsight")),
                               capture_output=True, text=True, timeout=60)
    assert patterned.returncode == 0, patterned.stderr
    written = list(tmp_path.glob("run-*.opsight"))
    assert len(written) == 1 and re.fullmatch(r"run-\d+\.opsight", written[0].name)
    # A process that inherited the variable from a traced ancestor writes its own file.
    inherited = subprocess.run([str(program), "1"],
                               env=dict(os.environ, OPSIGHT_OUTPUT=str(tmp_path / "parent.json"),
                                        OPSIGHT_OUTPUT_OWNER="1"),
                               capture_output=True, text=True, timeout=60)
    assert inherited.returncode == 0, inherited.stderr
    assert not (tmp_path / "parent.json").exists()
    children = list(tmp_path.glob("parent.*.json"))
    assert len(children) == 1 and re.fullmatch(r"parent\.\d+\.json", children[0].name)
    json.loads(children[0].read_text())


def test_summary_percentiles_agree_with_numpy(opsight_cli, tmp_path):
    if "numpy" in os.environ.get("OPSIGHT_REQUIRE", "").split(","):
        import numpy  # make test requires it: missing is a failure, not a skip
    else:
        numpy = pytest.importorskip("numpy", reason="numpy is installed by `make test`")
    generator = numpy.random.default_rng(7)
    events, ts, expected = [], 0, {}
    for name, count in (("small", 6), ("odd", 101), ("big", 1000)):
        durations = generator.integers(1, 5_000_000, size=count)
        expected[name] = durations
        for duration in durations:
            events.append({"ph": "X", "name": name, "pid": 1, "tid": 1, "ts": ts / 1000, "dur": duration / 1000})
            ts += int(duration) + 10
    path = tmp_path / "random.json"
    path.write_text(json.dumps({"traceEvents": events}))
    rows = {row["name"]: row for row in json.loads(opsight_cli("report", path, "--format", "json", check=True).stdout)}
    for name, durations in expected.items():
        row = rows[name]
        assert row["count"] == len(durations) and row["total_ns"] == int(durations.sum())
        for field, q in (("p50_ns", 50), ("p90_ns", 90), ("p95_ns", 95), ("p97_ns", 97), ("p99_ns", 99), ("p999_ns", 99.9)):
            assert abs(row[field] - float(numpy.percentile(durations, q))) <= 0.05, (name, field)
        assert abs(row["stddev_ns"] - float(numpy.std(durations))) <= 0.05
