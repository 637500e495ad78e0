"""Foreign traces made by the real tools, read by the real CLI.

At test time this generates fresh PyTorch-profiler traces (torch.profiler over a tiny
nn.Sequential or one nn.TransformerEncoderLayer, export_chrome_trace, with and without
Python stacks) and fresh ONNX Runtime profiles (a tiny graph built with onnx.helper,
SessionOptions.enable_profiling, optimised and not), runs
`opsight report FILE --summary --format json` on each, and checks every row against
numbers computed here, independently, from the JSON file with the json module: for each
name, the count, total, min and max of the X events' durations (round(dur * 1000) ns), and
the category after mapping, by the table of docs/reports.md ("Foreign traces") written
out again below. The detected source format, the recorded category map and the ONNX Runtime
node arguments are checked through the Python package (opsight.load).
"""
import collections
import json
import pathlib

import pytest

from conftest import load_fixture_generators

import opsight

ROOT = pathlib.Path(__file__).resolve().parents[2]


# The category mapping of docs/reports.md, "Foreign traces", written out independently of
# the reader: (category as written, name test or None, canonical category), first match wins.
PYTORCH_CATEGORIES = [
    ("cpu_op", None, "operator"),
    ("Operator", None, "operator"),
    ("kernel", None, "gpu_kernel"),
    ("Kernel", None, "gpu_kernel"),
    ("gpu_memcpy", None, "gpu_memcpy"),
    ("Memcpy", None, "gpu_memcpy"),
    ("gpu_memset", None, "gpu_memset"),
    ("Memset", None, "gpu_memset"),
    ("cuda_runtime", None, "cuda_runtime"),
    ("cuda_driver", None, "cuda_runtime"),
    ("Runtime", None, "cuda_runtime"),
    ("python_function", lambda name: name.startswith("nn.Module: "), "module"),
    ("python_function", None, "python"),
    ("user_annotation", None, "annotation"),
    ("gpu_user_annotation", None, "annotation"),
    ("Trace", None, "profiler"),
    ("overhead", None, "profiler"),
]
ONNXRUNTIME_CATEGORIES = [
    ("Session", None, "session"),
    ("Node", lambda name: name.endswith("_kernel_time"), "operator"),
    ("Node", lambda name: name.endswith(("_fence_before", "_fence_after")), "operator_fence"),
    ("Kernel", None, "gpu_kernel"),
    ("Api", None, "cuda_runtime"),
]
TABLES = {"pytorch-profiler": PYTORCH_CATEGORIES, "onnxruntime": ONNXRUNTIME_CATEGORIES}


def _mapped_category(source_format, category, name):
    for written, name_test, canonical in TABLES.get(source_format, []):
        if category == written and (name_test is None or name_test(name)):
            return canonical
    return category


def _expected_stats(path, source_format=None):
    """Per span name: count, total, min and max duration in ns, and the category after
    mapping, computed from the JSON."""
    with open(path, encoding="utf-8") as file:
        document = json.load(file)
    events = document["traceEvents"] if isinstance(document, dict) else document
    durations = collections.defaultdict(list)
    categories = collections.defaultdict(collections.Counter)
    for event in events:
        if not isinstance(event, dict) or event.get("ph") != "X":
            continue
        if not isinstance(event.get("ts"), (int, float)):
            continue
        name = event.get("name", "")
        durations[name].append(max(0, round(event.get("dur", 0) * 1000)))
        categories[name][_mapped_category(source_format, event.get("cat", ""), name)] += 1
    expected = {}
    for key, values in durations.items():
        (category, count), *others = categories[key].most_common()
        # The report shows a name's most common category; a tie would make that a choice.
        assert not others or others[0][1] < count, f"{key}: tied categories {categories[key]}"
        expected[key] = {"count": len(values), "total_ns": sum(values), "min_ns": min(values),
                         "max_ns": max(values), "category": category}
    return expected


def _summary(opsight_cli, path):
    completed = opsight_cli("report", path, "--summary", "--format", "json")
    assert completed.returncode == 0, completed.stderr
    rows = json.loads(completed.stdout)
    assert isinstance(rows, list) and rows, completed.stdout[:2000]  # the documented interface
    for row in rows:
        for field in ("name", "count", "total_ns", "min_ns", "mean_ns", "p50_ns", "p90_ns",
                      "p99_ns", "max_ns"):
            assert field in row, f"summary row lacks {field}: {row}"
    return rows


