"""``opsight.compare_backends`` (also ``opsight.torch.compare_backends``) and ``opsight
compare-backends``: a function with a graph break, timed on real back-ends (eager, inductor,
TorchScript, ONNX Runtime) and on made-up ones that fail or compute wrong values."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import textwrap

import pytest

from conftest import OPSIGHT, require

torch = require("torch")

from opsight.compare_backends import CompareBackendsResult, compare_backends  # noqa: E402
from opsight.compare_backends.command import command_main  # noqa: E402

REPEATS = 3


def make_function():
    """Two small linear blocks with a graph break (``.item()`` and a branch on it) between."""
    torch.manual_seed(0)
    first, second = torch.nn.Linear(16, 16), torch.nn.Linear(16, 8)

    def predict(x):
        hidden = torch.relu(first(x))
        if hidden.sum().item() > 0:  # graph break: a Python branch on a tensor's value
            hidden = hidden * 2
        return torch.softmax(second(hidden), dim=-1)

    return predict, (torch.randn(4, 16),)


def failing_backend(graph_module, example_inputs):
    raise RuntimeError("made-up back-end cannot compile")


def wrong_backend(graph_module, example_inputs):
    def run(*arguments):
        return [output + 1 for output in graph_module(*arguments)]
    return run


@pytest.fixture(scope="module")
def result() -> CompareBackendsResult:
    fn, inputs = make_function()
    return compare_backends(
        fn, inputs, ["eager", "inductor", "torchscript", "onnxruntime",
                     ("broken", failing_backend)],
        repeats=REPEATS, warmups=1, prices_per_hour={"eager": 1.2, "inductor": 0.5})


def test_graph_break_splits_the_call_into_segments(result):
    assert result.graph_count == 2
    assert result.graph_break_count == 1
    assert any("item()" in reason for reason in result.graph_break_reasons)
    kinds = [segment.kind for segment in result.segments]
    assert kinds == ["uncompiled", "graph", "uncompiled", "graph", "uncompiled"]
    assert [segment.graph_id for segment in result.segments if segment.kind == "graph"] == [1, 2]
    assert all(segment.op_count >= 2 for segment in result.segments if segment.kind == "graph")
    assert result.discarded_runs["warm-up"] == 1
    assert result.discarded_runs["compilation"] == 0
    assert result.measured_runs == REPEATS


def test_every_backend_runs_every_graph(result):
    for segment in result.segments:
        if segment.kind == "uncompiled":
            assert segment.runs == REPEATS and segment.mean_ms > 0
            continue
        for name in ("eager", "inductor", "torchscript", "onnxruntime"):
            stats = segment.backends[name]
            assert (stats.runs, stats.failures, stats.mismatches) == (REPEATS, 0, 0), \
                (name, stats)
            assert 0 < stats.min_ms <= stats.median_ms <= stats.max_ms
            assert stats.min_ms <= stats.mean_ms <= stats.max_ms


def test_a_failing_backend_is_counted_and_the_others_still_run(result):
    for segment in result.segments:
        if segment.kind == "graph":
            broken = segment.backends["broken"]
            assert broken.runs == 0 and broken.failures == REPEATS
            assert broken.errors == ["compilation failed: RuntimeError: made-up back-end "
                                     "cannot compile"]
    assert result.total_ms("broken") is None
    assert result.failures["broken"] == 2 * REPEATS
    assert "broken: graph #1: compilation failed" in result.table()


def test_totals_are_the_sum_of_the_segments(result):
    data = result.to_dict()
    uncompiled = sum(segment["mean_ms"] for segment in data["segments"]
                     if segment["kind"] == "uncompiled")
    assert data["uncompiled_total_ms"] == pytest.approx(uncompiled, abs=1e-5)
    for name in ("eager", "inductor", "torchscript", "onnxruntime"):
        compiled = sum(segment["backends"][name]["mean_ms"] for segment in data["segments"]
                       if segment["kind"] == "graph")
        assert data["totals"][name]["compiled_ms"] == pytest.approx(compiled, abs=1e-5)
        assert data["totals"][name]["total_ms"] == pytest.approx(compiled + uncompiled,
                                                                 abs=1e-5)


def test_cost_per_million_requests(result):
    for name, price in (("eager", 1.2), ("inductor", 0.5)):
        seconds = result.total_ms(name) / 1000
        assert result.cost_per_million(name) == pytest.approx(seconds * price / 3600 * 1e6)
        assert result.to_dict()["totals"][name]["price_per_hour"] == price
    assert result.cost_per_million("torchscript") is None  # no price given
    assert "(at $1.2/h)" in result.table()


def test_result_is_json_and_a_table(result):
    data = json.loads(json.dumps(result.to_dict()))
    assert data["graph_break_count"] == 1 and len(data["segments"]) == 5
    assert data["environment"]["torch"] == torch.__version__
    table = result.table()
    for text in ("Graph #1", "Graph #2", "Uncompiled", "inductor", "onnxruntime",
                 "Total uncompiled code run time", "Runs discarded: 1 warm-up"):
        assert text in table


def test_dataframe(result):
    require("pandas")
    frame = result.dataframe()
    # 3 uncompiled rows + 2 graphs x 5 back-ends
    assert len(frame) == 3 + 2 * 5
    assert set(frame[frame.kind == "graph"].backend) == {
        "eager", "inductor", "torchscript", "onnxruntime", "broken"}


def test_mismatching_outputs_are_reported():
    fn, inputs = make_function()
    result = compare_backends(fn, inputs, ["eager", ("wrong", wrong_backend)],
                              repeats=2, warmups=1)
    for segment in result.segments:
        if segment.kind == "graph":
            wrong = segment.backends["wrong"]
            assert wrong.runs == 2 and wrong.failures == 0 and wrong.mismatches == 2
            assert wrong.max_abs_diff == pytest.approx(1.0)
            assert segment.backends["eager"].mismatches == 0


def test_a_backend_that_fails_while_running_is_counted():
    from opsight.compare_backends.measure import _PRIMING_RUNS

    calls = {}

    def fails_after_warm_up(graph_module, example_inputs):
        calls[id(graph_module)] = 0

        def run(*arguments):
            calls[id(graph_module)] += 1
            if calls[id(graph_module)] > _PRIMING_RUNS + 1:  # priming + the warm-up call
                raise ValueError("device lost")
            return graph_module(*arguments)
        return run

    fn, inputs = make_function()
    result = compare_backends(fn, inputs, ["eager", ("flaky", fails_after_warm_up)],
                              repeats=3, warmups=1)
    for segment in result.segments:
        if segment.kind == "graph":
            assert segment.backends["flaky"].runs == 0
            assert segment.backends["flaky"].failures == 3
            assert segment.backends["flaky"].errors == ["run failed: ValueError: device lost"]
            assert segment.backends["eager"].runs == 3
    assert result.total_ms("eager") is not None and result.total_ms("flaky") is None


def test_a_graph_onnx_cannot_export_is_a_failure_of_that_backend_only():
    require("onnxruntime")

    def spectrum(x):
        y = torch.relu(x) + 1
        torch._dynamo.graph_break()
        return torch.fft.rfft(y).abs()  # the ONNX exporter has no fft

    result = compare_backends(spectrum, (torch.randn(4, 8),), ["eager", "onnxruntime"],
                              repeats=2, warmups=1)
    first, second = [segment for segment in result.segments if segment.kind == "graph"]
    assert first.backends["onnxruntime"].runs == 2
    assert second.backends["onnxruntime"].runs == 0
    assert second.backends["onnxruntime"].failures == 2
    assert "fft" in second.backends["onnxruntime"].errors[0]
    assert second.backends["eager"].runs == 2
    assert result.graph_break_count == 1
    assert any("graph_break" in reason for reason in result.graph_break_reasons)


def test_runs_with_compilation_are_discarded():
    fn, inputs = make_function()
    result = compare_backends(fn, inputs, ["eager"], repeats=3, warmups=0)
    assert result.discarded_runs == {"warm-up": 0, "compilation": 1, "other path": 0}
    assert all(segment.runs == 2 for segment in result.segments if segment.kind == "uncompiled")
    assert all(segment.backends["eager"].runs == 2
               for segment in result.segments if segment.kind == "graph")


def test_inputs_written_by_a_graph_are_written_once_per_call():
    counter = torch.zeros(3)

    def step(x):
        counter.add_(1)  # an in-place write into a graph input
        return x * 2

    compare_backends(step, (torch.ones(3),), ["eager", "torchscript"], repeats=2, warmups=1)
    # 3 calls of fn: the counter moves once per call, not once per back-end.
    assert counter.tolist() == [3.0, 3.0, 3.0]


def test_threads_are_set_for_the_run_and_restored():
    before = torch.get_num_threads()
    fn, inputs = make_function()
    result = compare_backends(fn, inputs, ["eager"], repeats=1, warmups=1, threads=1)
    assert result.environment["torch_threads"] == 1 and result.environment["threads"] == 1
    assert torch.get_num_threads() == before


def test_bad_arguments_raise():
    fn, inputs = make_function()
    with pytest.raises(ValueError, match="unknown back-end 'no-such-backend'"):
        compare_backends(fn, inputs, ["eager", "no-such-backend"])
    with pytest.raises(ValueError, match="price is given for 'inductor'"):
        compare_backends(fn, inputs, ["eager"], prices_per_hour={"inductor": 1.0})
    with pytest.raises(ValueError, match="repeats"):
        compare_backends(fn, inputs, ["eager"], repeats=0)


# ---- the command ---------------------------------------------------------------------------

FACTORY = """
    import torch

    def make():
        torch.manual_seed(0)
        layer = torch.nn.Linear(8, 8)

        def fn(x):
            y = layer(x)
            print("between the graphs", end="")  # a graph break
            return torch.relu(layer(y))

        return fn, (torch.randn(2, 8),)

    def not_a_pair():
        return 42
