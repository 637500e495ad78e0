"""opsight.remote on a real Ray cluster on this machine: a head and two worker nodes on
loopback (``ray.cluster_utils.Cluster``), each worker node with a custom resource standing
in for a kind of hardware (``nodeA``, ``nodeB``), the head with a Ray Client server (for
``ray://`` addresses), started once for the module and stopped at its end (only this
cluster's processes: ``Cluster.shutdown``, never ``ray stop``). ``OPSIGHT_REQUIRE=ray``
makes a missing Ray a failure."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest

from pathlib import Path

from conftest import clean_environment, require, write

ray = require("ray")
torch = require("torch")
require("onnxruntime")

from opsight.remote import RemoteError  # noqa: E402
import opsight.remote.bench as remote_bench  # noqa: E402
import opsight  # noqa: E402
import opsight.torch  # noqa: E402

REPOSITORY = Path(__file__).resolve().parents[2]


def _find_free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def cluster():
    from ray.cluster_utils import Cluster

    client_port = _find_free_port()
    started = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 1, "include_dashboard": False, "ray_client_server_port": client_port})
    nodes = {"nodeA": started.add_node(num_cpus=1, resources={"nodeA": 1}),
             # nodeB's node carries a second label, nodeB2 (a node of two kinds).
             "nodeB": started.add_node(num_cpus=1, resources={"nodeB": 1, "nodeB2": 1})}
    started.wait_for_nodes()
    started.node_ids = {label: node.node_id for label, node in nodes.items()}
    started.node_ids["nodeB2"] = started.node_ids["nodeB"]
    started.client_address = f"ray://127.0.0.1:{client_port}"
    yield started
    ray.shutdown()
    started.shutdown()


class _Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.first = torch.nn.Linear(64, 256)
        self.second = torch.nn.Linear(256, 16)

    def forward(self, x):
        return self.second(torch.relu(self.first(x))).softmax(-1)


MODEL = _Model().eval()


def predict(x):
    y = MODEL(x)
    torch._dynamo.graph_break()  # two graphs and three uncompiled segments
    return y * 2 + 1


def _intervals_overlap(first, second):
    return first[0] < second[1] and second[0] < first[1]


def test_compare_backends_runs_each_backend_on_its_node(cluster, tmp_path):
    specs = ["nodeA/ort-cpu", "nodeB/eager", "nodeB/torchscript"]
    inputs = (torch.randn(8, 64),)
    result = opsight.torch.compare_backends(
        predict, inputs, specs, cluster=cluster.address, repeats=30, warmups=2, threads=1,
        prices={"nodeA": 0.126, "nodeB": 0.526}, store=tmp_path / "runs.db")
    assert result.backends == specs
    # Each back-end ran on a node with its label (the node id the worker reported).
    for outcome in result.outcomes:
        assert outcome.ok, outcome.error
        assert outcome.facts["node_id"] == cluster.node_ids[outcome.spec.hardware]
        assert outcome.facts["cpu_count"] >= 1 and outcome.facts["memory_bytes"] > 0
        assert "torch" in outcome.facts["versions"]
        # One machine, one CLOCK_MONOTONIC: the measured offset is 0 within its bound.
        assert abs(outcome.clock_offset_ns) <= outcome.clock_uncertainty_ns + 2_000_000
    graphs = [segment for segment in result.segments if segment.kind == "graph"]
    assert len(graphs) == 2 and result.graph_break_count == 1
    for segment in graphs:
        for name in specs:
            stats = segment.backends[name]
            assert stats.runs == 30 and stats.failures == 0 and not stats.errors
            assert stats.mismatches == 0
    # The same back-ends on this machine: equal within noise (a loaded 2-core machine:
    # medians within a factor of 3, or 0.3 ms).
    local = opsight.torch.compare_backends(predict, inputs, ["onnxruntime", "eager",
                                                              "torchscript"],
                                           repeats=30, warmups=2, threads=1)
    for remote_name, local_name in zip(specs, ["onnxruntime", "eager", "torchscript"]):
        for remote_segment, local_segment in zip(graphs, [segment for segment in local.segments
                                                          if segment.kind == "graph"]):
            remote_ms = remote_segment.backends[remote_name].median_ms
            local_ms = local_segment.backends[local_name].median_ms
            assert remote_ms < 3 * local_ms + 0.3 and local_ms < 3 * remote_ms + 0.3, \
                (remote_name, remote_ms, local_ms)
    # The table: octoml's rows, totals with the cost per million calls, hardware per spec.
    text = result.table()
    for name in specs:
        assert f"     {name}" in text
    assert "Hardware per back-end" in text and "nodeA: 0.126 USD/h" in text
    assert result.cost_per_million("nodeB/eager") == pytest.approx(
        result.total_ms("nodeB/eager") / 1000 * 0.526 / 3600 * 1e6)

    # One run: the caller and one process per worker, on the caller's clock.
    columns = result.trace.slice_columns()
    pids = {outcome.spec: outcome.facts["pid"] for outcome in result.outcomes}
    assert set(pids.values()) | {os.getpid()} == set(columns["pid"])
    spans = {}
    for name, pid, start, end in zip(columns["name"], columns["pid"], columns["start"],
                                     columns["end"]):
        spans.setdefault((pid, name), []).append((start, end))
    for outcome in result.outcomes:
        assert len(spans[(pids[outcome.spec], "call")]) == 32
        assert len(spans[(pids[outcome.spec], "graph #1")]) == 32
    # Two back-ends sharing nodeB never ran at once: neither their workers' spans nor the
    # caller's "measuring" spans overlap.
    def extent(pid):
        times = [time for (owner, _), values in spans.items() if owner == pid
                 for time in values]
        return min(start for start, _ in times), max(end for _, end in times)
    eager, script = result.outcomes[1], result.outcomes[2]
    assert not _intervals_overlap(extent(pids[eager.spec]), extent(pids[script.spec]))
    assert not _intervals_overlap((eager.measuring_ns, eager.ended_ns),
                                  (script.measuring_ns, script.ended_ns))
    # ...while nodeA's measurement ran beside nodeB's first one (different nodes: parallel).
    first_a = result.outcomes[0]
    assert _intervals_overlap((first_a.started_ns, first_a.ended_ns),
                              (eager.started_ns, eager.ended_ns))
    # Every worker's trace sits inside the caller's "measuring" span of its back-end,
    # up to the clock offset's uncertainty.
    for outcome in result.outcomes:
        begin, end = extent(pids[outcome.spec])
        slack = outcome.clock_uncertainty_ns + 2_000_000
        assert outcome.measuring_ns - slack <= begin and end <= outcome.ended_ns + slack

    # Stored with every worker's hardware facts: opsight show lists them.
    saved = result.saved_run
    assert saved is not None
    shown = subprocess.run([sys.executable, "-m", "opsight", "show", str(saved["id"]),
                            "--store", str(tmp_path / "runs.db")], capture_output=True,
                           text=True, env=clean_environment(), timeout=120)
    assert shown.returncode == 0, shown.stderr
    for number, outcome in enumerate(result.outcomes, start=1):
        assert f"worker.{number}.node_id" in shown.stdout
        assert outcome.node_id in shown.stdout
    assert "worker.1.cpu_model" in shown.stdout and "worker.3.cost_per_million" in shown.stdout


def _write_model(directory):
    write(directory, "models.py", """
        import torch

        def make():
            torch.manual_seed(0)
            model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(),
                                        torch.nn.Linear(64, 4)).eval()
            return model, (torch.randn(2, 32),)
    """)


def _worker_processes(store, run="latest"):
    """The stored run's processes named ``worker N: ...``: name -> (pid, labels, the first
    start and last end of its spans on the caller's clock, its span count)."""
    trace = opsight.load(run, store=store).trace
    path = Path(store).with_suffix(".json")
    trace.write(str(path))  # its process names and labels: the Chrome JSON metadata
    processes: dict[int, dict] = {}
    for event in json.loads(path.read_text())["traceEvents"]:
        if event.get("ph") == "M" and event["name"] in ("process_name", "process_labels"):
            processes.setdefault(event["pid"], {}).update(event["args"])
    columns = trace.slice_columns()
    found = {}
    for pid, start, end in zip(columns["pid"], columns["start"], columns["end"]):
        name = processes.get(pid, {}).get("name", "")
        if not name.startswith("worker "):
            continue
        labels = processes[pid].get("labels", "").split(",")
        _, labels, first, last, count = found.get(name, (pid, labels, start, end, 0))
        found[name] = (pid, labels, min(first, start), max(last, end), count + 1)
    return found


