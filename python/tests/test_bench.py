"""``opsight bench`` and ``opsight.bench.run``: the three model forms (TorchScript file, ONNX
file, ``module:factory``) under the three scenarios, the statistics, JSON and CSV output,
the server scenario's p99 bound, compilation flagging, bad models (exit 2) and the stored
run.

Models are tiny and iteration counts small (a query takes tens of µs), so that the file
runs in seconds; most cases call the Python API in-process, a few run the installed
``opsight`` command (each such run imports torch afresh).
"""

from __future__ import annotations

import csv
import io
import json
import statistics
import time
import warnings

import pytest

from conftest import OPSIGHT, require, run, write

torch = require("torch")
onnx = require("onnx")
require("onnxruntime")

import opsight._native  # noqa: E402
import opsight.bench  # noqa: E402
from opsight.bench import BenchError  # noqa: E402

ORDERED_KEYS = ["min_ns", "p50_ns", "p75_ns", "p90_ns", "p95_ns", "p99_ns", "p999_ns", "max_ns"]

FACTORIES = """
import torch
import opsight.bench

def make():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    return model, (torch.randn(1, 8),)

def make_pipeline():
    model, inputs = make()
    return opsight.bench.Model(model, inputs, preprocess=lambda x: tuple(t * 2 for t in x),
                               postprocess=lambda y: y.argmax(-1))
"""

# No torch import: the CLI runs that use these start quickly.
PLAIN_FACTORIES = """
import time

def slow():
    return (lambda: time.sleep(0.004)), ()

def noop():
    return (lambda: None), ()

def broken():
    raise RuntimeError("no weights here")

def not_a_pair():
    return 42
"""


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """The same small MLP as a factory module, a TorchScript file and an ONNX file."""
    directory = tmp_path_factory.mktemp("bench-models")
    write(directory, "tinymodels.py", FACTORIES)
    write(directory, "plainmodels.py", PLAIN_FACTORIES)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(),
                                torch.nn.Linear(16, 4)).eval()
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # torch.jit is deprecated, not gone
        traced = torch.jit.trace(model, (torch.randn(1, 8),))
        torch.jit.save(traced, str(directory / "mlp.pt"))

    from onnx import TensorProto, helper, numpy_helper
    import numpy
    weight = numpy_helper.from_array(numpy.random.default_rng(0).standard_normal((8, 4))
                                     .astype(numpy.float32), "weight")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "weight"], ["hidden"]),
         helper.make_node("Relu", ["hidden"], ["y"])],
        "tiny", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4])], [weight])
    onnx_model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx_model.ir_version = 8
    onnx.checker.check_model(onnx_model)
    onnx.save(onnx_model, str(directory / "mlp.onnx"))
    return directory


def spec(models, form: str) -> str:
    return {"factory": f"{models}/tinymodels.py:make", "torchscript": str(models / "mlp.pt"),
            "onnx": str(models / "mlp.onnx")}[form]


def check_distribution(values: dict, count: int) -> None:
    assert values["count"] == count
    ordered = [values[key] for key in ORDERED_KEYS]
    assert ordered == sorted(ordered), values
    assert values["min_ns"] <= values["mean_ns"] <= values["max_ns"]
    assert values["stddev_ns"] >= 0
    assert values["min_ns"] > 0


def latencies_of(result) -> list[int]:
    """Each counted query's latency, recomputed from the raw timestamps."""
    timings = result.timings
    latencies = []
    for index in range(timings.count):
        if index in timings.flagged:
            continue
        begin = timings.arrivals[index] if timings.arrivals is not None else timings.start(index)
        latencies.append(timings.end(index) - begin)
    return latencies


