"""``prof.dataframe()``: its columns, and its numbers against ``opsight report`` on the same
trace (per name: count, total, self, min, mean, percentiles, max, stddev)."""

from __future__ import annotations

import json
import subprocess
import threading
import time

import numpy
import pandas
import pytest

import opsight

from conftest import OPSIGHT, clean_environment


@opsight.trace
def leaf(delay):
    time.sleep(delay)


@opsight.trace
def branch(index):
    leaf(0.0002 * (index % 4))
    if index % 3 == 0:
        leaf(0.0001)


@opsight.trace("request")
def request(index):
    with opsight.span("parse", index=index):
        pass
    branch(index)


@pytest.fixture(scope="module")
def recorded_trace(tmp_path_factory):
    path = tmp_path_factory.mktemp("dataframe") / "run.opsight"

    def serve(offset):
        for index in range(offset, offset + 15):
            request(index)

    with opsight.profile(path) as prof:
        threads = [threading.Thread(target=serve, args=(offset,)) for offset in (0, 100)]
        for thread in threads:
            thread.start()
        serve(200)
        for thread in threads:
            thread.join()
    return path, prof.dataframe()


def report_summary(path):
    completed = subprocess.run([OPSIGHT, "report", str(path), "--summary", "--format", "json"],
                               capture_output=True, text=True, env=clean_environment(),
                               timeout=30, check=True)
    return {row["name"]: row for row in json.loads(completed.stdout)}


def test_columns_and_types(recorded_trace):
    _, frame = recorded_trace
    for column in ("start", "end", "dur", "depth", "pid", "tid"):
        assert pandas.api.types.is_integer_dtype(frame[column]), column
    assert pandas.api.types.is_bool_dtype(frame["unfinished"])
    assert not frame["unfinished"].any()
    # request, parse, branch, leaf, and a second leaf every third request
    assert len(frame) == 45 * 4 + sum(1 for offset in (0, 100, 200)
                                      for index in range(offset, offset + 15)
                                      if index % 3 == 0)
    assert frame["tid"].nunique() == 3
    # an attribute is a column, empty where a span lacks it
    assert frame.loc[frame["name"] == "parse", "index"].notna().all()
    assert frame.loc[frame["name"] != "parse", "index"].isna().all()


def test_dataframe_matches_the_report(recorded_trace):
    path, frame = recorded_trace
    report = report_summary(path)
    assert set(report) == set(frame["name"])

    children_time = frame.groupby("parent_span_id")["dur"].sum()
    self_time = frame["dur"] - frame["span_id"].map(children_time).fillna(0)

    for name, spans in frame.groupby("name"):
        durations = spans["dur"].to_numpy(dtype=float)
        row = report[name]
        assert row["count"] == len(durations), name
        assert row["total_ns"] == durations.sum(), name
        assert row["min_ns"] == durations.min() and row["max_ns"] == durations.max(), name
        assert row["self_ns"] == pytest.approx(self_time[spans.index].sum(), abs=1), name
        assert row["mean_ns"] == pytest.approx(durations.mean(), abs=1), name
        assert row["stddev_ns"] == pytest.approx(durations.std(ddof=0), abs=1), name
        for key, percent in (("p50_ns", 50), ("p90_ns", 90), ("p95_ns", 95), ("p97_ns", 97),
                             ("p99_ns", 99), ("p999_ns", 99.9)):
            assert row[key] == pytest.approx(numpy.percentile(durations, percent), abs=1), \
                (name, key)
        # pandas' own quantile (linear) agrees too
        assert row["p90_ns"] == pytest.approx(spans["dur"].quantile(0.9), abs=1)


def test_profile_summary_is_the_report(recorded_trace):
    path, _ = recorded_trace
    from_file = opsight.load(path).trace
    in_memory = json.loads(from_file.render("summary", "json"))
    assert {row["name"]: row for row in in_memory} == report_summary(path)


def test_parent_links_are_consistent(recorded_trace):
    _, frame = recorded_trace
    spans = frame.set_index("span_id")
    children = frame[frame["parent_span_id"].notna()]
    parents = spans.loc[children["parent_span_id"]]
    assert (parents["depth"].to_numpy() == children["depth"].to_numpy() - 1).all()
    assert (parents["tid"].to_numpy() == children["tid"].to_numpy()).all()
    assert (parents["start"].to_numpy() <= children["start"].to_numpy()).all()
    assert (parents["end"].to_numpy() >= children["end"].to_numpy()).all()
    roots = frame[frame["parent_span_id"].isna()]
    assert set(roots["name"]) == {"request"} and len(roots) == 45
