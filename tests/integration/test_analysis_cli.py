"""`opsight report --breakdown/--ops/--merged-tree/--critical-path` and `opsight compare`
on real traces, by the installed CLI, with the expected numbers computed here from the
files with the json module (and numpy for percentiles):

- a multi-phase inference program (examples/python/pipeline: preprocess, host-to-device,
  compute, device-to-host, postprocess) traced by `opsight run`, exported as Chrome JSON;
- the operator table of a trace the real PyTorch profiler and the real ONNX Runtime wrote;
- two runs of the same program and one with a planted 20% slowdown, landed in a temporary
  run store by `opsight run`, compared by run reference.
"""
import collections
import json
import os
import pathlib
import subprocess
import sys

import numpy
import pytest

from conftest import load_fixture_generators

ROOT = pathlib.Path(__file__).resolve().parents[2]
VENV_OPSIGHT = ROOT / ".venv" / "bin" / "opsight"

EXAMPLE = ROOT / "examples" / "python" / "pipeline"  # pipeline.py, targets.yaml


@pytest.fixture(scope="module")
def program():
    return EXAMPLE


def _environment(home, **extra):
    environment = {key: value for key, value in os.environ.items()
                   if not key.startswith("OPSIGHT_")}
    environment["OPSIGHT_HOME"] = str(home)
    environment.update(extra)
    return environment


def _opsight_run(program, output, home, *extra_args, **environment):
    if not VENV_OPSIGHT.is_file():
        pytest.fail(f"{VENV_OPSIGHT} is missing: run `make install`")
    completed = subprocess.run(
        [str(VENV_OPSIGHT), "run", "-c", str(program / "targets.yaml"), "-o", str(output),
         "--report", "none", *extra_args, "--", sys.executable, str(program / "pipeline.py")],
        capture_output=True, text=True, timeout=300, cwd=output.parent,
        env=_environment(home, **environment))
    assert completed.returncode == 0, completed.stderr
    return completed


def _slices(path):
    with open(path, encoding="utf-8") as file:
        document = json.load(file)
    events = document["traceEvents"] if isinstance(document, dict) else document
    return [event for event in events if isinstance(event, dict) and event.get("ph") == "X"]


def test_breakdown_of_a_multi_phase_inference(opsight_cli, program, tmp_path):
    trace = tmp_path / "pipeline.json"
    _opsight_run(program, trace, tmp_path / "home", "--no-store")
    completed = opsight_cli("report", trace, "--breakdown", "infer", "--format", "json")
    assert completed.returncode == 0, completed.stderr
    report = json.loads(completed.stdout)
    assert report["inference_count"] == 60

    # Independently: each infer event's children are the X events on its thread inside it.
    events = _slices(trace)
    inferences = sorted((e for e in events if e["name"] == "infer"), key=lambda e: e["ts"])
    phases = ["preprocess", "host_to_device", "compute", "device_to_host", "postprocess"]
    per_phase = {name: [] for name in phases}
    uncovered = []
    for inference in inferences:
        start, end = inference["ts"], inference["ts"] + inference["dur"]
        inside = [e for e in events if e["tid"] == inference["tid"] and e["pid"] == inference["pid"]
                  and e["name"] in phases and start <= e["ts"] and e["ts"] + e["dur"] <= end]
        covered = 0
        for name in phases:
            total = sum(round(e["dur"] * 1000) for e in inside if e["name"] == name)
            per_phase[name].append(total)
            covered += total
        uncovered.append(max(0, round(inference["dur"] * 1000) - covered))
    rows = {row["phase"]: row for row in report["phases"]}
    assert list(rows) == phases + ["(uncovered)"]
    for name, values in list(per_phase.items()) + [("(uncovered)", uncovered)]:
        row = rows[name]
        # Chrome JSON keeps µs with 3 decimals: ns are exact up to rounding of each event.
        assert abs(row["min_ns"] - min(values)) <= 2, name
        assert abs(row["max_ns"] - max(values)) <= 2, name
        for key, q in (("p50_ns", 50), ("p75_ns", 75), ("p90_ns", 90), ("p95_ns", 95), ("p99_ns", 99)):
            assert abs(row[key] - numpy.percentile(values, q)) <= 2, (name, key)
        assert abs(row["mean_ns"] - numpy.mean(values)) <= 2, name
    assert rows["postprocess"]["present_in"] == 60  # the span exists even when it does nothing

    text = opsight_cli("report", trace, "--breakdown", "infer")
    assert text.returncode == 0, text.stderr
    for piece in ("60 inferences of 'infer'", "host_to_device", "(uncovered)", "p75", "p99",
                  "inferences/s", "tracer overhead"):
        assert piece in text.stdout