@pytest.mark.parametrize("scenario", ["single-stream", "offline", "server"])
@pytest.mark.parametrize("form", ["factory", "torchscript", "onnx"])
def test_every_model_form_under_every_scenario_reports_the_statistics(models, form, scenario):
    options = {"qps": 2000.0} if scenario == "server" else {}
    result = opsight.bench.run(spec(models, form), shapes=["1x8"] if form == "torchscript" else None,
                               scenario=scenario, iterations=30, warmup=3, threads=1,
                               profile_iterations=0, **options)
    expected_backend = {"factory": "eager", "torchscript": "torchscript", "onnx": "ort-cpu"}[form]
    assert (result.backend, result.scenario, result.form) == (
        expected_backend, scenario, {"factory": "python"}.get(form, form))
    assert result.queries == 30 and result.counted == 30 and result.flagged == 0
    assert result.warmup["iterations"] == 3
    check_distribution(result.latency, 30)
    # The statistics are those of the recorded timestamps.
    latencies = sorted(latencies_of(result))
    assert result.latency["min_ns"] == latencies[0] and result.latency["max_ns"] == latencies[-1]
    assert result.latency["p50_ns"] == pytest.approx(statistics.median(latencies))
    assert result.latency["mean_ns"] == pytest.approx(statistics.fmean(latencies), abs=0.06)
    # The core's standard deviation is the population one (as every opsight report's).
    assert result.latency["stddev_ns"] == pytest.approx(statistics.pstdev(latencies), abs=0.06)
    names = [phase["name"] for phase in result.phases]
    assert names == (["queue", "compute"] if scenario == "server" else ["compute"])
    for phase in result.phases:
        check_distribution(phase, 30)
    assert sum(phase["mean_ns"] for phase in result.phases) == pytest.approx(
        result.latency["mean_ns"], abs=0.5)
    assert result.throughput["queries_per_second"] > 0
    assert result.throughput["samples_per_second"] == pytest.approx(
        result.throughput["queries_per_second"] * result.samples_per_query)
    if scenario == "server":
        assert result.server["target_qps"] == 2000.0
        assert result.server["p99_bound_held"] is None  # no bound given
    else:
        assert result.server is None
    data = json.loads(json.dumps(result.to_dict()))
    assert data["latency"]["p99_ns"] == result.latency["p99_ns"]
    text = result.render("text")
    assert f"scenario {scenario}" in text and "query (" in text and "throughput:" in text


def test_offline_throughput_is_queries_over_elapsed_time(models):
    begin = time.perf_counter_ns()
    result = opsight.bench.run(f"{models}/tinymodels.py:make", scenario="offline",
                               iterations=200, warmup=5, batch_size=4, profile_iterations=0)
    wall = time.perf_counter_ns() - begin
    assert result.samples_per_query == 4 and result.batch_size == 4
    elapsed = result.timings.end(199) - result.timings.start(0)
    assert result.elapsed_ns == elapsed
    assert elapsed >= sum(latencies_of(result))  # queries do not overlap
    assert elapsed < wall
    assert result.throughput["queries_per_second"] == pytest.approx(200 / (elapsed / 1e9))
    assert result.throughput["samples_per_second"] == pytest.approx(800 / (elapsed / 1e9))
    assert "offline throughput:" in result.render()


def test_batch_size_tiles_the_inputs_along_dimension_zero():
    seen = []
    result = opsight.bench.run(lambda x: seen.append(tuple(x.shape)), (torch.ones(2, 3),),
                               batch_size=3, iterations=2, warmup=0, profile_iterations=0)
    assert set(seen) == {(6, 3)} and result.samples_per_query == 6
    with pytest.raises(BenchError, match="no tensor or array"):
        opsight.bench.run(lambda: None, (), batch_size=2, iterations=1)


def test_the_top_operators_come_from_a_profile_after_the_timed_queries(models):
    torch_result = opsight.bench.run(f"{models}/tinymodels.py:make", iterations=10, warmup=2,
                                     profile_iterations=3)
    names = {row["name"] for row in torch_result.operators}
    assert "aten::addmm" in names or "aten::linear" in names, names
    assert torch_result.operators_iterations == 3
    assert torch_result.operators_source in ("opsight.torch", "torch.profiler")
    assert "top operators (3 profiled queries" in torch_result.render()

    onnx_result = opsight.bench.run(str(models / "mlp.onnx"), iterations=10, warmup=2,
                                    profile_iterations=3)
    names = {row["name"] for row in onnx_result.operators}
    assert {"MatMul", "Relu"} <= names, names
    assert onnx_result.operators_source in ("opsight.onnxruntime", "onnxruntime profiling")


def test_preprocess_and_postprocess_are_phases_of_their_own(models):
    result = opsight.bench.run(f"{models}/tinymodels.py:make_pipeline", iterations=10,
                               warmup=1, profile_iterations=0)
    assert [phase["name"] for phase in result.phases] == ["preprocess", "compute", "postprocess"]
    shares = [phase["share_of_mean"] for phase in result.phases]
    assert sum(shares) == pytest.approx(1.0)


