"""opsight.onnxruntime: run spans, and ONNX Runtime's own node events merged under them."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from conftest import PYTHON, opsight_run, require, run, spans_of, write

onnxruntime = require("onnxruntime")
onnx = require("onnx")
numpy = require("numpy")

import opsight  # noqa: E402
import opsight.onnxruntime as opsight_ort  # noqa: E402

NODES = ("matmul", "add", "relu")


def tiny_model(path: Path, width: int = 16, seed: int = 0) -> Path:
    """MatMul + Add + Relu with random weights, saved at ``path``."""
    from onnx import TensorProto, helper, numpy_helper

    generator = numpy.random.default_rng(seed)
    weight = numpy_helper.from_array(generator.random((width, width), dtype=numpy.float32), "W")
    bias = numpy_helper.from_array(generator.random(width, dtype=numpy.float32), "B")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["m"], name="matmul"),
         helper.make_node("Add", ["m", "B"], ["a"], name="add"),
         helper.make_node("Relu", ["a"], ["y"], name="relu")],
        "tiny",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, width])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, width])],
        [weight, bias])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


def unfused_options():
    """The user's own options: no graph optimisation, so each node runs as its own kernel."""
    options = onnxruntime.SessionOptions()
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.intra_op_num_threads = 1
    return options


def new_session(path: Path, options=None):
    return onnxruntime.InferenceSession(str(path), options or unfused_options(),
                                        providers=["CPUExecutionProvider"])


def feed(rows: int = 4, width: int = 16):
    return {"x": numpy.ones((rows, width), dtype=numpy.float32)}


@pytest.fixture(autouse=True)
def _uninstrumented_afterwards():
    yield
    opsight_ort.uninstrument()


class Row(dict):
    """A span of the DataFrame, its columns as attributes (missing ones are None)."""

    def __getattr__(self, key):
        value = self.get(key)
        return None if isinstance(value, float) and value != value else value  # NaN: absent


def records(frame):
    return [Row(record) for record in frame.to_dict("records")]


def by_id(frame):
    return {row.span_id: row for row in records(frame)}


def ancestors(rows, row):
    chain = []
    while row.parent_span_id is not None:
        row = rows[row.parent_span_id]
        chain.append(row)
    return chain


def kernel_rows(frame):
    return [row for row in records(frame) if row.name.endswith("_kernel_time")]


def check_nesting(frame, run_name: str, runs: int, threads: set[int] | None = None):
    """Every node kernel sits under model_run under the opsight run span of its thread,
    inside it in time; each run span holds one kernel per node."""
    rows = by_id(frame)
    run_spans = frame[frame["name"] == run_name]
    assert len(run_spans) == runs
    kernels = [row for row in kernel_rows(frame) if row.tid in set(run_spans["tid"])]
    per_run: dict[str, list[str]] = {}
    for kernel in kernels:
        chain = ancestors(rows, kernel)
        names = [row.name for row in chain]
        assert names[:2] == ["SequentialExecutor::Execute", "model_run"], names
        assert names[2] == run_name, names
        for child, parent in zip([kernel, *chain], chain):
            assert parent.start <= child.start and child.end <= parent.end, (child, parent)
            assert child.tid == parent.tid
        per_run.setdefault(chain[2].span_id, []).append(kernel.name)
        assert kernel.category == "operator"
        assert kernel.provider == "CPUExecutionProvider"
        assert kernel.op_name in ("MatMul", "Add", "Relu")
    assert len(kernels) == len(NODES) * runs
    assert sorted(per_run) == sorted(run_spans["span_id"])
    for names in per_run.values():
        assert sorted(names) == sorted(f"{node}_kernel_time" for node in NODES)
    if threads is not None:
        assert set(run_spans["tid"]) == threads
    return run_spans


def test_node_events_nest_under_the_run_span_that_ran_them(tmp_path):
    model = tiny_model(tmp_path / "tiny.onnx")
    options = unfused_options()
    with opsight_ort.instrumented():
        session = new_session(model, options)
        # the user's options object is as it was, and their settings were used
        assert options.enable_profiling is False
        assert options.profile_file_prefix == onnxruntime.SessionOptions().profile_file_prefix
        assert options.graph_optimization_level == onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
        session.run(None, feed())  # warm-up, before the recording: not in the trace
        with opsight.profile() as prof:
            for _ in range(5):
                session.run(None, feed())
    assert not opsight_ort.is_instrumented()
    frame = prof.dataframe()
    check_nesting(frame, "onnxruntime.run tiny", 5, {threading.get_native_id()})
    assert (frame["name"] == "model_run").sum() == 5
    assert (frame["name"] == "session_initialization").sum() == 0  # before the recording
    shapes = frame[frame["name"] == "matmul_kernel_time"]["input_type_shape"].iloc[0]
    assert "4" in str(shapes) and "16" in str(shapes)
    [alignment] = opsight_ort.alignments()
    assert alignment["model_runs"] == alignment["matched"] == alignment["contained"] == 5
    assert not Path(alignment["file"]).exists()  # opsight's temporary file is removed
    operators = prof.report("operators", "json")
    assert "MatMul" in operators or "matmul" in operators


