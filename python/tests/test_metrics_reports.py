"""Metrics in the Python analyses: ``TraceFile.dataframe()`` gains a float column per
metric (named without the ``metric.`` prefix, NaN where a span has none), ``metrics()`` (a
profile's ``span_metrics()``) and ``counters()`` return the ``opsight report --metrics``
data, ``counters_dataframe()`` one row per counter sample, ``print_metrics()`` the text view.
The traces are Chrome JSON written here, or recorded with ``opsight.profile()`` and a span
that carries a metric argument."""

from __future__ import annotations

import io
import json
import math

import numpy
import pandas
import pytest

import opsight

STEP_CPU_NS = [4_000_000, 2_000_000]
RSS_SAMPLES = [(0, 100.0), (10, 300.0), (30, 200.0)]  # (ts µs, bytes)


@pytest.fixture()
def metrics_file(tmp_path):
    events = [
        {"ph": "X", "name": "train", "pid": 1, "tid": 1, "ts": 0, "dur": 100},
        {"ph": "X", "name": "step", "pid": 1, "tid": 1, "ts": 10, "dur": 20,
         "args": {"metric.cpu_ns": STEP_CPU_NS[0], "metric.rss_delta_bytes": -4096,
                  "batch": 3}},
        {"ph": "X", "name": "step", "pid": 1, "tid": 1, "ts": 40, "dur": 20,
         "args": {"metric.cpu_ns": STEP_CPU_NS[1], "metric.gpu_power_watts": 250.5}},
        {"ph": "X", "name": "save", "pid": 1, "tid": 1, "ts": 70, "dur": 10,
         "args": {"cpu_ns": "not a metric", "metric.cpu_ns": 7}},
    ]
    events += [{"ph": "C", "name": "process.rss_bytes", "pid": 1, "ts": ts,
                "args": {"value": value}} for ts, value in reversed(RSS_SAMPLES)]
    path = tmp_path / "metrics.json"
    path.write_text(json.dumps({"traceEvents": events}), encoding="utf-8")
    return path


def test_dataframe_has_a_float_column_per_metric(metrics_file):
    frame = opsight.load(metrics_file).dataframe()
    frame = frame.set_index("start")  # ns: train 0, steps 10 000 and 40 000, save 70 000
    assert frame["rss_delta_bytes"].dtype == numpy.float64
    assert frame.loc[10_000, "rss_delta_bytes"] == -4096
    assert math.isnan(frame.loc[40_000, "rss_delta_bytes"])
    assert math.isnan(frame.loc[0, "gpu_power_watts"])
    assert frame.loc[40_000, "gpu_power_watts"] == 250.5
    assert "metric.rss_delta_bytes" not in frame.columns
    # A plain argument stays as it was; a metric whose name it takes keeps its prefix.
    assert frame.loc[10_000, "batch"] == 3
    assert frame.loc[70_000, "cpu_ns"] == "not a metric"
    assert list(frame["metric.cpu_ns"].fillna(-1)) == [-1, *STEP_CPU_NS, 7]


def test_metrics_lists_per_span_name_and_metric(metrics_file):
    rows = {(row["name"], row["metric"]): row for row in opsight.load(metrics_file).metrics()}
    step = rows["step", "cpu_ns"]
    assert step["unit"] == "ns"
    assert step["count"] == 2
    assert step["mean"] == numpy.mean(STEP_CPU_NS)
    assert step["p50"] == numpy.percentile(STEP_CPU_NS, 50)
    assert step["p99"] == pytest.approx(numpy.percentile(STEP_CPU_NS, 99), abs=0.05)
    assert step["max"] == max(STEP_CPU_NS)
    assert rows["step", "gpu_power_watts"]["mean"] == 250.5
    assert ("step", "batch") not in rows


def test_counters_have_a_time_weighted_mean(metrics_file):
    trace = opsight.load(metrics_file)
    (counter,) = trace.counters()
    assert counter["name"] == "process.rss_bytes"
    assert counter["unit"] == "bytes"
    assert counter["samples"] == 3
    # 100 bytes for 10 µs, then 300 for 20 µs.
    assert counter["mean"] == pytest.approx((100 * 10 + 300 * 20) / 30)
    assert (counter["min"], counter["max"], counter["last"]) == (100, 300, 200)


def test_counters_dataframe_has_one_row_per_sample_in_time_order(metrics_file):
    frame = opsight.load(metrics_file).counters_dataframe()
    assert list(frame.columns) == ["ts_ns", "track", "pid", "unit", "value"]
    assert list(frame["ts_ns"]) == [ts * 1000 for ts, _ in RSS_SAMPLES]
    assert list(frame["value"]) == [value for _, value in RSS_SAMPLES]
    assert set(frame["track"]) == {"process.rss_bytes"}
    assert set(frame["unit"]) == {"bytes"}


def test_print_metrics_writes_the_text_view(metrics_file):
    out = io.StringIO()
    opsight.load(metrics_file).print_metrics(file=out)
    text = out.getvalue()
    assert text.startswith("opsight metrics: ")
    assert "\nmetrics per span\n" in text
    assert "process.rss_bytes" in text


def test_a_trace_without_metrics_has_no_metric_columns(tmp_path):
    path = tmp_path / "plain.json"
    path.write_text(json.dumps([{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 0,
                                 "dur": 5, "args": {"size": 3}}]), encoding="utf-8")
    trace = opsight.load(path)
    assert list(trace.dataframe().columns)[-1] == "size"
    assert trace.metrics() == []
    assert trace.counters() == []
    assert trace.counters_dataframe().empty


def test_a_profiles_dataframe_has_the_metric_columns_too():
    with opsight.profile() as prof:
        with opsight.span("work", **{"metric.tokens": 512}):
            pass
        with opsight.span("idle"):
            pass
    frame = prof.dataframe().set_index("name")
    assert frame.loc["work", "tokens"] == 512.0
    assert math.isnan(frame.loc["idle", "tokens"])
    assert [(row["name"], row["metric"]) for row in prof.span_metrics()] == [("work", "tokens")]
    assert pandas.api.types.is_float_dtype(frame["tokens"])