def test_a_factory_model_converts_to_torchscript_and_onnx_runtime(models):
    for backend in ("torchscript", "ort-cpu"):
        result = opsight.bench.run(f"{models}/tinymodels.py:make", backend=backend,
                                   iterations=5, warmup=1, profile_iterations=0)
        assert result.backend == backend and result.counted == 5
        assert any("converted with" in note for note in result.notes)


def test_server_scenario_reports_the_p99_bound_failed_when_overloaded_and_held_when_not(models):
    # 4 ms per query offered at 1000 queries/s: each query waits behind the previous ones.
    overloaded = opsight.bench.run(f"{models}/plainmodels.py:slow", scenario="server",
                                   qps=1000, p99_bound_ms=10, iterations=20, warmup=1)
    assert overloaded.server["p99_bound_held"] is False
    assert overloaded.latency["p99_ns"] > 10e6
    queue = next(phase for phase in overloaded.phases if phase["name"] == "queue")
    assert queue["max_ns"] > 20e6  # the queueing shows
    assert overloaded.server["achieved_qps"] < 1000
    assert not overloaded.passed and "FAILED" in overloaded.render()

    idle = opsight.bench.run(f"{models}/plainmodels.py:noop", scenario="server", qps=50,
                             p99_bound_ms=200, iterations=10, warmup=1)
    assert idle.server["p99_bound_held"] is True and idle.passed
    # Poisson arrivals at 50/s: 10 queries take about 0.2 s, not back to back.
    arrivals = idle.timings.arrivals
    assert (arrivals[-1] - arrivals[0]) / 1e9 > 0.02
    assert "HELD" in idle.render()


def test_the_cli_exits_3_when_the_bound_is_not_held(models, tmp_path):
    completed = run([OPSIGHT, "bench", f"{models}/plainmodels.py:slow", "--scenario", "server",
                     "--qps", "1000", "--p99-bound-ms", "5", "--iterations", "15", "--no-store"],
                    tmp_path)
    assert completed.returncode == 3, completed.stderr  # a check failed, as compare's regressions
    assert "FAILED" in completed.stdout and "not held" in completed.stderr


def test_compile_backend_flags_the_iterations_that_compiled(models):
    # aot_eager: Dynamo's graph capture without inductor's C++ code generation (seconds
    # less); the flagging reads the same Dynamo counters whatever the compiler backend.
    torch._dynamo.reset()
    result = opsight.bench.run(f"{models}/tinymodels.py:make", backend="compile",
                               compile_backend="aot_eager", warmup=0, iterations=6,
                               profile_iterations=0)
    assert result.flagged >= 1 and 0 in result.timings.flagged
    assert result.counted == 6 - result.flagged
    check_distribution(result.latency, result.counted)
    compiled = result.timings.end(0) - result.timings.start(0)
    assert result.latency["max_ns"] < compiled  # the compiling query is left out
    data = result.to_dict()
    assert data["flagged"] == result.flagged and data["flagged_reason"] == "compilation"
    assert "left out of the statistics" in result.render()


@pytest.mark.parametrize("arguments, message", [
    (["missing.onnx"], "missing.onnx: no such file"),
    (["no_such_module_for_bench:make"], "no_such_module_for_bench:make: no module named"),
    (["{models}/plainmodels.py:nothere"], "has no attribute 'nothere'"),
    (["{models}/plainmodels.py:broken"], "the factory raised RuntimeError: no weights here"),
    (["{models}/plainmodels.py:not_a_pair"], "the factory returned int"),
    (["{models}/nothere.py:make"], "no such file"),
    (["{models}/mlp.onnx", "--backend", "eager"], "runs only on the ONNX Runtime back-ends"),
    (["{models}/plainmodels.py:noop", "--backend", "ort-cuda"], "available here:"),
])
def test_a_bad_model_exits_1_with_a_message_naming_it(models, tmp_path, arguments, message):
    arguments = [argument.format(models=models) for argument in arguments]
    completed = run([OPSIGHT, "bench", *arguments, "--no-store"], tmp_path)
    assert completed.returncode == 1, (completed.stdout, completed.stderr)  # unusable input
    assert message in completed.stderr
    assert completed.stderr.startswith(f"opsight bench: {arguments[0]}") or \
        "--backend" in completed.stderr
    assert completed.stdout == ""


def test_bad_usage_exits_64(models, tmp_path):
    completed = run([OPSIGHT, "bench", f"{models}/plainmodels.py:noop", "--scenario", "server"],
                    tmp_path)
    assert completed.returncode == 64 and "--qps" in completed.stderr
    completed = run([OPSIGHT, "bench", f"{models}/plainmodels.py:noop", "--warmup", "2 parsecs"],
                    tmp_path)
    assert completed.returncode == 64 and "warmup" in completed.stderr