"""


@pytest.fixture
def factory_file(tmp_path):
    path = tmp_path / "cb_factory.py"
    path.write_text(textwrap.dedent(FACTORY))
    return path


def test_command_prints_json(factory_file):
    completed = subprocess.run(
        [OPSIGHT, "compare-backends", f"{factory_file}:make", "--backends",
         "eager,torchscript", "--repeats", "2", "--warmups", "1", "--price", "eager=2.5",
         "--format", "json"],
        capture_output=True, text=True, timeout=300)
    assert completed.returncode == 0, completed.stderr
    data = json.loads(completed.stdout)  # the program's own print went to stderr
    assert "between the graphs" in completed.stderr
    assert data["graph_count"] == 2 and data["graph_break_count"] == 1
    assert data["backends"] == ["eager", "torchscript"]
    graphs = [segment for segment in data["segments"] if segment["kind"] == "graph"]
    assert [graph["backends"]["torchscript"]["runs"] for graph in graphs] == [2, 2]
    total = data["totals"]["eager"]["total_ms"]
    assert math.isclose(data["totals"]["eager"]["cost_per_million"],
                        total / 1000 * 2.5 / 3600 * 1e6, rel_tol=1e-4)


def test_command_module_form_and_text(factory_file, monkeypatch, capsys):
    monkeypatch.chdir(factory_file.parent)
    monkeypatch.syspath_prepend(str(factory_file.parent))
    assert command_main(["cb_factory:make", "--backends", "eager", "--repeats", "1"]) == 0
    output = capsys.readouterr().out
    assert "Graph #2" in output and "Total times (compiled + uncompiled)" in output


@pytest.mark.parametrize("arguments, message", [
    (["no_colon_here"], "expected MODULE:FUNCTION"),
    (["no_such_module_xyz:make"], "cannot import module 'no_such_module_xyz'"),
    (["{factory}:missing"], "has no attribute 'missing'"),
    (["{factory}:make", "--backends", "eager,nope"], "unknown back-end 'nope'"),
    (["{factory}:make", "--backends", "eager,eager"], "given twice"),
    (["{factory}:make", "--price", "eager=cheap"], "'cheap' is not a number"),
    (["{factory}:make", "--backends", "eager", "--price", "inductor=1"],
     "'inductor' is not one of --backends"),
    (["{factory}:make", "--repeats", "0"], "--repeats 0: must be >= 1"),
    (["{factory}:make", "--threads", "0"], "--threads 0: must be >= 1"),
    (["{factory}:not_a_pair"], "must return (fn, example_inputs)"),
    (["{factory}:make", "--format", "xml"], "invalid choice: 'xml'"),
])
def test_command_bad_usage_exits_64(factory_file, capsys, arguments, message):
    arguments = [argument.replace("{factory}", str(factory_file)) for argument in arguments]
    assert command_main(arguments) == 64
    assert message in capsys.readouterr().err


def test_command_via_opsight_exits_64_on_bad_usage():
    completed = subprocess.run([sys.executable, "-m", "opsight", "compare-backends", "x"],
                               capture_output=True, text=True, timeout=120)
    assert completed.returncode == 64
    assert "expected MODULE:FUNCTION" in completed.stderr


# ---- opsight.torch loads compare_backends only when asked -----------------------------------

def test_importing_opsight_torch_does_not_load_compare_backends():
    program = textwrap.dedent("""
        import sys
        import opsight.torch
        loaded = sorted(name for name in sys.modules
                        if name.startswith("opsight.compare_backends"))
        assert not loaded, loaded
        assert "compare_backends" not in vars(opsight.torch)
        function = opsight.torch.compare_backends          # the first use imports it
        assert "opsight.compare_backends" in sys.modules
        # The local or, with cluster=, the remote comparison (opsight.remote.compare).
        assert function is sys.modules["opsight.remote.compare"].compare_backends
        assert "ray" not in sys.modules
        assert opsight.torch.BUILTIN_BACKENDS == ("eager", "inductor", "torchscript", "onnxruntime")
        from opsight.torch import CompareBackendsResult, Segment  # noqa: F401
        print("ok")
    """)
    completed = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                               timeout=120)
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.strip() == "ok"


def test_the_package_imported_first_leaves_the_function_in_place():
    program = textwrap.dedent("""
        import opsight.compare_backends.command
        import opsight.torch
        assert opsight.torch.compare_backends.__name__ == "compare_backends"
        assert callable(opsight.torch.compare_backends)
        print("ok")
    """)
    completed = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                               timeout=120)
    assert completed.returncode == 0, completed.stderr


# ---- one factory loader and one back-end vocabulary with opsight bench ----------------------

def test_backend_aliases_resolve_to_the_same_compilers():
    from opsight.compare_backends.backends import (_compile_inductor, _compile_onnxruntime,
                                                   resolve_backends)
    resolved = dict(resolve_backends(["compile", "ort-cpu", "jit"]))
    assert resolved["compile"] is _compile_inductor
    assert resolved["ort-cpu"] is _compile_onnxruntime
    assert list(resolved) == ["compile", "ort-cpu", "jit"]  # labelled as given
    assert dict(resolve_backends(["inductor"]))["inductor"] is _compile_inductor
    with pytest.raises(ValueError, match="names the same one"):
        resolve_backends(["inductor", "compile"])
    with pytest.raises(ValueError, match="opsight bench's only"):
        resolve_backends(["ort-cuda"])


def test_an_alias_runs_like_its_backend():
    fn, inputs = make_function()
    result = compare_backends(fn, inputs, ["eager", "ort-cpu"], repeats=1, warmups=1)
    graphs = [segment for segment in result.segments if segment.kind == "graph"]
    assert graphs and all(segment.backends["ort-cpu"].runs == 1 for segment in graphs)
    assert "onnxruntime" in result.environment


def test_command_and_bench_share_the_factory_loader(factory_file, monkeypatch):
    from opsight.compare_backends import command
    from opsight.models import FactoryError, load_factory

    factory, attribute = load_factory(f"{factory_file}:make")
    assert attribute == "make" and callable(factory)
    loaded = []
    monkeypatch.setattr("opsight.models.loading.load_factory",
                        lambda spec: loaded.append(spec) or (factory, "make"))
    assert command._load_factory("anything:make") is factory and loaded == ["anything:make"]
    with pytest.raises(FactoryError, match="has no attribute 'missing'"):
        load_factory(f"{factory_file}:missing")