def test_two_sessions_from_two_threads(tmp_path):
    opsight_ort.instrument()
    opsight_ort.instrument()  # idempotent
    first = new_session(tiny_model(tmp_path / "first.onnx", seed=1))
    second = new_session(tiny_model(tmp_path / "second.onnx", width=8, seed=2))
    tids: dict[str, int] = {}
    barrier = threading.Barrier(2)

    def work(name, session, width):
        tids[name] = threading.get_native_id()
        barrier.wait()
        for _ in range(20):
            session.run(None, feed(width=width))

    with opsight.profile() as prof:
        threads = [threading.Thread(target=work, args=("first", first, 16)),
                   threading.Thread(target=work, args=("second", second, 8))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    frame = prof.dataframe()
    check_nesting(frame, "onnxruntime.run first", 20, {tids["first"]})
    check_nesting(frame, "onnxruntime.run second", 20, {tids["second"]})
    assert len(kernel_rows(frame)) == 2 * 20 * len(NODES)
    assert {entry["contained"] for entry in opsight_ort.alignments()} == {20}


def test_run_with_iobinding_and_exceptions(tmp_path):
    opsight_ort.instrument()
    session = new_session(tiny_model(tmp_path / "bound.onnx"))
    binding = session.io_binding()
    binding.bind_cpu_input("x", feed()["x"])
    binding.bind_output("y")
    with opsight.profile() as prof:
        session.run_with_iobinding(binding)
        with pytest.raises(Exception) as raised:
            session.run(None, {"x": numpy.ones((2, 3), dtype=numpy.float32)})
    frame = prof.dataframe()
    check_nesting(frame, "onnxruntime.run_with_iobinding bound", 1)
    failed = frame[frame["name"] == "onnxruntime.run bound"]
    assert len(failed) == 1
    assert failed["exception.type"].iloc[0].endswith(type(raised.value).__name__)


def test_uninstrument_restores_the_class(tmp_path, monkeypatch):
    before = {name: vars(onnxruntime.InferenceSession).get(name)
              for name in ("__init__", "run", "run_with_iobinding", "end_profiling")}
    opsight_ort.instrument()
    assert vars(onnxruntime.InferenceSession)["run"] is not before["run"]
    opsight_ort.uninstrument()
    opsight_ort.uninstrument()
    after = {name: vars(onnxruntime.InferenceSession).get(name) for name in before}
    assert after == before
    session = new_session(tiny_model(tmp_path / "plain.onnx"))
    assert session.get_profiling_start_time_ns() == 0  # no profiling asked for
    monkeypatch.setenv("OPSIGHT_ONNXRUNTIME", "off")  # else the session instruments it
    with opsight.profile() as prof:
        session.run(None, feed())
    assert len(prof.dataframe()) == 0


def test_a_session_the_user_profiles_keeps_its_file(tmp_path):
    options = unfused_options()
    options.enable_profiling = True
    options.profile_file_prefix = str(tmp_path / "mine")
    with opsight_ort.instrumented():
        session = new_session(tiny_model(tmp_path / "user.onnx"), options)
        with opsight.profile() as prof:
            session.run(None, feed())
    check_nesting(prof.dataframe(), "onnxruntime.run user", 1)
    assert options.profile_file_prefix == str(tmp_path / "mine")
    [alignment] = opsight_ort.alignments()
    assert Path(alignment["file"]).exists() and Path(alignment["file"]).name.startswith("mine")


def test_a_damaged_profile_is_a_warning_and_the_spans_stay(tmp_path, capfd):
    with opsight_ort.instrumented():
        session = new_session(tiny_model(tmp_path / "broken.onnx"))
        with opsight.profile() as prof:
            session.run(None, feed())
            path = session.end_profiling()  # the program ends it itself, then it is damaged
            Path(path).write_text("this is not a profile", encoding="utf-8")
    frame = prof.dataframe()
    assert list(frame["name"]) == ["onnxruntime.run broken"]
    error = capfd.readouterr().err
    assert path in error and "warning" in error


PROGRAM = """
    import numpy, onnx, onnxruntime
    from onnx import TensorProto, helper, numpy_helper

    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["m"], name="matmul"),
         helper.make_node("Add", ["m", "B"], ["a"], name="add"),
         helper.make_node("Relu", ["a"], ["y"], name="relu")],
        "tiny",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, 16])],
        [numpy_helper.from_array(numpy.ones((16, 16), numpy.float32), "W"),
         numpy_helper.from_array(numpy.ones(16, numpy.float32), "B")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, "served.onnx")
    options = onnxruntime.SessionOptions()
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = onnxruntime.InferenceSession("served.onnx", options,
                                           providers=["CPUExecutionProvider"])
    for _ in range(3):
        session.run(None, {"x": numpy.ones((2, 16), numpy.float32)})
    print("done")
"""


def test_a_targets_entry_merges_the_profile_under_opsight_run(tmp_path):
    write(tmp_path, "serve.py", PROGRAM)
    write(tmp_path, "targets.yaml", """
        - module: onnxruntime
          class: InferenceSession
          function: run
    """)
    result = opsight_run(["-c", "targets.yaml", "-o", "out.opsight", "--report", "none",
                          PYTHON, "serve.py"], tmp_path, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "never resolved" not in result.stderr
    check_nesting(spans_of(tmp_path / "out.opsight"), "onnxruntime.run served", 3)


def test_the_environment_switch_merges_the_profile(tmp_path):
    write(tmp_path, "serve.py", PROGRAM)
    result = run([PYTHON, "serve.py"], tmp_path, timeout=120, OPSIGHT_OUTPUT="out.json",
                 OPSIGHT_ONNXRUNTIME="1")
    assert result.returncode == 0, result.stderr
    assert "done" in result.stdout
    check_nesting(spans_of(tmp_path / "out.json"), "onnxruntime.run served", 3)


# ---- instrumented when imported, as torch is traced ------------------------------------------
def test_opsight_run_records_an_onnxruntime_program_with_no_flag(tmp_path):
    write(tmp_path, "serve.py", PROGRAM)
    result = opsight_run(["-o", "out.opsight", "--report", "none", PYTHON, "serve.py"], tmp_path,
                         timeout=120)
    assert result.returncode == 0, result.stderr
    check_nesting(spans_of(tmp_path / "out.opsight"), "onnxruntime.run served", 3)


def test_the_environment_switch_turns_it_off(tmp_path):
    write(tmp_path, "serve.py", PROGRAM)
    result = opsight_run(["-o", "out.opsight", "--report", "none", PYTHON, "serve.py"], tmp_path,
                         timeout=120, OPSIGHT_ONNXRUNTIME="off")
    assert result.returncode == 0, result.stderr
    assert "done" in result.stdout
    names = set(spans_of(tmp_path / "out.opsight")["name"])
    assert not any("onnxruntime" in name or name.endswith("_kernel_time") for name in names)


def test_a_profile_around_a_session_records_it_and_puts_the_class_back(tmp_path):
    session_class_run = onnxruntime.InferenceSession.run
    session = new_session(tiny_model(tmp_path / "plain.onnx"))  # before the recording
    session.run(None, feed())
    assert not opsight_ort.is_instrumented()
    with opsight.profile() as prof:
        for _ in range(3):
            session.run(None, feed())
    assert not opsight_ort.is_instrumented()  # the session's instrumentation only
    assert onnxruntime.InferenceSession.run is session_class_run
    frame = prof.dataframe()
    check_nesting(frame, "onnxruntime.run plain", 3)
    assert len(enable_spans(frame, "plain")) == 1  # its profiler was off: re-created
    with opsight.profile() as prof:  # the next recording instruments it again
        later = new_session(tiny_model(tmp_path / "later.onnx", seed=1))  # during it
        later.run(None, feed())
    frame = prof.dataframe()
    check_nesting(frame, "onnxruntime.run later", 1)
    assert len(enable_spans(frame, "later")) == 0  # profiled from its creation
    assert not opsight_ort.is_instrumented()


def test_the_programs_own_instrumentation_outlives_the_session(tmp_path, monkeypatch):
    session = new_session(tiny_model(tmp_path / "own.onnx"))
    with opsight.profile():
        with opsight_ort.instrumented():  # already the session's: left to the session
            session.run(None, feed())
        assert opsight_ort.is_instrumented()
    assert not opsight_ort.is_instrumented()
    opsight_ort.instrument()
    with opsight.profile():
        session.run(None, feed())
    assert opsight_ort.is_instrumented()  # the program's own, kept
    opsight_ort.uninstrument()
    monkeypatch.setenv("OPSIGHT_ONNXRUNTIME", "off")
    with opsight.profile() as prof:
        session.run(None, feed())
    assert not opsight_ort.is_instrumented() and len(prof.dataframe()) == 0


# ---- every recording: ORT's profiler is switched on only at session creation ----------------
def enable_spans(frame, label: str):
    return frame[frame["name"] == f"onnxruntime.enable_profiling {label}"]


def test_every_recording_over_one_session_gets_its_node_events(tmp_path):
    opsight_ort.instrument()
    session = new_session(tiny_model(tmp_path / "reused.onnx"))
    expected = session.run(None, feed())[0]
    for recording in range(3):
        with opsight.profile() as prof:
            for _ in range(recording + 2):
                outputs = session.run(None, feed())
        frame = prof.dataframe()
        run_spans = check_nesting(frame, "onnxruntime.run reused", recording + 2)
        [alignment] = opsight_ort.alignments()
        assert alignment["contained"] == recording + 2
        assert not Path(alignment["file"]).exists()
        # the first recording had the profiler from the session's creation; the later ones
        # re-created the session, before their first run and shown as a span of its own
        enabling = enable_spans(frame, "reused")
        assert len(enabling) == (0 if recording == 0 else 1)
        if recording:
            assert enabling["end"].iloc[0] <= run_spans["start"].min()
        assert numpy.array_equal(outputs[0], expected)  # the same model, the same answer
    assert session.get_session_options().graph_optimization_level == \
        onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
    with opsight.profile() as prof:  # a recording it does not run in: nothing re-created
        pass
    assert len(prof.dataframe()) == 0


def test_a_session_created_before_instrument_gets_node_events(tmp_path):
    options = unfused_options()
    session = new_session(tiny_model(tmp_path / "early.onnx"), options)
    bytes_session = onnxruntime.InferenceSession(
        (tmp_path / "early.onnx").read_bytes(), unfused_options(),
        providers=["CPUExecutionProvider"])
    assert session.get_profiling_start_time_ns() == 0  # ORT's profiler is off
    opsight_ort.instrument()
    for each, label in ((session, "early"), (bytes_session, "tiny")):  # bytes: the graph's name
        with opsight.profile() as prof:
            for _ in range(3):
                each.run(None, feed())
        frame = prof.dataframe()
        check_nesting(frame, f"onnxruntime.run {label}", 3)
        assert len(enable_spans(frame, label)) == 1
    # the program's own options object is as it was, and still the session's initial one
    assert options.enable_profiling is False
    assert options.profile_file_prefix == onnxruntime.SessionOptions().profile_file_prefix
    assert session._sess_options_initial is options


def test_two_threads_starting_on_an_old_session_both_get_node_events(tmp_path):
    session = new_session(tiny_model(tmp_path / "shared.onnx"))
    opsight_ort.instrument()
    barrier = threading.Barrier(2)
    tids = set()

    def work():
        tids.add(threading.get_native_id())
        barrier.wait()
        for _ in range(5):
            session.run(None, feed())

    with opsight.profile() as prof:
        threads = [threading.Thread(target=work) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    frame = prof.dataframe()
    check_nesting(frame, "onnxruntime.run shared", 10, tids)
    assert len(enable_spans(frame, "shared")) == 1


def test_a_session_held_by_an_io_binding_is_not_recreated_and_says_why(tmp_path, capfd):
    session = new_session(tiny_model(tmp_path / "held.onnx"))
    binding = session.io_binding()  # holds the native session: swapping it would strand it
    binding.bind_cpu_input("x", feed()["x"])
    binding.bind_output("y")
    native_session = session._sess
    opsight_ort.instrument()
    with opsight.profile() as prof:
        session.run_with_iobinding(binding)
        session.run(None, feed())
    frame = prof.dataframe()
    assert sorted(frame["name"]) == ["onnxruntime.enable_profiling held",
                                     "onnxruntime.run held", "onnxruntime.run_with_iobinding held"]
    assert session._sess is native_session
    assert binding.copy_outputs_to_cpu()[0].shape == (4, 16)
    error = capfd.readouterr().err
    assert "held.onnx" in error and "IOBinding" in error and "only when a session is created" in error


def test_recreating_switched_off_or_impossible_is_a_warning(tmp_path, capfd):
    path = tiny_model(tmp_path / "gone.onnx")
    session = new_session(path)
    opsight_ort.instrument(recreate_sessions=False)
    with opsight.profile() as prof:
        session.run(None, feed())
    assert list(prof.dataframe()["name"]) == ["onnxruntime.run gone"]
    error = capfd.readouterr().err
    assert "gone.onnx" in error and "recreate_sessions=False" in error
    opsight_ort.uninstrument()
    opsight_ort.instrument()
    path.unlink()  # the model cannot be loaded again
    with opsight.profile() as prof:
        outputs = session.run(None, feed())
    assert outputs[0].shape == (4, 16)  # the old session still runs
    assert sorted(prof.dataframe()["name"]) == ["onnxruntime.enable_profiling gone",
                                                "onnxruntime.run gone"]
    error = capfd.readouterr().err
    assert "gone.onnx" in error and "not re-created" in error