def test_cli_json_output_file_and_the_stored_run(models, tmp_path):
    home = tmp_path / "home"
    output = tmp_path / "report.json"
    completed = run([OPSIGHT, "bench", str(models / "mlp.pt"), "--shape", "1x8", "--iterations",
                     "25", "--warmup", "2", "--threads", "1", "--format", "json", "--output",
                     str(output), "--tag", "ci=1", "--profile-iterations", "2"], tmp_path,
                    timeout=120, OPSIGHT_HOME=str(home))
    assert completed.returncode == 0, completed.stderr
    report = json.loads(output.read_text())
    assert report["backend"] == "torchscript" and report["threads"] == 1
    check_distribution(report["latency"], 25)
    assert report["throughput"]["queries_per_second"] > 0
    assert report["saved_run"]["id"] == 1
    assert "saved as run 1" in completed.stderr

    listed = run([OPSIGHT, "runs", "--format", "json"], tmp_path, OPSIGHT_HOME=str(home))
    assert listed.returncode == 0, listed.stderr
    runs = json.loads(listed.stdout)
    assert len(runs) == 1
    stored = runs[0]
    assert stored["name"] == "bench mlp"
    assert {"backend": "torchscript", "scenario": "single-stream", "batch_size": "1",
            "threads": "1", "ci": "1"}.items() <= stored["tags"].items()
    assert stored["slices"] >= 2 * 25  # a query span and its compute child per timed query
    shown = run([OPSIGHT, "show", "1", "--format", "json"], tmp_path, OPSIGHT_HOME=str(home))
    assert shown.returncode == 0, shown.stderr
    summary = {row["name"]: row for row in json.loads(shown.stdout)["report"]}
    assert summary["query"]["count"] == 25 and summary["compute"]["count"] == 25


def test_cli_csv_output_parses_and_holds_the_numbers(models, tmp_path):
    home = tmp_path / "home"
    completed = run([OPSIGHT, "bench", f"{models}/tinymodels.py:make_pipeline", "--scenario",
                     "offline", "--iterations", "20", "--warmup", "1", "--format", "csv",
                     "--no-store", "--profile-iterations", "0"], tmp_path, timeout=120,
                    OPSIGHT_HOME=str(home))
    assert completed.returncode == 0, completed.stderr
    rows = list(csv.DictReader(io.StringIO(completed.stdout)))
    summary = {row["name"]: row["value"] for row in rows if row["section"] == "summary"}
    assert summary["scenario"] == "offline" and summary["queries"] == "20"
    assert float(summary["samples_per_second"]) > 0
    latency = next(row for row in rows if row["section"] == "latency")
    assert int(latency["count"]) == 20
    values = [float(latency[key]) for key in ORDERED_KEYS]
    assert values == sorted(values)
    phases = [row["name"] for row in rows if row["section"] == "phase"]
    assert phases == ["preprocess", "compute", "postprocess"]
    assert not home.exists()  # --no-store


def test_json_output_of_the_onnx_model_on_stdout(models, tmp_path):
    completed = run([OPSIGHT, "bench", str(models / "mlp.onnx"), "--shape", "x=4x8",
                     "--iterations", "10", "--warmup", "1", "--format", "json", "--no-store",
                     "--profile-iterations", "0"], tmp_path, timeout=120)
    assert completed.returncode == 0, completed.stderr
    report = json.loads(completed.stdout)
    assert report["backend"] == "ort-cpu" and report["samples_per_query"] == 4
    check_distribution(report["latency"], 10)


# ---- one pipeline: bench's numbers are the core's ------------------------------------------

SUMMARY_KEYS = ["count", "mean_ns", "min_ns", "p50_ns", "p90_ns", "p95_ns", "p99_ns", "p999_ns",
                "max_ns", "stddev_ns"]