def test_bench_command_prints_the_table_with_cost_and_hardware(cluster, tmp_path):
    _write_model(tmp_path)
    write(tmp_path, "prices.yaml", """
        hardware:
          nodeA: {per_hour: 0.126, source: "a test's price"}
          nodeB: 0.526
    """)
    command = [sys.executable, "-m", "opsight", "bench", "models.py:make", "--cluster",
               cluster.address, "--on", "nodeA/ort-cpu", "--on", "nodeB/torchscript,nodeB/eager",
               "--iterations", "200", "--threads", "1", "--profile-iterations", "0",
               "--prices", "prices.yaml", "--store", str(tmp_path / "runs.db"),
               "--format", "json"]
    done = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True,
                          env=clean_environment(), timeout=240)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    rows = {row["spec"]: row for row in report["backends"]}
    assert list(rows) == ["nodeA/ort-cpu", "nodeB/torchscript", "nodeB/eager"]
    for spec, row in rows.items():
        assert row["error"] is None
        assert row["node_id"] == cluster.node_ids[spec.split("/")[0]]
        result = row["result"]
        assert result["counted"] == 200 and result["backend"] == spec.split("/")[1]
        qps = result["throughput"]["queries_per_second"]
        price = 0.126 if spec.startswith("nodeA") else 0.526
        assert row["cost_per_million"] == pytest.approx(1e6 / qps * price / 3600)
    assert report["saved_run"]["id"]
    assert "opsight remote [" in done.stderr  # the progress lines
    text = subprocess.run(command[:-2] + ["--no-store", "--iterations", "50"], cwd=tmp_path,
                          capture_output=True, text=True, env=clean_environment(), timeout=240)
    assert text.returncode == 0, text.stderr
    assert "Cost/1M" in text.stdout and "Hardware" in text.stdout
    assert "nodeA: 0.126 USD/h (a test's price)" in text.stdout