@pytest.mark.parametrize("tool", ["pytorch", "onnxruntime"])
def test_operator_table_of_real_profiler_traces(opsight_cli, tmp_path, tool):
    generators = load_fixture_generators()
    path = tmp_path / f"{tool}.json"
    if tool == "pytorch":
        generators.make_pytorch_profiler_trace(path, iterations=4)
    else:
        generators.make_onnxruntime_trace(path, iterations=4)
    events = _slices(path)
    expected = collections.defaultdict(list)
    for event in events:
        if tool == "pytorch" and event.get("cat") in ("cpu_op", "kernel"):
            expected[event["name"]].append(round(event["dur"] * 1000))
        if tool == "onnxruntime" and event.get("cat") == "Node" and event["name"].endswith("_kernel_time"):
            expected[event["args"]["op_name"]].append(round(event["dur"] * 1000))
    assert expected, f"the {tool} trace has no operators"
    completed = opsight_cli("report", path, "--ops", "--format", "json")
    assert completed.returncode == 0, completed.stderr
    report = json.loads(completed.stdout)
    rows = {row["name"]: row for row in report["operators"]}
    assert set(rows) == set(expected)
    for name, durations in expected.items():
        assert rows[name]["count"] == len(durations), name
        assert abs(rows[name]["total_ns"] - sum(durations)) <= len(durations), name
        assert abs(rows[name]["max_ns"] - max(durations)) <= 1, name
    for category in {row["category"] for row in rows.values()}:  # shares are per category
        shares = sum(row["share"] for row in rows.values() if row["category"] == category)
        assert abs(shares - 1.0) < 1e-9, category
    # The flag takes one value (or a comma list): the file after it stays the file.
    flag_first = opsight_cli("report", "--ops-category", "operator,gpu_kernel", path, "--ops",
                             "--format", "json")
    assert flag_first.returncode == 0, flag_first.stderr
    assert json.loads(flag_first.stdout)["operators"] == report["operators"]


def test_compare_runs_in_the_store(opsight_cli, program, tmp_path):
    home = tmp_path / "home"
    for name, slowdown in (("base", "1"), ("again", "1"), ("slow", "1.2")):
        _opsight_run(program, tmp_path / f"{name}.opsight", home, "--name", name,
                     PIPELINE_SLOWDOWN=slowdown)
    environment = _environment(home)
    listed = opsight_cli("runs", "--format", "json", env=environment)
    assert listed.returncode == 0, listed.stderr
    assert len(json.loads(listed.stdout)) == 3

    quiet = opsight_cli("compare", "base", "again", "--fail-on-regression", "10%",
                        env=environment)
    assert quiet.returncode == 0, quiet.stdout + quiet.stderr
    assert "regressions (slower by 10% or more at the median): none" in quiet.stdout

    flagged = opsight_cli("compare", "base", "slow", "--fail-on-regression", "10%",
                          "--format", "json", env=environment)
    assert flagged.returncode == 3, flagged.stdout + flagged.stderr
    result = json.loads(flagged.stdout)
    assert "compute" in result["regressions"]
    compute = next(row for row in result["names"] if row["name"] == "compute")
    assert compute["verdict"] == "slower"
    assert 1.1 < compute["median_ratio"] < 1.35
    assert "preprocess" not in result["regressions"]
    # The tree diff points at the code path that got slower.
    tree = {row["name"]: row for row in result["tree"]}
    assert tree["compute"]["verdict"] == "slower" and tree["compute"]["depth"] == 1

    text = opsight_cli("compare", "latest~2", "latest", "--fail-on-regression", "10%",
                       env=environment)
    assert text.returncode == 3
    assert "compute:" in text.stdout and "run 1 (base)" in text.stdout

    missing = opsight_cli("compare", "base", "no-such-run", env=environment)
    assert missing.returncode == 1
    assert "no-such-run" in missing.stderr

    for bad in ("lots", "5"):  # "5" is neither 5% nor the fraction 0.05: refused, not guessed
        usage = opsight_cli("compare", "base", "slow", "--fail-on-regression", bad,
                            env=environment)
        assert usage.returncode == 64 and "--fail-on-regression" in usage.stderr, bad
