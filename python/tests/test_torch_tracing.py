"""torch operators and module calls as opsight spans (opsight.torch), with the real torch."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import pytest

from conftest import require

torch = require("torch")

import opsight  # noqa: E402
import opsight.torch  # noqa: E402


class Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.attention = torch.nn.Linear(16, 16)
        self.out = torch.nn.Linear(16, 8)

    def forward(self, x):
        return self.out(torch.relu(self.attention(x)))


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layer = torch.nn.ModuleList([Block(), torch.nn.Sequential(torch.nn.Linear(8, 16))])

    def forward(self, x):
        for layer in self.layer:
            x = layer(x)
        return x


@pytest.fixture(autouse=True)
def automatic_default():
    """Each test starts from the automatic default (no enable()/disable() in force)."""
    from opsight.torch import _tracing

    def reset():
        _tracing._state.suspended = None
        _tracing._apply(_tracing.TorchTracing(operators=False, modules=False))
        _tracing._state.explicit = False

    reset()
    yield
    reset()


def rows(profile) -> list[dict]:
    columns = profile.trace.slice_columns()
    columns.update(columns.pop("attributes"))
    keys = [key for key, value in columns.items() if isinstance(value, list)]
    count = len(columns["name"])
    return [{key: columns[key][index] for key in keys} for index in range(count)]


def ancestors(row: dict, by_id: dict) -> list[str]:
    names = []
    while row["parent_span_id"] is not None:
        row = by_id[row["parent_span_id"]]
        names.append(row["name"])
    return names


def run_model(model, inputs):
    @opsight.trace("infer")
    def infer():
        with torch.no_grad():
            return model(inputs)

    with opsight.profile() as profile:
        infer()
    return profile


def test_operators_and_modules_nest_under_the_python_span_that_called_them():
    profile = run_model(Net(), torch.randn(4, 16))
    slices = rows(profile)
    by_id = {row["span_id"]: row for row in slices}
    names = [row["name"] for row in slices]
    for path in ("Net", "layer.0", "layer.0.attention", "layer.0.out", "layer.1", "layer.1.0"):
        assert path in names, f"module span {path} missing from {sorted(set(names))}"
    module_rows = {row["name"]: row for row in slices if row["category"] == "module"}
    assert ancestors(module_rows["layer.0.attention"], by_id) == ["layer.0", "Net", "infer"]
    assert ancestors(module_rows["layer.1.0"], by_id) == ["layer.1", "Net", "infer"]
    linears = [row for row in slices if row["name"] == "aten::linear"]
    assert len(linears) == 3  # one per nn.Linear call
    assert all(row["category"] == "operator" for row in linears)
    assert {ancestors(row, by_id)[0] for row in linears} == {"layer.0.attention", "layer.0.out",
                                                             "layer.1.0"}
    relu = [row for row in slices if row["name"] == "aten::relu"]
    assert len(relu) == 1 and ancestors(relu[0], by_id)[:2] == ["layer.0", "Net"]
    # Same clock: every child lies inside its parent.
    for row in slices:
        if row["parent_span_id"] is not None:
            parent = by_id[row["parent_span_id"]]
            assert parent["start"] <= row["start"] and row["end"] <= parent["end"], row["name"]


def test_operators_are_counted_in_the_operator_table():
    profile = run_model(Net(), torch.randn(4, 16))
    table = {row["name"]: row for row in profile.operators()}
    assert table["aten::linear"]["count"] == 3
    assert table["aten::relu"]["count"] == 1
    assert "Net" not in table and "infer" not in table  # modules and Python spans are not operators


def test_the_overhead_includes_what_torch_spends_because_operators_are_observed():
    # torch builds a RecordFunction for every operator only because the observer is
    # installed; install() measures that floor and each recorded operator charges it.
    from opsight import _torch_observer as observer

    x = torch.ones(4)
    opsight.torch.enable()
    with opsight.profile() as profile:
        for _ in range(500):
            torch.neg(x)
    floor_ns = observer.floor_ns()
    assert 0 < floor_ns < 100_000, floor_ns  # a few hundred ns where it was measured
    operators = sum(1 for row in rows(profile) if row["category"] == "operator")
    assert operators >= 500
    overhead_ns = profile.trace.run_info()["overhead_ns"]
    # Before, only the recorder's own events (about 2 x 50 ns per operator) were counted.
    assert overhead_ns >= operators * floor_ns * 0.99, (overhead_ns, operators, floor_ns)


def test_input_shapes_on_request():
    opsight.torch.enable(shapes=True)
    profile = run_model(Net(), torch.randn(4, 16))
    slices = rows(profile)
    linear_shapes = sorted(row["input_shapes"] for row in slices if row["name"] == "aten::linear")
    assert linear_shapes == ["[[4, 16], [16, 16], [16]]", "[[4, 16], [8, 16], [8]]",
                             "[[4, 8], [16, 8], [16]]"]
    opsight.torch.disable()
    profile = run_model(Net(), torch.randn(4, 16))
    assert not any(row["category"] in ("operator", "module") for row in rows(profile))


def test_shapes_are_off_by_default():
    profile = run_model(Net(), torch.randn(2, 16))
    slices = rows(profile)
    assert any(row["name"] == "aten::linear" for row in slices)
    assert all(row.get("input_shapes") is None for row in slices)


def test_nothing_stays_switched_on_after_the_session():
    run_model(Net(), torch.randn(4, 16))
    status = opsight.torch.status()
    assert not status["operators"] and not status["modules"]
    assert torch.nn.Module.__call__ is torch.nn.Module._wrapped_call_impl


def test_record_function_ranges_are_annotations():
    with opsight.profile() as profile:
        with torch.profiler.record_function("my_preprocess"):
            torch.ones(3) + 1
    slices = rows(profile)
    by_id = {row["span_id"]: row for row in slices}
    annotation = [row for row in slices if row["name"] == "my_preprocess"]
    assert len(annotation) == 1 and annotation[0]["category"] == "annotation"
    add = [row for row in slices if row["name"] == "aten::add"]
    assert add and ancestors(add[0], by_id)[0] == "my_preprocess"


def test_each_thread_gets_its_own_operators():
    model = Net()

    def work():
        with opsight.span("worker"):
            with torch.no_grad():
                model(torch.randn(2, 16))

    with opsight.profile() as profile:
        thread = threading.Thread(target=work)
        thread.start()
        thread.join()
        with opsight.span("main"):
            with torch.no_grad():
                model(torch.randn(2, 16))
    slices = rows(profile)
    by_id = {row["span_id"]: row for row in slices}
    for root in ("worker", "main"):
        linears = [row for row in slices if row["name"] == "aten::linear"
                   and ancestors(row, by_id)[-1] == root]
        assert len(linears) == 3, root
        root_tid = next(row["tid"] for row in slices if row["name"] == root)
        assert {row["tid"] for row in linears} == {root_tid}


def test_a_forward_that_raises_leaves_the_tree_whole():
    class Failing(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = torch.nn.Linear(4, 4)

        def forward(self, x):
            self.inner(x)
            raise ValueError("boom")

    model = Failing()
    with opsight.profile() as profile:
        with opsight.span("outer"):
            with pytest.raises(ValueError):
                model(torch.randn(1, 4))
            with opsight.span("after"):
                torch.ones(2) * 2
    slices = rows(profile)
    by_id = {row["span_id"]: row for row in slices}
    after = next(row for row in slices if row["name"] == "after")
    assert ancestors(after, by_id) == ["outer"]
    failing = next(row for row in slices if row["name"] == "Failing")
    assert ancestors(failing, by_id) == ["outer"]
    assert not any(row["unfinished"] for row in slices)


def run_script(tmp_path, code: str, **environment) -> list[str]:
    output = tmp_path / "run.opsight"
    env = {**os.environ, "OPSIGHT_OUTPUT": str(output), **environment}
    subprocess.run([sys.executable, "-c", code], check=True, env=env, timeout=120)
    trace = opsight.load(output).trace
    columns = trace.slice_columns()
    return [f"{category}:{name}" for name, category in zip(columns["name"], columns["category"])]


def test_torch_imported_after_the_session_started_is_traced(tmp_path):
    names = run_script(tmp_path, "import torch\ntorch.nn.Linear(3, 2)(torch.ones(1, 3))\n")
    assert "operator:aten::linear" in names
    assert "module:Linear" in names


def test_opsight_torch_off_records_no_operators(tmp_path):
    names = run_script(tmp_path, "import torch\ntorch.nn.Linear(3, 2)(torch.ones(1, 3))\n",
                       OPSIGHT_TORCH="off")
    assert not any(name.startswith(("operator:", "module:")) for name in names)


def test_opsight_torch_modules_only(tmp_path):
    names = run_script(tmp_path, "import torch\ntorch.nn.Linear(3, 2)(torch.ones(1, 3))\n",
                       OPSIGHT_TORCH="modules")
    assert "module:Linear" in names
    assert not any(name.startswith("operator:") for name in names)


def test_the_tree_folds_operators_below_a_depth(tmp_path):
    profile = run_model(Net(), torch.randn(4, 16))
    folded = profile.report("tree", max_depth=2)
    assert "layer.0 (+" in folded and "nested)" in folded
    assert "aten::" not in folded and "layer.0.attention" not in folded
    assert "aten::addmm" in profile.report("tree")
    path = tmp_path / "model.opsight"
    profile.save(path)
    from opsight._core_command import core_command_path

    result = subprocess.run([core_command_path(), "report", str(path), "--tree", "--depth", "3"],
                            capture_output=True, text=True, check=True)
    assert "layer.0.attention (+" in result.stdout
    assert "aten::t" not in result.stdout


def test_tracing_block_puts_the_previous_choice_back():
    with opsight.torch.tracing(shapes=True):
        assert opsight.torch.status() == {"operators": True, "modules": True, "shapes": True,
                                          "explicit": True}
        profile = run_model(Net(), torch.randn(4, 16))
    assert any(row.get("input_shapes") for row in rows(profile))
    assert opsight.torch.status()["explicit"] is False  # the automatic default again
    profile = run_model(Net(), torch.randn(4, 16))
    assert any(row["name"] == "aten::linear" for row in rows(profile))
    assert not any(row.get("input_shapes") for row in rows(profile))
    opsight.torch.disable()
    with opsight.torch.tracing(modules=False):
        profile = run_model(Net(), torch.randn(4, 16))
    assert not any(row["category"] == "module" for row in rows(profile))
    assert opsight.torch.status() == {"operators": False, "modules": False, "shapes": False,
                                      "explicit": True}


def test_recording_puts_no_graph_break_into_a_compiled_model():
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    compiled = torch.compile(Net(), backend="eager")
    with opsight.profile() as profile:
        for _ in range(2):
            compiled(torch.randn(4, 16))
    assert dict(counters["graph_break"]) == {}
    assert counters["stats"]["unique_graphs"] == 1
    names = [row["name"] for row in rows(profile)]
    assert "aten::addmm" in names  # the compiled graph's operators are recorded
    assert any(name.startswith("Torch-Compiled Region") for name in names)
    torch._dynamo.reset()


def test_switching_tracing_off_inside_a_session_stops_observing_torch():
    """opsight.disable() (and opsight ctl PID off, which calls it) takes the operator
    observer and the module wrapper away, so a switched-off program pays nothing for them;
    opsight.enable() puts back what the session had switched on."""
    model, inputs = Net(), torch.randn(2, 16)
    with opsight.profile() as profile:
        with torch.no_grad():
            model(inputs)
            opsight.disable()
            try:
                assert torch.nn.Module.__call__ is torch.nn.Module._wrapped_call_impl
                assert not opsight.torch.status()["operators"]
                with opsight.span("while off"):
                    model(inputs)
            finally:
                opsight.enable()
            assert opsight.torch.status()["operators"] and opsight.torch.status()["modules"]
            model(inputs)
    slices = rows(profile)
    linears = [row for row in slices if row["name"] == "aten::linear"]
    modules = [row for row in slices if row["category"] == "module" and row["name"] == "Net"]
    assert len(linears) == 2 * 3 and len(modules) == 2  # the two forwards while on
    assert not any(row["name"] == "while off" for row in slices)


def test_a_session_started_while_switched_off_observes_torch_once_switched_on():
    model, inputs = Net(), torch.randn(2, 16)
    opsight.disable()
    try:
        with opsight.profile() as profile:
            with torch.no_grad():
                model(inputs)
                assert not opsight.torch.status()["operators"]
                opsight.enable()
                model(inputs)
    finally:
        opsight.enable()
    linears = [row for row in rows(profile) if row["name"] == "aten::linear"]
    assert len(linears) == 3
    assert not opsight.torch.status()["operators"]  # the session's end switched it off