@pytest.mark.parametrize("scenario", ["single-stream", "server"])
def test_bench_and_report_agree_on_every_statistic_of_the_same_run(models, tmp_path, scenario):
    home = tmp_path / "home"
    extra = ["--qps", "400"] if scenario == "server" else []
    completed = run([OPSIGHT, "bench", f"{models}/tinymodels.py:make_pipeline", "--scenario",
                     scenario, *extra, "--iterations", "60", "--warmup", "2", "--threads", "1",
                     "--format", "json", "--profile-iterations", "0"], tmp_path, timeout=120,
                    OPSIGHT_HOME=str(home))
    assert completed.returncode == 0, completed.stderr
    bench = json.loads(completed.stdout)
    run_id = str(bench["saved_run"]["id"])

    reported = run([OPSIGHT, "report", run_id, "--summary", "--format", "json"], tmp_path,
                   OPSIGHT_HOME=str(home))
    assert reported.returncode == 0, reported.stderr
    summary = {row["name"]: row for row in json.loads(reported.stdout)}
    assert {key: summary["query"][key] for key in SUMMARY_KEYS} == \
        {key: bench["latency"][key] for key in SUMMARY_KEYS}
    # Each phase is a span of its own: its summary row is the bench's phase row.
    for phase in bench["phases"]:
        assert {key: summary[phase["name"]][key] for key in SUMMARY_KEYS} == \
            {key: phase[key] for key in SUMMARY_KEYS}, phase["name"]

    broken_down = run([OPSIGHT, "report", run_id, "--breakdown", "query", "--format", "json"],
                      tmp_path, OPSIGHT_HOME=str(home))
    assert broken_down.returncode == 0, broken_down.stderr
    breakdown = json.loads(broken_down.stdout)
    keys = SUMMARY_KEYS + ["p75_ns"]
    assert {key: breakdown["total"][key] for key in keys} == \
        {key: bench["latency"][key] for key in keys}
    rows = {row["phase"]: row for row in breakdown["phases"]}
    for phase in bench["phases"]:
        assert {key: rows[phase["name"]][key] for key in keys} == {key: phase[key] for key in keys}
        assert rows[phase["name"]]["share_of_mean"] == pytest.approx(phase["share_of_mean"])


def test_the_trace_written_is_the_one_the_statistics_come_from(models, tmp_path):
    result = opsight.bench.run(f"{models}/plainmodels.py:slow", scenario="server", qps=1000,
                               iterations=20, warmup=1, profile_iterations=0)
    path = tmp_path / "bench.json"
    result.write_trace(str(path))
    events = json.loads(path.read_text())
    events = events["traceEvents"] if isinstance(events, dict) else events
    queries = [event for event in events if event.get("name") == "query" and event.get("ph") == "X"]
    assert len(queries) == 20
    # Overloaded: queries overlap in time, so they are spread over lanes (async tracks).
    loaded = opsight._native.read_trace(str(path))
    latency = {row["name"]: row for row in json.loads(loaded.render("summary", "json"))}["query"]
    assert {key: latency[key] for key in SUMMARY_KEYS} == \
        {key: result.latency[key] for key in SUMMARY_KEYS}
    assert latency["max_ns"] > 20e6  # the queueing counts from the scheduled arrival


# ---- scenarios: offline issues everything at once, workers serve in parallel ---------------

def test_offline_with_workers_serves_the_batches_in_parallel(models):
    one = opsight.bench.run(f"{models}/plainmodels.py:slow", scenario="offline", iterations=16,
                            warmup=1, profile_iterations=0)
    two = opsight.bench.run(f"{models}/plainmodels.py:slow", scenario="offline", iterations=16,
                            warmup=1, profile_iterations=0, workers=2)
    assert one.queries == two.queries == 16 and two.workers == 2
    assert two.to_dict()["workers"] == 2
    # The model sleeps (releasing the GIL): two workers overlap, one does not.
    assert one.elapsed_ns >= sum(latencies_of(one))
    assert two.elapsed_ns < 0.8 * sum(latencies_of(two))
    starts = [two.timings.start(index) for index in range(16)]
    ends = [two.timings.end(index) for index in range(16)]
    assert two.elapsed_ns == max(ends) - min(starts)
    assert two.throughput["samples_per_second"] > 1.3 * one.throughput["samples_per_second"]


def test_offline_duration_sizes_the_batches_from_the_warm_up_rate(models):
    result = opsight.bench.run(f"{models}/plainmodels.py:slow", scenario="offline",
                               duration="60ms", warmup=3, profile_iterations=0)
    per_query_s = result.warmup["seconds"] / result.warmup["iterations"]
    expected = 0.060 / per_query_s
    assert abs(result.queries - expected) <= 1.5, (result.queries, expected)
    assert result.counted == result.queries


