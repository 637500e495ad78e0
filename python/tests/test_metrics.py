"""Metrics beyond latency, measured on real effects: a file of known size written and read,
bytes sent over a loopback socket, memory allocated, CPU burnt; asked for per target (the
targets file's ``metrics``), per decorator or span, and for a whole session; the sampler's
counter tracks; the metrics' cost in the run information and the overhead.
"""

from __future__ import annotations

import json
import socket
import subprocess
import threading
import time

import pytest

import opsight
from opsight._capture import metrics as _metrics
from opsight.targets import TargetsError, parse_targets

from conftest import opsight_run, write

MIB = 1 << 20


@pytest.fixture(autouse=True)
def _tracemalloc_stopped_after():
    """The heap metric starts tracemalloc; it must not slow the tests that follow."""
    import tracemalloc

    was_tracing = tracemalloc.is_tracing()
    yield
    if not was_tracing and tracemalloc.is_tracing():
        tracemalloc.stop()


def metrics_by_span(trace) -> dict[str, list[dict[str, float]]]:
    """{span name: [{metric (without "metric."): value} per call]} from the raw columns."""
    columns = trace.slice_columns()
    attributes = columns["attributes"]
    by_span: dict[str, list[dict[str, float]]] = {}
    for row, name in enumerate(columns["name"]):
        values = {key.removeprefix("metric."): column[row] for key, column in attributes.items()
                  if key.startswith("metric.") and column[row] is not None}
        by_span.setdefault(name, []).append(values)
    return by_span


def run_info(trace) -> dict[str, str]:
    return dict(trace.run_info().get("extra", {}))


def burn_cpu(seconds: float) -> None:
    """Burns ``seconds`` of this thread's CPU time (time.thread_time, measured apart from
    opsight)."""
    until = time.thread_time() + seconds
    while time.thread_time() < until:
        sum(range(1000))


def loopback_exchange(payload: bytes, reply_bytes: int, wrap_server=None,
                      wrap_client=None) -> bytes:
    """Sends ``payload`` to a loopback server that answers ``reply_bytes`` bytes; each side's
    socket may be wrapped (TLS: ``wrap_server(socket)``, ``wrap_client(socket)``)."""
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]

    def serve():
        connection, _ = server.accept()
        with (wrap_server(connection) if wrap_server else connection) as connection:
            received = 0
            while received < len(payload):
                received += len(connection.recv(65536))
            connection.sendall(b"r" * reply_bytes)

    thread = threading.Thread(target=serve)
    thread.start()
    with socket.create_connection(("127.0.0.1", port)) as raw:
        with (wrap_client(raw) if wrap_client else raw) as client:
            client.sendall(payload)
            answer = b""
            while len(answer) < reply_bytes:
                answer += client.recv(65536)
    thread.join()
    server.close()
    return answer


def test_decorator_metrics_measure_real_cpu_disk_and_memory(tmp_path):
    path = tmp_path / "data.bin"
    size = 3 * MIB + 17

    @opsight.trace(metrics=["cpu"])
    def burn():
        burn_cpu(0.05)

    @opsight.trace(metrics=["disk"])
    def write_and_read():
        path.write_bytes(b"x" * size)
        return len(path.read_bytes())

    @opsight.trace(metrics=["memory", "heap"])
    def allocate():
        return bytearray(64 * MIB)  # zero-filled: touched, resident

    with opsight.profile() as prof:
        burn()
        assert write_and_read() == size
        kept = allocate()
    spans = metrics_by_span(prof.trace)
    assert spans["test_decorator_metrics_measure_real_cpu_disk_and_memory.<locals>.burn"][0]["cpu_ns"] >= 49e6
    disk = spans["test_decorator_metrics_measure_real_cpu_disk_and_memory.<locals>.write_and_read"][0]
    assert disk["io_write_bytes"] >= size
    assert disk["io_read_bytes"] >= size
    assert "cpu_ns" not in disk, "only the metrics asked for"
    memory = spans["test_decorator_metrics_measure_real_cpu_disk_and_memory.<locals>.allocate"][0]
    assert memory["rss_delta_bytes"] >= 60 * MIB
    assert memory["rss_peak_bytes"] >= memory["rss_end_bytes"]
    assert memory["heap_delta_bytes"] >= 64 * MIB
    assert memory["heap_peak_bytes"] >= 64 * MIB
    del kept