def _check_summary_against_file(opsight_cli, path, source_format):
    rows = _summary(opsight_cli, path)
    expected = _expected_stats(path, source_format)
    actual = {}
    for row in rows:
        key = row["name"]
        assert key not in actual, f"two summary rows for {key}"
        actual[key] = row
    assert set(actual) == set(expected)
    for key, stats in expected.items():
        row = actual[key]
        exact = ("count", "category") if _may_be_clipped(stats["category"]) else (
            "count", "total_ns", "min_ns", "max_ns", "category")
        for field in exact:
            assert row[field] == stats[field], f"{key}: {field} {row[field]} != {stats[field]}"
        for field in ("total_ns", "min_ns", "max_ns"):
            assert row[field] <= stats[field], f"{key}: {field} {row[field]} > {stats[field]}"
        assert row["min_ns"] <= row["p50_ns"] <= row["p90_ns"] <= row["p99_ns"] <= row["max_ns"]
        assert row["min_ns"] <= row["mean_ns"] <= row["max_ns"]
    return expected


def _category_map(trace, tmp_path):
    """The reader's recorded category map, as (written, canonical) pairs, from the trace's
    run info, and the same read back from a Chrome JSON copy of the trace (run extras
    travel under otherData.extra)."""
    copy = tmp_path / "copy.json"
    trace.write(str(copy))
    with open(copy, encoding="utf-8") as file:
        extra = json.load(file)["otherData"].get("extra", {})
    assert "category_map" in extra, extra
    assert trace.run_info()["extra"]["category_map"] == extra["category_map"]
    return [tuple(entry.split("=")) for entry in extra["category_map"].split(",")]


def _may_be_clipped(category):
    """PyTorch's Python functions (modules among them) nest with the operators on one
    thread; where they overlap without nesting the Python function gives way (docs/
    reports.md, "PyTorch's modules enclose their operators"), so it may be shorter than
    the file says. Operators and everything else keep their exact durations."""
    return category in ("python", "module")


def _check_slices_against_file(trace, path, source_format):
    """Every slice's (name, category, dur) against the file's X events, mapped here."""
    with open(path, encoding="utf-8") as file:
        document = json.load(file)
    events = document["traceEvents"] if isinstance(document, dict) else document
    expected = collections.Counter(
        (event["name"], _mapped_category(source_format, event.get("cat", ""), event["name"]),
         max(0, round(event.get("dur", 0) * 1000)))
        for event in events if event.get("ph") == "X")
    columns = trace.slice_columns()
    actual = collections.Counter(zip(columns["name"], columns["category"], columns["dur"]))
    exact = lambda counter: collections.Counter(
        {key: count for key, count in counter.items() if not _may_be_clipped(key[1])})
    assert exact(actual) == exact(expected)
    def counts_by_name(counter):
        counts = collections.Counter()
        for (name, category, _), count in counter.items():
            if _may_be_clipped(category):
                counts[(name, category)] += count
        return counts

    assert counts_by_name(actual) == counts_by_name(expected)
    total = lambda counter: sum(dur * count for (_, category, dur), count in counter.items()
                                if _may_be_clipped(category))
    assert total(actual) <= total(expected)


def test_pytorch_profiler_trace(opsight_cli, tmp_path):
    path = tmp_path / "pytorch_trace.json"
    load_fixture_generators().make_pytorch_profiler_trace(path, iterations=5)
    expected = _check_summary_against_file(opsight_cli, path, "pytorch-profiler")
    assert expected["inference_step"]["count"] == 5
    assert expected["inference_step"]["category"] == "annotation"
    assert expected["aten::linear"]["count"] == 10
    assert expected["aten::linear"]["category"] == "operator"
    trace = opsight.load(path).trace
    assert trace.run_info()["source_format"] == "pytorch-profiler"
    _check_slices_against_file(trace, path, "pytorch-profiler")
    assert _category_map(trace, tmp_path) == [
        ("cpu_op", "operator"), ("user_annotation", "annotation"), ("Trace", "profiler")]