def test_offline_issues_every_batch_at_once_from_a_queue(models, monkeypatch):
    from opsight.bench import scenarios
    seen = []
    original = scenarios.run_back_to_back
    monkeypatch.setattr(scenarios, "run_back_to_back",
                        lambda prepared, count, seconds, *rest: seen.append((count, seconds))
                        or original(prepared, count, seconds, *rest))
    result = opsight.bench.run(f"{models}/plainmodels.py:noop", scenario="offline",
                               iterations=7, warmup=0, duration="1ms", profile_iterations=0)
    # A fixed number of batches decided before the first one runs, never a timed loop.
    assert seen and seen[0][1] is None and seen[0][0] == result.queries >= 7


def test_server_with_workers_queues_less(models):
    # ~4 ms a query offered at 350/s: more than one worker serves (250/s), less than two.
    options = dict(scenario="server", qps=350, iterations=40, warmup=1, profile_iterations=0,
                   seed=3)
    one = opsight.bench.run(f"{models}/plainmodels.py:slow", **options)
    two = opsight.bench.run(f"{models}/plainmodels.py:slow", workers=2, **options)
    offsets_one = [arrival - one.timings.arrivals[0] for arrival in one.timings.arrivals]
    offsets_two = [arrival - two.timings.arrivals[0] for arrival in two.timings.arrivals]
    assert offsets_one == pytest.approx(offsets_two, abs=1000)  # the same seeded arrivals
    assert two.server["workers"] == 2
    queue_one = next(phase for phase in one.phases if phase["name"] == "queue")
    queue_two = next(phase for phase in two.phases if phase["name"] == "queue")
    assert queue_two["mean_ns"] < queue_one["mean_ns"]
    assert two.latency["p99_ns"] < one.latency["p99_ns"]
    overlapping = sum(1 for index in range(1, 40)
                      if two.timings.start(index) < two.timings.end(index - 1))
    assert overlapping > 0  # two queries ran at once
    assert two.latency["count"] == 40 and "2 workers" in two.render()


def test_workers_are_refused_for_single_stream():
    with pytest.raises(ValueError, match="workers"):
        opsight.bench.run(lambda: None, (), workers=2, iterations=1)
    with pytest.raises(ValueError, match="workers"):
        opsight.bench.run(lambda: None, (), scenario="offline", workers=0, iterations=1)


# ---- one back-end vocabulary ----------------------------------------------------------------

def test_backend_aliases_name_the_same_backends(models):
    from opsight.bench import BACKEND_ALIASES, BACKENDS
    assert set(BACKEND_ALIASES.values()) <= set(BACKENDS)
    result = opsight.bench.run(str(models / "mlp.onnx"), backend="onnxruntime", iterations=3,
                               warmup=1, profile_iterations=0)
    assert result.backend == "ort-cpu"
    with pytest.raises(BenchError, match="runs only on the ONNX Runtime back-ends"):
        opsight.bench.run(str(models / "mlp.onnx"), backend="inductor", iterations=1)


def test_cli_accepts_an_alias_and_reports_the_canonical_name(models, tmp_path):
    completed = run([OPSIGHT, "bench", str(models / "mlp.onnx"), "--backend", "onnxruntime",
                     "--iterations", "3", "--warmup", "1", "--format", "json", "--no-store",
                     "--profile-iterations", "0"], tmp_path, timeout=120)
    assert completed.returncode == 0, completed.stderr
    assert json.loads(completed.stdout)["backend"] == "ort-cpu"


def test_cli_workers_and_trace_file(models, tmp_path):
    trace = tmp_path / "queries.json"
    completed = run([OPSIGHT, "bench", f"{models}/plainmodels.py:slow", "--scenario", "server",
                     "--qps", "400", "--workers", "2", "--iterations", "20", "--warmup", "1",
                     "--format", "json", "--no-store", "--trace", str(trace)], tmp_path)
    assert completed.returncode == 0, completed.stderr
    report = json.loads(completed.stdout)
    assert report["workers"] == 2 and report["server"]["workers"] == 2
    loaded = opsight._native.read_trace(str(trace))
    rows = {row["name"]: row for row in json.loads(loaded.render("summary", "json"))}
    assert {key: rows["query"][key] for key in SUMMARY_KEYS} == \
        {key: report["latency"][key] for key in SUMMARY_KEYS}
    refused = run([OPSIGHT, "bench", f"{models}/plainmodels.py:noop", "--workers", "2",
                   "--no-store"], tmp_path)
    assert refused.returncode == 64 and "workers" in refused.stderr