def test_bench_through_ray_client_runs_on_the_labelled_node_and_stores_one_run(cluster,
                                                                             tmp_path):
    # ray://: the head's real Ray Client server (the caller is a Ray Client, not a driver on
    # the cluster's network), from the command line, end to end.
    _write_model(tmp_path)
    store = tmp_path / "runs.db"
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "opsight", "bench", "models.py:make", "--cluster",
         cluster.client_address, "--on", "nodeA/ort-cpu", "--iterations", "100", "--threads",
         "1", "--profile-iterations", "0", "--prices", str(REPOSITORY / "examples" / "remote"
                                                           / "prices.yaml"),
         "--store", str(store)],
        cwd=tmp_path, capture_output=True, text=True, env=clean_environment(), timeout=120)
    elapsed = time.monotonic() - started
    assert done.returncode == 0, done.stderr
    node_id = cluster.node_ids["nodeA"]
    lines = done.stdout.splitlines()
    assert lines[0] == (f"opsight bench make on {cluster.client_address}: 1 back-end on 1 "
                        "node, single-stream, batch 1"), done.stdout
    (row,) = [line for line in lines if line.startswith("nodeA/ort-cpu ")]
    assert row.split()[1] == "100" and row.endswith(f"node {node_id[:8]}"), row
    assert "No price for nodeA" in done.stdout
    assert "Worker clocks minus this machine's (traces moved by them): nodeA/ort-cpu" in \
        done.stdout
    assert "opsight remote [####################] 1/1 done" in done.stderr
    # The worker's facts (its node id) are the stored run's tags...
    shown = subprocess.run([sys.executable, "-m", "opsight", "show", "latest", "--store",
                            str(store)], capture_output=True, text=True,
                           env=clean_environment(), timeout=120)
    assert shown.returncode == 0, shown.stderr
    assert "worker.1.node_id" in shown.stdout and node_id in shown.stdout
    assert cluster.client_address in shown.stdout  # the run's cluster tag
    # ...and its trace is one process of the merged run, on the caller's clock.
    (name, (pid, labels, first, last, count)), = _worker_processes(store).items()
    assert name == "worker 1: nodeA/ort-cpu" and count >= 100
    assert f"node {node_id[:12]}" in labels and any(label.startswith("clock offset ")
                                                    for label in labels)
    print(f"ray:// bench, 1 back-end, 100 queries: {elapsed:.1f} s")