def test_pytorch_profiler_trace_of_a_transformer_layer_with_python_stacks(opsight_cli, tmp_path):
    """with_stack=True adds python_function events, nn.Module calls among them."""
    path = tmp_path / "pytorch_transformer.json"
    load_fixture_generators().make_pytorch_profiler_trace(
        path, iterations=3, model="transformer", with_stack=True)
    expected = _check_summary_against_file(opsight_cli, path, "pytorch-profiler")
    assert expected["nn.Module: TransformerEncoderLayer_0"]["count"] == 3
    assert expected["nn.Module: TransformerEncoderLayer_0"]["category"] == "module"
    categories = {stats["category"] for stats in expected.values()}
    assert {"module", "python", "operator", "annotation", "profiler"} <= categories
    trace = opsight.load(path).trace
    assert trace.run_info()["source_format"] == "pytorch-profiler"
    _check_slices_against_file(trace, path, "pytorch-profiler")
    assert _category_map(trace, tmp_path) == [
        ("cpu_op", "operator"), ("python_function[nn.Module: *]", "module"),
        ("python_function", "python"), ("user_annotation", "annotation"),
        ("Trace", "profiler")]


def test_onnxruntime_profile(opsight_cli, tmp_path):
    path = tmp_path / "ort_profile.json"
    load_fixture_generators().make_onnxruntime_trace(path, iterations=4)
    expected = _check_summary_against_file(opsight_cli, path, "onnxruntime")
    assert expected["model_run"]["count"] == 4
    assert expected["model_run"]["category"] == "session"
    trace = opsight.load(path).trace
    assert trace.run_info()["source_format"] == "onnxruntime"
    _check_slices_against_file(trace, path, "onnxruntime")


def test_onnxruntime_profile_of_unfused_nodes_keeps_op_provider_and_shapes(opsight_cli, tmp_path):
    path = tmp_path / "ort_profile_unfused.json"
    load_fixture_generators().make_onnxruntime_trace(path, iterations=3, optimize=False)
    expected = _check_summary_against_file(opsight_cli, path, "onnxruntime")
    for node in ("matmul", "add", "relu"):
        assert expected[f"{node}_kernel_time"]["count"] == 3
        assert expected[f"{node}_kernel_time"]["category"] == "operator"
    trace = opsight.load(path).trace
    assert trace.run_info()["source_format"] == "onnxruntime"
    _check_slices_against_file(trace, path, "onnxruntime")
    assert _category_map(trace, tmp_path) == [
        ("Session", "session"), ("Node[*_kernel_time]", "operator")]
    # Each node's arguments, as the file has them (shapes as compact JSON text).
    with open(path, encoding="utf-8") as file:
        nodes = [event for event in json.load(file) if event.get("cat") == "Node"]
    expected_args = collections.Counter(
        (event["name"], event["args"]["op_name"], event["args"]["provider"],
         json.dumps(event["args"]["input_type_shape"], separators=(",", ":")),
         json.dumps(event["args"]["output_type_shape"], separators=(",", ":")))
        for event in nodes)
    columns = trace.slice_columns()
    attributes = columns["attributes"]
    actual_args = collections.Counter(
        (columns["name"][row], attributes["op_name"][row], attributes["provider"][row],
         attributes["input_type_shape"][row], attributes["output_type_shape"][row])
        for row in range(len(columns["name"])) if columns["category"][row] == "operator")
    assert actual_args == expected_args
    assert {key[1] for key in actual_args} == {"MatMul", "Add", "Relu"}


def test_unterminated_pytorch_trace_is_read_up_to_the_cut(opsight_cli, tmp_path):
    """A trace cut in the middle of an event still reports the complete events before it."""
    whole = tmp_path / "whole.json"
    load_fixture_generators().make_pytorch_profiler_trace(whole, iterations=2)
    text = whole.read_text(encoding="utf-8")
    cut_at = text.index('"name": "aten::relu"')  # inside the first aten::relu event
    cut = tmp_path / "cut.json"
    cut.write_text(text[:cut_at], encoding="utf-8")
    completed = opsight_cli("report", cut, "--summary", "--format", "json")
    # Exit status 2 flags the damage; the report of what was read is still printed, and
    # stderr names the byte where the cut event starts.
    assert completed.returncode == 2, completed.stderr
    assert completed.stdout.strip(), completed.stderr
    assert f"at byte {text.rindex('{', 0, cut_at)}" in completed.stderr, completed.stderr
    rows = json.loads(completed.stdout)
    names = {row["name"] for row in rows}
    assert "aten::linear" in names
    assert "aten::relu" not in names
