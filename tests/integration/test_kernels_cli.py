"""`opsight report --kernels` and the host/device split of `--breakdown` on a PyTorch-profiler
trace of a small MLP on CUDA (tests/data/pytorch_profiler_cuda_small.json: kernels on
pid = device, tid = stream; `ac2g` flows from cudaLaunchKernel/cudaMemcpyAsync to the GPU
work they launched), by the CLI, with the expected numbers computed here from the file with
the json module; and a CPU trace that says it has no kernels.
"""
import collections
import csv
import io
import json
import pathlib

import numpy
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
CUDA_TRACE = ROOT / "tests" / "data" / "pytorch_profiler_cuda_small.json"
CPU_TRACE = ROOT / "tests" / "data" / "pytorch_profiler_small.json"


@pytest.fixture(scope="module")
def events():
    with open(CUDA_TRACE, encoding="utf-8") as file:
        return json.load(file)["traceEvents"]


def _ns(microseconds):
    return round(microseconds * 1000)


def _slices(events, category):
    return [event for event in events if event.get("ph") == "X" and event.get("cat") == category]


def _launch_by_correlation(events):
    """The cuda_runtime event of each correlation id that an ac2g flow starts at."""
    flow_ids = {event["id"] for event in events if event.get("ph") == "s" and event["cat"] == "ac2g"}
    return {event["args"]["correlation"]: event for event in _slices(events, "cuda_runtime")
            if event["args"]["correlation"] in flow_ids}


def _enclosing(events, inner, category):
    """The innermost event of `category` on the same thread that encloses `inner`."""
    candidates = [event for event in _slices(events, category)
                  if event["pid"] == inner["pid"] and event["tid"] == inner["tid"]
                  and event["ts"] <= inner["ts"] and inner["ts"] + inner["dur"] <= event["ts"] + event["dur"]]
    return min(candidates, key=lambda event: event["dur"], default=None)


def test_kernels_json_matches_the_file(opsight_cli, events):
    completed = opsight_cli("report", CUDA_TRACE, "--kernels", "--format", "json")
    assert completed.returncode == 0, completed.stderr
    report = json.loads(completed.stdout)

    kernels = _slices(events, "kernel")
    durations = collections.defaultdict(list)
    for kernel in kernels:
        durations[kernel["name"]].append(_ns(kernel["dur"]))
    all_kernel_ns = sum(sum(values) for values in durations.values())
    assert report["kernel_slices"] == len(kernels)
    assert report["kernel_ns"] == all_kernel_ns
    rows = {row["name"]: row for row in report["kernels"]}
    assert set(rows) == set(durations)
    assert [row["name"] for row in report["kernels"]] == sorted(
        durations, key=lambda name: (-sum(durations[name]), name))
    launches = _launch_by_correlation(events)
    for name, values in durations.items():
        row = rows[name]
        assert row["count"] == len(values)
        assert row["total_ns"] == sum(values)
        assert row["share"] == pytest.approx(sum(values) / all_kernel_ns)
        assert row["p50_ns"] == pytest.approx(numpy.percentile(values, 50), abs=0.05)
        assert row["p99_ns"] == pytest.approx(numpy.percentile(values, 99), abs=0.05)
        grids = collections.Counter(json.dumps(kernel["args"]["grid"], separators=(",", ":"))
                                    for kernel in kernels if kernel["name"] == name)
        assert row["grid"] == grids.most_common(1)[0][0]
        assert row["grid_variants"] == len(grids)
        # The operator of each launch: the innermost cpu_op around its cudaLaunchKernel.
        expected_operators = collections.Counter()
        for kernel in kernels:
            launch = launches.get(kernel["args"]["correlation"])
            if kernel["name"] == name and launch is not None:
                expected_operators[_enclosing(events, launch, "cpu_op")["name"]] += 1
        operators = collections.Counter()
        for site in row["launched_by"]:
            operators[site["operator"]] += site["count"]
        assert operators == expected_operators
        assert row["without_launch"] == sum(
            1 for kernel in kernels
            if kernel["name"] == name and kernel["args"]["correlation"] not in launches)

    gemm_sites = {site["module"]: site for site in rows[max(durations, key=lambda n: sum(durations[n]))]["launched_by"]}
    assert set(gemm_sites) == {"nn.Module: Linear_0", "nn.Module: Linear_1"}
    assert all(site["source"] == "torch/nn/modules/linear.py:125" for site in gemm_sites.values())

    copies = collections.defaultdict(lambda: [0, 0, 0])
    for copy in _slices(events, "gpu_memcpy"):
        kind = copy["name"].split()[1]
        copies[kind][0] += 1
        copies[kind][1] += copy["args"]["bytes"]
        copies[kind][2] += _ns(copy["dur"])
    assert {row["kind"]: [row["count"], row["bytes"], row["total_ns"]]
            for row in report["copies"]} == {kind: value for kind, value in copies.items()}

    gpu = report["gpu"]
    gpu_work = sorted((_ns(event["ts"] - events[0]["ts"]), _ns(event["ts"] + event["dur"] - events[0]["ts"]))
                      for event in kernels + _slices(events, "gpu_memcpy"))
    busy, end = 0, None
    for start, finish in gpu_work:  # the union of the intervals
        if end is None or start > end:
            busy += finish - start
            end = finish
        elif finish > end:
            busy += finish - end
            end = finish
    assert gpu["busy_ns"] == busy
    assert [device["device"] for device in gpu["devices"]] == [0]
    runtime = _slices(events, "cuda_runtime")
    assert gpu["cuda_api_calls"] == len(runtime)
    assert gpu["cuda_api_ns"] == sum(_ns(event["dur"]) for event in runtime)
    assert gpu["kernel_launches"] == sum(1 for event in runtime if event["name"] == "cudaLaunchKernel")
    assert gpu["synchronize_ns"] == sum(
        _ns(event["dur"]) for event in runtime if event["name"] == "cudaStreamSynchronize")
    assert gpu["launches_without_kernel"] == 1  # the profile stopped before its kernel ran
    assert gpu["kernels_without_launch"] == 1  # launched before the profile began
    assert report["overhead_known"] is False