def test_span_network_metrics_count_loopback_bytes():
    with opsight.profile() as prof:
        with opsight.span("exchange", metrics=["network"]):
            answer = loopback_exchange(b"q" * 100_000, 12_345)
    assert len(answer) == 12_345
    network = metrics_by_span(prof.trace)["exchange"][0]
    # The span's thread sent the payload and received the reply; the server thread's bytes
    # are its own (it has no span).
    assert network["net_sent_bytes"] == 100_000
    assert network["net_received_bytes"] == 12_345
    assert _metrics.counting_socket_bytes()


def test_peaks_of_nested_heap_spans_are_kept():
    with opsight.profile() as prof:
        with opsight.span("outer", metrics=["heap"]):
            with opsight.span("inner", metrics=["heap"]):
                transient = bytearray(32 * MIB)
                del transient
            with opsight.span("after", metrics=["heap"]):
                pass
    spans = metrics_by_span(prof.trace)
    assert spans["inner"][0]["heap_peak_bytes"] >= 32 * MIB
    assert spans["inner"][0]["heap_delta_bytes"] < 1 * MIB
    assert spans["outer"][0]["heap_peak_bytes"] >= spans["inner"][0]["heap_peak_bytes"]
    assert spans["after"][0]["heap_peak_bytes"] < 1 * MIB


def test_session_metrics_apply_to_every_traced_function_and_are_restored():
    @opsight.trace
    def work():
        burn_cpu(0.01)

    with opsight.profile(metrics=["cpu"]) as prof:
        work()
    with opsight.profile() as plain:
        work()
    name = "test_session_metrics_apply_to_every_traced_function_and_are_restored.<locals>.work"
    assert metrics_by_span(prof.trace)[name][0]["cpu_ns"] >= 9e6
    assert metrics_by_span(plain.trace)[name][0] == {}


def test_costs_are_in_the_run_info_and_the_overhead():
    @opsight.trace(metrics=["cpu", "memory"])
    def measured():
        pass

    with opsight.profile() as prof:
        for _ in range(100):
            measured()
    extra = run_info(prof.trace)
    readings, memory_ns = map(int, extra["metric_cost.memory"].split())
    assert readings == 200  # a start and an end per call
    assert memory_ns > 200 * 200  # /proc reads take microseconds
    assert prof.trace.run_info()["overhead_ns"] >= memory_ns


def test_sampler_counter_tracks_are_in_the_chrome_trace(tmp_path):
    with opsight.profile(sample_ms=10) as prof:
        burn_cpu(0.1)
    extra = run_info(prof.trace)
    assert extra["sampler_interval_ns"] == "10000000"
    assert int(extra["metric_cost.sampler"].split()[0]) >= 5
    prof.trace.write(str(tmp_path / "trace.json"))
    events = json.loads((tmp_path / "trace.json").read_text())["traceEvents"]
    counters: dict[str, list[float]] = {}
    for event in events:
        if event.get("ph") == "C":
            for value in event["args"].values():
                counters.setdefault(event["name"], []).append(value)
    assert len(counters["process.rss_bytes"]) >= 5
    assert min(counters["process.rss_bytes"]) > MIB
    assert max(counters["process.cpu_percent"]) > 20  # a thread burning CPU


def test_unknown_metric_names_are_refused_with_a_suggestion():
    with pytest.raises(ValueError, match="unknown metric 'memroy' \\(did you mean 'memory'\\?\\)"):
        opsight.span("x", metrics=["memroy"])
    with pytest.raises(ValueError, match="unknown metric"):
        opsight.profile(metrics=["latncy"])
    with pytest.raises(TargetsError) as error:
        parse_targets("- {module: m, function: f, metrics: [latency, gpus]}\n", filename="t.yaml")
    assert "t.yaml:1" in str(error.value)
    assert "unknown metric 'gpus' (did you mean 'gpu'?)" in str(error.value)