def test_callers_sharing_a_node_never_measure_at_once(cluster, tmp_path):
    # Three `opsight bench` processes started together on nodeB's node: two on its label
    # nodeB, one on its second label nodeB2. Each worker holds a unit of its label and the
    # node's own node:IP resource, so they measure one after another (the workers' spans, on
    # this machine's one clock, do not overlap), and none fails. (Back-ends whose artifacts
    # are quick to make, so that the three are ready together: with a unit of its label
    # only, the nodeB2 worker measured during a nodeB one.)
    _write_model(tmp_path)
    specs = ["nodeB/eager", "nodeB/torchscript", "nodeB2/eager"]
    callers = [subprocess.Popen(
        [sys.executable, "-m", "opsight", "bench", "models.py:make", "--cluster",
         cluster.address, "--on", spec, "--duration", "2s", "--warmup", "5",
         "--threads", "1", "--profile-iterations", "0", "--store",
         str(tmp_path / f"runs-{number}.db"), "--format", "json"],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=clean_environment()) for number, spec in enumerate(specs)]
    try:
        outputs = [caller.communicate(timeout=240) for caller in callers]
    finally:
        for caller in callers:
            if caller.poll() is None:
                caller.kill()
    extents = []
    for number, (caller, (stdout, stderr)) in enumerate(zip(callers, outputs)):
        assert caller.returncode == 0, stderr
        (row,) = json.loads(stdout)["backends"]
        assert row["error"] is None and row["node_id"] == cluster.node_ids["nodeB"]
        assert row["result"]["counted"] > 0
        (process,) = _worker_processes(tmp_path / f"runs-{number}.db").values()
        extents.append(process[2:4])
    for first in range(len(extents)):
        for second in range(first + 1, len(extents)):
            assert not _intervals_overlap(extents[first], extents[second]), (specs, extents)
    # Each measured about 2 s: had they shared the node, they would have overlapped.
    assert all(end - start > 1.5e9 for start, end in extents), extents


def test_a_killed_worker_gives_an_error_row_and_the_rest_completes(cluster):
    killed = {}

    def progress(event, outcome, counts):
        if event == "measuring" and outcome.spec.hardware == "nodeA":
            pid = outcome.facts["pid"]

            def kill():
                time.sleep(1.0)
                os.kill(pid, signal.SIGKILL)
                killed["pid"] = pid
            threading.Thread(target=kill, daemon=True).start()

    started = time.monotonic()
    result = remote_bench.run(MODEL, ["nodeA/eager", "nodeB/eager"], inputs=(torch.randn(1, 64),),
                              cluster=cluster.address, duration="20s", warmup=1,
                              profile_iterations=0, threads=1, progress=progress)
    elapsed = time.monotonic() - started
    assert killed, "the nodeA worker was never seen measuring"
    dead, alive = result.rows
    assert dead.result is None and "the worker process died while measuring" in dead.error
    assert alive.error is None and alive.result["counted"] > 0
    assert elapsed < 90
    assert "error: the worker process died" in result.table()


def test_a_measurement_past_its_time_limit_is_an_error_row(cluster):
    result = remote_bench.run(MODEL, ["nodeB/eager"], inputs=(torch.randn(1, 64),),
                              cluster=cluster.address, duration="60s", warmup=1,
                              profile_iterations=0, timeout_s=3)
    (row,) = result.rows
    assert row.error == ("timed out: the measurement did not finish within 3 s (the worker "
                         "was killed)")


def test_a_label_no_node_carries_is_named_with_the_labels_there_are(cluster):
    with pytest.raises(RemoteError) as caught:
        remote_bench.run(MODEL, ["gpu-a10/eager"], inputs=(torch.randn(1, 64),),
                         cluster=cluster.address)
    message = str(caught.value)
    assert "'gpu-a10'" in message and "nodeA, nodeB" in message
    assert "ray start --resources" in message


@pytest.mark.parametrize("scheme", ["", "ray://"])
def test_a_cluster_that_does_not_answer_is_a_clear_error_within_a_bound(cluster, scheme):
    address = f"{scheme}127.0.0.1:{_find_free_port()}"
    started = time.monotonic()
    with pytest.raises(RemoteError) as caught:
        remote_bench.run(MODEL, ["nodeA/eager"], inputs=(torch.randn(1, 64),), cluster=address)
    assert time.monotonic() - started < 15
    assert f"the Ray cluster at {address} does not answer" in str(caught.value)
    # An address that never answers (not even a refusal, where the network drops it) is
    # bounded too.
    from opsight.remote.cluster import check_reachable

    started = time.monotonic()
    with pytest.raises(RemoteError, match=r"192.0.2.1:6379 does not answer \(.* within 1 s\)"):
        check_reachable("192.0.2.1:6379", timeout_s=1)  # TEST-NET-1: never routed
    assert time.monotonic() - started < 5
