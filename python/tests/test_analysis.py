"""The analyses as Python data and DataFrames (merged tree, per-inference breakdown,
operator table, critical path) and ``opsight.compare``: every number checked against one
computed here, independently, from ``prof.dataframe()`` with numpy."""

from __future__ import annotations

import time

import numpy
import pandas
import pytest

import opsight


def _spin(seconds):
    """Busy-waits (CPU time, unlike sleep, is never cut short or stretched by the timer)."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


@opsight.trace("preprocess")
def preprocess(index):
    _spin(0.0001 * (1 + index % 3))


@opsight.trace("compute")
def compute(index):
    with opsight.span("aten::mm", category="operator"):
        _spin(0.0002)
    with opsight.span("aten::relu", category="operator"):
        _spin(0.00005)
    if index % 2 == 0:
        with opsight.span("aten::mm", category="operator"):
            _spin(0.0001)


@opsight.trace("postprocess")
def postprocess(index):
    if index % 4 == 0:
        _spin(0.00005)


@opsight.trace("infer")
def infer(index):
    preprocess(index)
    compute(index)
    postprocess(index)


@pytest.fixture(scope="module")
def prof():
    with opsight.profile() as profile:
        for index in range(40):
            infer(index)
    return profile


def _percentile(values, q):
    return float(numpy.percentile(numpy.asarray(values, dtype=numpy.float64), q))


def test_breakdown_matches_the_spans(prof):
    frame = prof.dataframe()
    inferences = frame[frame["name"] == "infer"].sort_values("start")
    data = prof.breakdown("infer")
    assert data["inference_count"] == 40
    phases = {phase["phase"]: phase for phase in data["phases"]}
    assert list(phases) == ["preprocess", "compute", "postprocess", "(uncovered)"]
    children = frame[frame["parent_span_id"].isin(inferences["span_id"])]
    for name in ("preprocess", "compute", "postprocess"):
        per_inference = [
            int(children[(children["parent_span_id"] == span_id) & (children["name"] == name)]["dur"].sum())
            for span_id in inferences["span_id"]]
        phase = phases[name]
        assert phase["min_ns"] == min(per_inference)
        assert phase["max_ns"] == max(per_inference)
        for key, q in (("p50_ns", 50), ("p75_ns", 75), ("p90_ns", 90), ("p99_ns", 99)):
            assert phase[key] == pytest.approx(_percentile(per_inference, q), abs=0.06), key
        assert phase["mean_ns"] == pytest.approx(numpy.mean(per_inference), abs=0.06)
    # postprocess spans exist in every inference (present_in counts inferences that have one).
    assert phases["postprocess"]["present_in"] == 40
    uncovered = phases["(uncovered)"]
    assert uncovered["min_ns"] >= 0
    total_mean = sum(phase["mean_ns"] for phase in data["phases"])
    assert total_mean == pytest.approx(data["total"]["mean_ns"], rel=1e-6)
    wall = inferences["end"].max() - inferences["start"].min()
    assert data["inferences_per_second"] == pytest.approx(40 * 1e9 / wall, rel=1e-9)

    table = prof.breakdown_dataframe("infer")
    assert list(table.index) == ["preprocess", "compute", "postprocess", "(uncovered)", "(total)"]
    assert table.loc["(total)", "count"] == 40


def test_breakdown_by_category_and_errors(prof):
    data = prof.breakdown("compute", by="category")
    assert [phase["phase"] for phase in data["phases"]] == ["operator", "(uncovered)"]
    with pytest.raises(ValueError, match="expected 'name' or 'category'"):
        prof.breakdown("infer", by="thread")
    assert prof.breakdown("no such span")["inference_count"] == 0


def test_operator_table(prof):
    frame = prof.dataframe()
    operators = frame[frame["category"] == "operator"]
    rows = {row["name"]: row for row in prof.operators()}
    assert set(rows) == {"aten::mm", "aten::relu"}
    for name, group in operators.groupby("name"):
        assert rows[name]["count"] == len(group)
        assert rows[name]["total_ns"] == int(group["dur"].sum())
        assert rows[name]["p50_ns"] == pytest.approx(_percentile(group["dur"], 50), abs=0.06)
    assert sum(row["share"] for row in rows.values()) == pytest.approx(1.0)
    assert prof.operators_dataframe().loc["aten::mm", "count"] == 60
    assert prof.operators(categories=["python"])[0]["category"] == "python"
    assert prof.operators("operator") == prof.operators()  # one category as a string
    with pytest.raises(TypeError, match="categories"):
        prof.operators(categories=3)


def test_merged_tree(prof):
    nodes = prof.merged_tree()
    frame = prof.merged_tree_dataframe()
    by_path = dict(zip(frame["path"], frame["count"]))
    assert by_path["infer"] == 40
    assert by_path["infer / compute / aten::mm"] == 60
    assert by_path["infer / compute / aten::relu"] == 40
    mm = next(node for node in nodes if node["name"] == "aten::mm")
    assert mm["calls_per_parent_call"] == pytest.approx(1.5)
    spans = prof.dataframe()
    assert mm["total_ns"] == int(spans[spans["name"] == "aten::mm"]["dur"].sum())


def test_critical_path_adds_up(prof):
    path = prof.critical_path()
    assert path["length_ns"] > 0
    assert path["idle_ns"] + sum(entry["on_path_ns"] for entry in path["by_name"]) == path["length_ns"]
    assert [root["name"] for root in path["roots"]][-1] == "infer"


def test_printed_reports(prof, capsys):
    prof.print_breakdown("infer")
    prof.print_operators()
    prof.print_merged_tree()
    prof.print_critical_path()
    out = capsys.readouterr().out
    for text in ("40 inferences of 'infer'", "aten::mm", "└─ postprocess", "critical path",
                 "tracer overhead"):
        assert text in out


def _run(slow_factor, calls=30):
    @opsight.trace("step")
    def step():
        _spin(0.001 * slow_factor)

    @opsight.trace("other")
    def other():
        _spin(0.0005)

    with opsight.profile() as profile:
        for _ in range(calls):
            step()
            other()
    return profile


def test_compare_flags_a_planted_slowdown():
    result = opsight.compare(_run(1.0), _run(1.2), fail_threshold=0.10)
    rows = {row["name"]: row for row in result["names"]}
    assert rows["step"]["verdict"] == "slower"
    assert rows["step"]["median_ratio"] == pytest.approx(1.2, abs=0.08)
    assert rows["other"]["verdict"] in ("same", "faster", "slower")
    assert result["regressions"] == ["step"]
    text = opsight.compare_report(_run(1.0), _run(1.0), fail_threshold=0.10)
    assert "regressions (slower by 10% or more at the median): none" in text


def test_load_and_compare_files(tmp_path, prof):
    path = tmp_path / "run.opsight"
    prof.save(path)
    loaded = opsight.load(path)
    assert loaded.breakdown("infer")["inference_count"] == 40
    same = opsight.compare(path, prof)
    assert all(row["verdict"] in ("same", "too few samples") for row in same["names"])
    native = opsight.load(path).trace
    assert opsight.compare(native, loaded)["a"]["slices"] == same["a"]["slices"]
    with pytest.raises(ValueError, match="min_samples"):
        opsight.compare(path, path, min_samples=1)
    with pytest.raises(ValueError, match="alpha"):
        opsight.compare(path, path, alpha=0)
    with pytest.raises(ValueError, match="no-such-trace.json: no such file"):
        opsight.load(tmp_path / "no-such-trace.json", store=tmp_path / "runs.db")


def test_read_trace_is_a_deprecated_alias_of_load(tmp_path):
    with opsight.profile() as prof:
        with opsight.span("work"):
            pass
    path = tmp_path / "run.opsight"
    prof.save(path)
    with pytest.warns(DeprecationWarning, match=r"opsight.load\(path\)"):
        native = opsight.read_trace(str(path))
    assert native.render("summary", "json") == opsight.load(path).trace.render("summary", "json")