def test_generators_record_latency_only_and_say_so():
    with pytest.warns(RuntimeWarning, match="records latency only, not cpu"):
        @opsight.trace(metrics=["cpu"])
        def numbers():
            yield 1


def test_gpu_metric_without_a_gpu_says_so_once_and_records_the_rest(tmp_path):
    app = write(tmp_path, "app.py", """
        import opsight

        @opsight.trace(metrics=["gpu", "cpu"])
        def step():
            sum(range(10000))

        with opsight.profile("out.opsight"):
            step()
            step()
    """)
    from conftest import run, PYTHON

    completed = run([PYTHON, str(app)], tmp_path)
    assert completed.returncode == 0, completed.stderr
    trace = opsight.load(tmp_path / "out.opsight").trace
    extra = run_info(trace)
    gpu_lines = [line for line in completed.stderr.splitlines() if "no GPU" in line]
    if "gpu_unavailable" in extra:
        assert len(gpu_lines) == 1, completed.stderr  # once, not per span
        assert "gpu metrics are left out" in gpu_lines[0]
        assert all("cpu_ns" in call for call in metrics_by_span(trace)["step"])
    else:  # a machine with a GPU: the metric is there instead
        assert all("gpu_memory_used_bytes" in call for call in metrics_by_span(trace)["step"])


def test_targets_file_metrics_end_to_end(tmp_path):
    """The issue's "done when": a targets file asks for [latency, memory, disk, network,
    cpu, gpu] per function and the trace carries them, measured on real effects."""
    write(tmp_path, "work.py", """
        import socket, threading, time

        def crunch():
            until = time.thread_time() + 0.05
            while time.thread_time() < until:
                sum(range(1000))

        def store(path, size):
            with open(path, "wb") as file:
                file.write(b"d" * size)
            with open(path, "rb") as file:
                return len(file.read())

        def hold(size):
            return bytearray(size)

        def talk(size):
            server = socket.create_server(("127.0.0.1", 0))
            def serve():
                connection, _ = server.accept()
                with connection:
                    got = 0
                    while got < size:
                        got += len(connection.recv(65536))
                    connection.sendall(b"k" * 777)
            thread = threading.Thread(target=serve)
            thread.start()
            with socket.create_connection(server.getsockname()) as client:
                client.sendall(b"s" * size)
                reply = b""
                while len(reply) < 777:
                    reply += client.recv(65536)
            thread.join()
            server.close()
    """)
    write(tmp_path, "app.py", """
        import work
        work.crunch()
        assert work.store("blob.bin", 2 * 1024 * 1024) == 2 * 1024 * 1024
        kept = work.hold(48 * 1024 * 1024)
        work.talk(50_000)
    """)
    write(tmp_path, "targets.yaml", """
        - {module: work, function: crunch, metrics: [latency, cpu]}
        - {module: work, function: store, metrics: [latency, disk]}
        - {module: work, function: hold, metrics: [latency, memory]}
        - {module: work, function: talk, metrics: [latency, network, gpu]}
    """)
    completed = opsight_run(["-c", "targets.yaml", "-o", "run.opsight", "--no-store",
                             "--report", "tree", "--", "python", "app.py"], tmp_path, timeout=60)
    assert completed.returncode == 0, completed.stderr
    trace = opsight.load(tmp_path / "run.opsight").trace
    spans = metrics_by_span(trace)
    assert spans["crunch"][0]["cpu_ns"] >= 49e6
    assert spans["store"][0]["io_write_bytes"] >= 2 * MIB
    assert spans["store"][0]["io_read_bytes"] >= 2 * MIB
    assert spans["hold"][0]["rss_delta_bytes"] >= 44 * MIB
    assert spans["talk"][0]["net_sent_bytes"] == 50_000
    assert spans["talk"][0]["net_received_bytes"] == 777
    # opsight run samples counters every 100 ms by default.
    assert "sampler_interval_ns" in run_info(trace)