def test_kernels_text_and_csv(opsight_cli):
    text = opsight_cli("report", CUDA_TRACE, "--kernels")
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    assert lines[0] == "opsight kernels: pytorch_profiler_cuda_small.json, 97 slices, 425 µs"
    assert lines[1] == "7 kernels, 3 names, 23.5 µs of kernel time"
    assert "1 launch with no kernel, 1 kernel with no launch" in lines[3]
    assert any(line.startswith("vectorized_elementwise_kernel<4, FillFunctor<float>") for line in lines)
    assert "launch sites (kernel <- operator <- module <- Python source)" in lines
    assert lines[-1] == "tracer overhead: not recorded in this trace, 0 events dropped"

    table = opsight_cli("report", CUDA_TRACE, "--kernels", "--format", "csv", "--limit", "1")
    assert table.returncode == 0, table.stderr
    rows = list(csv.DictReader(io.StringIO(table.stdout, newline="")))
    assert len(rows) == 1
    assert rows[0]["name"].startswith("sm90_xmma_gemm")
    assert (rows[0]["count"], rows[0]["grid"], rows[0]["grid_variants"], rows[0]["operator"]) == (
        "4", "[4,1,1]", "2", "aten::addmm")


def test_a_cpu_trace_says_it_has_no_kernels(opsight_cli):
    completed = opsight_cli("report", CPU_TRACE, "--kernels")
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.splitlines()[1] == (
        "no GPU kernels in this trace: record with a GPU session (docs/gpu.md)")


def test_breakdown_splits_host_and_device_per_inference(opsight_cli, events):
    completed = opsight_cli("report", CUDA_TRACE, "--breakdown", "inference_step", "--format", "json")
    assert completed.returncode == 0, completed.stderr
    report = json.loads(completed.stdout)
    steps = [event for event in _slices(events, "user_annotation") if event["name"] == "inference_step"]
    assert report["inference_count"] == len(steps)  # not the GPU stream's projections
    split = report["host_device"]
    assert split["inferences_with_gpu_work"] == len(steps)
    launches = _launch_by_correlation(events)
    gpu_events = _slices(events, "kernel") + _slices(events, "gpu_memcpy")
    expected = collections.defaultdict(list)
    for step in steps:
        inside = lambda event: step["ts"] <= event["ts"] <= step["ts"] + step["dur"]
        expected["host"].append(_ns(step["dur"]))
        calls = [event for event in _slices(events, "cuda_runtime") if inside(event)]
        expected["launch_overhead"].append(
            sum(_ns(event["dur"]) for event in calls if "Synchronize" not in event["name"]))
        expected["synchronize"].append(
            sum(_ns(event["dur"]) for event in calls if "Synchronize" in event["name"]))
        mine = [event for event in gpu_events
                if event["args"]["correlation"] in launches and inside(launches[event["args"]["correlation"]])]
        busy = sum(_ns(event["dur"]) for event in mine)  # they do not overlap in this file
        first_launch = min(launches[event["args"]["correlation"]]["ts"] for event in mine)
        last_end = max(event["ts"] + event["dur"] for event in mine)
        expected["gpu_busy"].append(busy)
        expected["gpu_idle"].append(_ns(last_end - first_launch) - busy)
        for kind, key in (("HtoD", "host_to_device"), ("DtoH", "device_to_host")):
            expected[key].append(sum(_ns(event["dur"]) for event in mine
                                     if event["cat"] == "gpu_memcpy" and kind in event["name"]))
    for key, values in expected.items():
        assert split[key]["mean_ns"] == pytest.approx(numpy.mean(values), abs=0.05), key
        assert split[key]["max_ns"] == max(values), key


def test_breakdown_of_a_cpu_trace_is_unchanged(opsight_cli):
    completed = opsight_cli("report", CPU_TRACE, "--breakdown", "inference_step", "--format", "json")
    assert completed.returncode == 0, completed.stderr
    assert "host_device" not in json.loads(completed.stdout)
