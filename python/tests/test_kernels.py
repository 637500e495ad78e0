"""The kernel table as Python data and a DataFrame (``kernels()``, ``kernels_dataframe()``,
``gpu_summary()``, ``print_kernels()``) on a PyTorch-profiler trace of a small MLP on CUDA,
checked against figures computed here from the file; and a trace without GPU work."""

from __future__ import annotations

import collections
import json
import pathlib

import pytest

import opsight

DATA = pathlib.Path(__file__).resolve().parents[2] / "tests" / "data"
CUDA_TRACE = DATA / "pytorch_profiler_cuda_small.json"


@pytest.fixture(scope="module")
def events():
    with open(CUDA_TRACE, encoding="utf-8") as file:
        return json.load(file)["traceEvents"]


def _of_category(events, category):
    return [event for event in events if event.get("ph") == "X" and event.get("cat") == category]


def test_kernels_match_the_file(events):
    trace = opsight.load(CUDA_TRACE)
    totals = collections.Counter()
    counts = collections.Counter()
    for kernel in _of_category(events, "kernel"):
        totals[kernel["name"]] += round(kernel["dur"] * 1000)
        counts[kernel["name"]] += 1
    rows = trace.kernels()
    assert [row["name"] for row in rows] == [name for name, _ in totals.most_common()]
    for row in rows:
        assert row["count"] == counts[row["name"]]
        assert row["total_ns"] == totals[row["name"]]
    assert sum(row["share"] for row in rows) == pytest.approx(1.0)

    frame = trace.kernels_dataframe()
    gemm = max(totals, key=totals.get)
    assert frame.loc[gemm, "operator"] == "aten::addmm"
    assert frame.loc[gemm, "source"] == "torch/nn/modules/linear.py:125"
    assert frame.loc[gemm, "grid_variants"] == 2
    assert "launched_by" not in frame.columns

    summary = trace.gpu_summary()
    copies = {copy["kind"]: copy for copy in summary["copies"]}
    assert set(copies) == {"HtoD", "DtoH"}
    assert copies["HtoD"]["bytes"] == sum(
        event["args"]["bytes"] for event in _of_category(events, "gpu_memcpy")
        if "HtoD" in event["name"])
    assert summary["kernels_without_launch"] == 1
    assert summary["launches_without_kernel"] == 1
    assert 0 < summary["utilisation"] < 1


def test_printed_kernels(capsys):
    opsight.load(CUDA_TRACE).print_kernels(limit=1)
    out = capsys.readouterr().out
    assert out.startswith("opsight kernels: ")
    assert "sm90_xmma_gemm" in out
    assert "… 2 more kernels" in out


def test_a_trace_without_gpu_work_has_no_kernels(capsys):
    trace = opsight.load(DATA / "pytorch_profiler_small.json")
    assert trace.kernels() == []
    assert trace.kernels_dataframe().empty
    assert trace.gpu_summary()["devices"] == []
    trace.print_kernels()
    assert "no GPU kernels in this trace" in capsys.readouterr().out