def test_a_call_that_raises_keeps_its_exception_and_its_metrics():
    @opsight.trace(metrics=["cpu", "heap"])
    def fails():
        burn_cpu(0.005)
        raise ValueError("bad batch")

    with opsight.profile() as prof:
        with pytest.raises(ValueError, match="bad batch"):
            fails()
    columns = prof.trace.slice_columns()
    row = columns["name"].index(
        "test_a_call_that_raises_keeps_its_exception_and_its_metrics.<locals>.fails")
    assert columns["attributes"]["exception.type"][row] == "ValueError"
    assert columns["attributes"]["metric.cpu_ns"][row] >= 4e6
    assert columns["attributes"]["metric.heap_delta_bytes"][row] is not None


@pytest.mark.parametrize("mode", ["reset", "passive"])
def test_rss_peak_mode_and_the_programs_own_high_water_mark(tmp_path, mode):
    """By default a memory span resets the kernel's RSS high-water mark (exact peaks; the
    program's own VmHWM changes). OPSIGHT_RSS_PEAK=passive leaves the mark alone."""
    app = write(tmp_path, "app.py", """
        import opsight

        def high_water_bytes():
            with open("/proc/self/status") as status:
                for line in status:
                    if line.startswith("VmHWM:"):
                        return int(line.split()[1]) * 1024

        big = bytearray(200 * 1024 * 1024)
        del big
        before = high_water_bytes()
        with opsight.profile() as prof:
            with opsight.span("small", metrics=["memory"]):
                pass
        after = high_water_bytes()
        columns = prof.trace.slice_columns()
        peak = columns["attributes"]["metric.rss_peak_bytes"][columns["name"].index("small")]
        print(before, after, peak)
    """)
    from conftest import run, PYTHON

    environment = {"OPSIGHT_RSS_PEAK": "passive"} if mode == "passive" else {}
    completed = run([PYTHON, str(app)], tmp_path, **environment)
    assert completed.returncode == 0, completed.stderr
    before, after, peak = map(int, completed.stdout.split())
    assert before >= 200 * MIB
    assert peak < 150 * MIB, "the span never held the 200 MiB"
    if mode == "passive":
        assert after >= before
    else:
        assert after < before - 100 * MIB


def test_a_profile_inside_a_running_session_applies_its_metrics_to_its_block():
    @opsight.trace
    def work():
        burn_cpu(0.005)

    name = "test_a_profile_inside_a_running_session_applies_its_metrics_to_its_block.<locals>.work"
    with opsight.profile() as outer:
        work()
        with opsight.profile(metrics=["cpu"]):
            work()
        work()
    calls = metrics_by_span(outer.trace)[name]
    assert [("cpu_ns" in call) for call in calls] == [False, True, False]


def _self_signed_certificate(directory) -> tuple[str, str]:
    certificate, key = str(directory / "cert.pem"), str(directory / "key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", key, "-out", certificate],
                   check=True, capture_output=True, timeout=60)
    return certificate, key


def test_tls_bytes_are_counted_once_over_a_real_tls_connection(tmp_path):
    """SSLSocket.sendall calls SSLSocket.send, both counted: the payload must count once.
    A real TLS server on 127.0.0.1 (openssl's self-signed certificate)."""
    import ssl

    certificate, key = _self_signed_certificate(tmp_path)
    server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_context.load_cert_chain(certificate, key)
    client_context = ssl.create_default_context(cafile=certificate)
    payload, reply_bytes = b"t" * 200_000, 54_321
    with opsight.profile() as prof:
        with opsight.span("tls exchange", metrics=["network"]):
            answer = loopback_exchange(
                payload, reply_bytes,
                wrap_server=lambda raw: server_context.wrap_socket(raw, server_side=True),
                wrap_client=lambda raw: client_context.wrap_socket(
                    raw, server_hostname="127.0.0.1"))
    assert len(answer) == reply_bytes
    network = metrics_by_span(prof.trace)["tls exchange"][0]
    # The application's bytes, once: TLS records and handshakes happen below Python.
    assert network["net_sent_bytes"] == len(payload)
    assert network["net_received_bytes"] == reply_bytes
