"""The exporters against REAL servers (scripts/servers/install.sh, tests/integration/
real_servers.py): a traced Python program run with ``opsight run --export``, its spans
queried back from Jaeger (OTLP/HTTP, protobuf and JSON) and Zipkin and compared field by
field with the trace opsight wrote (names, ids, parentage, nanosecond times, attributes,
resource); its metrics pushed to a Pushgateway, checked by ``promtool check metrics`` and
scraped by Prometheus, whose PromQL answers must match the trace's counts and a histogram
quantile. A server that is down gets its spans counted as dropped, never a hang."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time

import pytest

from real_servers import (TcpGate, attributes_dict, jaeger, jaeger_server,  # noqa: F401
                          otlp_spans, poll, prometheus, promtool_check_metrics,
                          pushgateway_server, require_modules,
                          self_signed_certificate, traces_of, zipkin_server)

import opsight._native as native

PROGRAM = textwrap.dedent("""
    import concurrent.futures, opsight

    def work(i):
        with opsight.span("job", index=i):
            pass

    with opsight.span("request", route="/predict", batch=4, ratio=0.5, cached=True):
        with opsight.span("preprocess"):
            pass
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            list(pool.map(work, range(3)))
        try:
            with opsight.span("postprocess"):
                raise ValueError("bad shape")
        except ValueError:
            pass
""")


def run_traced(tmp_path, *targets: str,
               service: str | None = "exporter-test") -> tuple[object, dict]:
    """Runs PROGRAM under ``opsight run --export`` (with ``--service`` unless ``service`` is
    None); returns the trace it wrote and the completed process."""
    script = tmp_path / "program.py"
    script.write_text(PROGRAM)
    output = tmp_path / "run.opsight"
    command = [sys.executable, "-m", "opsight", "run", "--no-store", "--report", "none",
               "-o", str(output)]
    if service is not None:
        command += ["--service", service]
    for target in targets:
        command += ["--export", target]
    environment = {key: value for key, value in os.environ.items()
                   if not key.startswith("OTEL_")}  # the test decides every setting
    done = subprocess.run(command + ["--", sys.executable, str(script)], capture_output=True,
                          text=True, timeout=120, env=environment)
    assert done.returncode == 0, done.stderr
    return native.read_trace(str(output)), done


def expected_spans(trace) -> dict[str, dict]:
    """The trace's slices by span id, with Unix-epoch nanosecond times."""
    columns = trace.slice_columns()
    offset = trace.run_info()["unix_offset_ns"]
    spans = {}
    for i, span_id in enumerate(columns["span_id"]):
        spans[span_id] = {"name": columns["name"][i], "parent": columns["parent_span_id"][i],
                          "trace": columns["trace_id"][i],
                          "start": columns["start"][i] + offset, "end": columns["end"][i] + offset,
                          "tid": columns["tid"][i], "linked_from": columns["linked_from_span_id"][i]}
    return spans


@pytest.mark.parametrize("protocol", ["otlp", "otlp-json", "otlp-grpc"])
def test_jaeger_returns_every_span_as_recorded(tmp_path, jaeger_server, protocol):
    endpoint = (f"http://{jaeger_server.otlp_grpc_endpoint}" if protocol == "otlp-grpc"
                else jaeger_server.otlp_http_endpoint)  # gRPC: Jaeger's OTLP gRPC receiver
    trace, done = run_traced(tmp_path, f"{protocol}={endpoint}", service=f"svc-{protocol}")
    assert "dropped" not in done.stderr, done.stderr
    expected = expected_spans(trace)
    info = trace.run_info()
    got = otlp_spans(jaeger_server.get_traces(traces_of(trace)))
    assert sorted(span["spanId"] for span in got) == sorted(expected)
    for span in got:
        want = expected[span["spanId"]]
        assert span["traceId"] == want["trace"], span["name"]
        assert span["name"] == want["name"]
        # Bracketed: `x or None == y` would be `x or (None == y)`, true for any child.
        assert (span.get("parentSpanId") or None) == want["parent"], span["name"]
        assert int(span["startTimeUnixNano"]) == want["start"], span["name"]  # to the ns
        assert int(span["endTimeUnixNano"]) == want["end"], span["name"]
        attributes = attributes_dict(span.get("attributes"))
        assert attributes["thread.id"] == want["tid"]
        assert span["resource"]["service.name"] == f"svc-{protocol}"
        assert span["resource"]["process.pid"] == info["pid"]
        assert span["resource"]["telemetry.sdk.name"] == "opsight"
        assert span["scope"] == "opsight"
        if want["linked_from"]:
            assert [link["spanId"] for link in span.get("links", [])] == [want["linked_from"]]
    # A trace per root span: the request and what it encloses are one trace, and each
    # thread-pool job (a root on its worker thread, linked to the request) one of its own.
    traces_by_name: dict[str, set[str]] = {}
    for span in got:
        traces_by_name.setdefault(span["name"], set()).add(span["traceId"])
    request_trace = traces_by_name["request"]
    assert traces_by_name["preprocess"] == traces_by_name["postprocess"] == request_trace
    jobs = {trace_id for name, ids in traces_by_name.items() if name.startswith("job ")
            for trace_id in ids}
    assert len(jobs) == 3 and not jobs & request_trace, traces_by_name
    assert info["trace_id"] not in request_trace | jobs  # the session's trace holds none
    by_name = {span["name"]: span for span in got}
    request = attributes_dict(by_name["request"]["attributes"])
    assert request["route"] == "/predict" and request["batch"] == 4
    assert request["ratio"] == 0.5 and request["cached"] is True
    failed = by_name["postprocess"]
    assert failed["status"]["code"] in (2, "STATUS_CODE_ERROR")
    assert "ValueError: bad shape" in failed["status"].get("message", "")
    event = failed["events"][0]
    assert event["name"] == "exception"
    assert attributes_dict(event["attributes"])["exception.type"] == "ValueError"


def test_the_default_service_name_is_the_program_name(tmp_path, jaeger_server):
    """Without --service, OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES, `opsight run --
    python program.py` exports as service `program.py` (docs/export.md), not as the module
    opsight runs the script through."""
    trace, done = run_traced(tmp_path, f"otlp={jaeger_server.otlp_http_endpoint}", service=None)
    assert "dropped" not in done.stderr, done.stderr
    expected = expected_spans(trace)
    got = otlp_spans(jaeger_server.get_traces(traces_of(trace)))
    assert len(got) == len(expected)
    assert {span["resource"]["service.name"] for span in got} == {"program.py"}


def test_a_grpc_port_given_as_otlp_http_is_named_and_not_retried(tmp_path, jaeger_server):
    """Jaeger's OTLP/gRPC port named where OTLP/HTTP belongs: a permanent error that says
    what the port is, not minutes of retries of "no answer"."""
    trace, _ = run_traced(tmp_path)
    start = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "opsight", "export", str(tmp_path / "run.opsight"), "--to",
         f"otlp=http://{jaeger_server.otlp_grpc_endpoint}", "--timeout", "20", "--format",
         "json"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1, done.stderr
    assert time.monotonic() - start < 10
    report = json.loads(done.stdout)[0]
    assert report["dropped"] == trace.run_info()["slices"] and report["retries"] == 0, report
    assert "answers in HTTP/2 only, as an OTLP/gRPC port does" in report["error"], report


def export_stored(tmp_path, target: str, timeout: float, environment: dict | None = None,
                  **popen) -> subprocess.CompletedProcess:
    """``opsight export`` of the run ``run_traced`` wrote, to ``target``, with only the
    ``OTEL_*`` variables ``environment`` gives; the JSON report on stdout."""
    variables = {key: value for key, value in os.environ.items() if not key.startswith("OTEL_")}
    variables.update(environment or {})
    return subprocess.run(
        [sys.executable, "-m", "opsight", "export", str(tmp_path / "run.opsight"), "--to",
         target, "--timeout", str(timeout), "--format", "json"],
        capture_output=True, text=True, timeout=120, env=variables, **popen)


def test_grpc_from_the_otel_variables_with_gzip_a_header_and_insecure(tmp_path, jaeger_server):
    """`otlp` with OTEL_EXPORTER_OTLP_PROTOCOL=grpc, a scheme-less endpoint made plaintext by
    OTEL_EXPORTER_OTLP_INSECURE, gzip (gRPC's compression) and a header (metadata): Jaeger's
    gRPC receiver takes every span and they come back whole."""
    trace, _ = run_traced(tmp_path)
    before = jaeger_server.accepted_spans()
    done = export_stored(tmp_path, "otlp", 20, {
        "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
        "OTEL_EXPORTER_OTLP_ENDPOINT": jaeger_server.otlp_grpc_endpoint,  # no scheme
        "OTEL_EXPORTER_OTLP_INSECURE": "true",
        "OTEL_EXPORTER_OTLP_COMPRESSION": "gzip",
        "OTEL_EXPORTER_OTLP_HEADERS": "X-Tenant=ml-team"})
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)[0]
    spans = trace.run_info()["slices"]
    assert report["sent"] == spans and report["dropped"] == 0, report
    assert report["target"].startswith("otlp-grpc http://127.0.0.1:"), report
    got = otlp_spans(jaeger_server.get_traces(traces_of(trace)))
    assert sorted(span["spanId"] for span in got) == sorted(expected_spans(trace))
    assert jaeger_server.accepted_spans() - before >= spans
    # Without INSECURE a scheme-less endpoint is TLS, which this plaintext port refuses:
    # permanent, named, not minutes of retries.
    done = export_stored(tmp_path, "otlp", 20, {
        "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
        "OTEL_EXPORTER_OTLP_ENDPOINT": jaeger_server.otlp_grpc_endpoint})
    assert done.returncode == 1
    report = json.loads(done.stdout)[0]
    assert report["target"].startswith("otlp-grpc https://"), report
    assert report["dropped"] == spans and "gRPC UNAVAILABLE" in report["error"], report


def test_grpc_to_a_dead_port_costs_a_bounded_wait_and_counted_drops(tmp_path):
    import socket

    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    trace, _ = run_traced(tmp_path)
    start = time.monotonic()
    done = export_stored(tmp_path, f"otlp-grpc=http://127.0.0.1:{port}", 2)
    assert done.returncode == 1
    assert time.monotonic() - start < 10
    report = json.loads(done.stdout)[0]
    assert report["sent"] == 0 and report["dropped"] == report["spans"] == trace.run_info()["slices"]
    assert report["retries"] >= 1, report  # UNAVAILABLE is retried until the time runs out
    assert "gRPC UNAVAILABLE" in report["error"], report


def test_grpc_unavailable_is_retried_until_the_collector_answers(tmp_path, jaeger_server):
    """The collector's gRPC port refuses connections (a gate in front of Jaeger, closed) for
    the first seconds: the calls end UNAVAILABLE, the batch exporter backs off and calls
    again, and once the gate opens every span reaches Jaeger, none dropped."""
    trace, _ = run_traced(tmp_path)
    gate = TcpGate(jaeger_server.otlp_grpc_port)
    export = subprocess.Popen(
        [sys.executable, "-m", "opsight", "export", str(tmp_path / "run.opsight"), "--to",
         f"otlp-grpc={gate.url}", "--timeout", "30", "--format", "json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={key: value for key, value in os.environ.items() if not key.startswith("OTEL_")})
    try:
        time.sleep(2)
        assert export.poll() is None, export.communicate()  # still retrying
        gate.open()
        stdout, stderr = export.communicate(timeout=60)
    finally:
        gate.close()
        if export.poll() is None:
            export.kill()
    assert export.returncode == 0, stderr
    report = json.loads(stdout)[0]
    spans = trace.run_info()["slices"]
    assert report["sent"] == spans and report["dropped"] == 0, report
    assert report["retries"] >= 1, report
    got = otlp_spans(jaeger_server.get_traces(traces_of(trace)))
    assert len(got) == spans


def test_an_otlp_http_port_given_as_grpc_is_named_and_not_retried(tmp_path, jaeger_server):
    trace, _ = run_traced(tmp_path)
    start = time.monotonic()
    done = export_stored(tmp_path, f"otlp-grpc=http://127.0.0.1:{jaeger_server.otlp_http_port}",
                         20)
    assert done.returncode == 1, done.stderr
    assert time.monotonic() - start < 10
    report = json.loads(done.stdout)[0]
    assert report["dropped"] == trace.run_info()["slices"] and report["retries"] == 0, report
    assert "gRPC" in report["error"], report


def _certificate(tmp_path, name: str) -> tuple[str, str]:
    """A self-signed certificate for 127.0.0.1 and its key (PEM files), made by openssl."""
    return self_signed_certificate(tmp_path, name)


def test_grpc_over_tls_and_mutual_tls_to_a_real_jaeger(tmp_path):
    """Jaeger's OTLP gRPC receiver over TLS with a self-signed certificate that requires a
    client certificate: the system's CAs refuse the server (permanent, named), the server
    refuses a client without a certificate, and with OTEL_EXPORTER_OTLP_CERTIFICATE,
    _CLIENT_CERTIFICATE and _CLIENT_KEY every span arrives."""
    server_certificate, server_key = _certificate(tmp_path, "server")
    client_certificate, client_key = _certificate(tmp_path, "client")
    trace, _ = run_traced(tmp_path)
    spans = trace.run_info()["slices"]
    with jaeger(grpc_tls=(server_certificate, server_key, client_certificate)) as server:
        target = f"otlp-grpc=https://{server.otlp_grpc_endpoint}"
        start = time.monotonic()
        untrusted = export_stored(tmp_path, target, 10)
        assert untrusted.returncode == 1
        assert time.monotonic() - start < 8  # not retried until the time runs out
        report = json.loads(untrusted.stdout)[0]
        assert report["dropped"] == spans and "permanent" in report["error"], report
        # grpc's own log line about it stays off stderr: opsight's message says it.
        assert "ssl_transport_security" not in untrusted.stderr, untrusted.stderr
        no_client = export_stored(tmp_path, target, 3,
                                  {"OTEL_EXPORTER_OTLP_CERTIFICATE": server_certificate})
        assert no_client.returncode == 1
        assert json.loads(no_client.stdout)[0]["dropped"] == spans
        mutual = export_stored(tmp_path, target, 10, {
            "OTEL_EXPORTER_OTLP_CERTIFICATE": server_certificate,
            "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE": client_certificate,
            "OTEL_EXPORTER_OTLP_CLIENT_KEY": client_key})
        assert mutual.returncode == 0, mutual.stderr
        report = json.loads(mutual.stdout)[0]
        assert report["sent"] == spans and report["dropped"] == 0, report
        got = otlp_spans(server.get_traces(traces_of(trace)))
        assert sorted(span["spanId"] for span in got) == sorted(expected_spans(trace))


def test_zipkin_returns_every_span_in_microseconds(tmp_path, zipkin_server):
    trace, done = run_traced(tmp_path, f"zipkin={zipkin_server.url}", service="zipkin-svc")
    assert "dropped" not in done.stderr, done.stderr
    expected = expected_spans(trace)
    got = zipkin_server.get_traces(traces_of(trace))
    assert sorted(span["id"] for span in got) == sorted(expected)
    for span in got:
        want = expected[span["id"]]
        assert span["name"] == want["name"].lower() or span["name"] == want["name"]
        assert span.get("parentId") == want["parent"]
        assert span["timestamp"] == want["start"] // 1000
        assert span["timestamp"] + span["duration"] >= want["end"] // 1000  # never shrinks
        assert span["localEndpoint"]["serviceName"] == "zipkin-svc"
    failed = next(span for span in got if span["name"] == "postprocess")
    assert failed["tags"]["error"] == "ValueError: bad shape"


def test_pushgateway_and_prometheus_agree_with_the_trace(tmp_path, pushgateway_server):
    trace, done = run_traced(tmp_path, f"pushgateway={pushgateway_server.url}")
    assert "dropped" not in done.stderr, done.stderr
    text = pushgateway_server.metrics_text()
    assert 'opsight_span_duration_seconds_count{' in text
    # What opsight exposes passes Prometheus's own linter.
    checked = promtool_check_metrics(native_exposition(trace))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    columns = trace.slice_columns()
    jobs = columns["name"].count("job")
    with prometheus(scrape_targets=[pushgateway_server.url], job="pushgateway") as server:
        result = server.wait_for('opsight_span_duration_seconds_count{span="job"}')
        assert float(result[0]["value"][1]) == jobs
        assert result[0]["metric"]["job"] == "opsight"
        durations = sorted(columns["dur"][i] / 1e9 for i, name in enumerate(columns["name"])
                           if name == "job")
        quantile = server.wait_for('histogram_quantile(1, opsight_span_duration_seconds_bucket{span="job"})')
        bound = float(quantile[0]["value"][1])
        assert bound >= durations[-1]  # the bucket holding the slowest job


def test_otlp_metrics_reach_the_collector_as_the_trace_counts_them(tmp_path, jaeger_server):
    """otlp-metrics into the OpenTelemetry Collector's own OTLP receiver (Jaeger v2 is a
    Collector distribution), out of its prometheus exporter: the names translate to the
    Pushgateway's, and the counts, sums and +Inf buckets are the trace's."""
    trace, done = run_traced(tmp_path, f"otlp-metrics={jaeger_server.otlp_metrics_url}")
    assert "dropped" not in done.stderr, done.stderr
    columns = trace.slice_columns()
    text = poll("the Collector's prometheus exporter",
                lambda: (lambda t: t if 'opsight_span_duration_seconds_count{' in t else None)(
                    jaeger_server.received_metrics_text()), timeout=30)
    samples = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name_and_labels, value = line.rsplit(" ", 1)
            samples[name_and_labels] = float(value)

    def sample(name: str, **labels: str) -> float:
        for key, value in samples.items():
            if key.startswith(name + "{") and all(f'{label}="{text}"' in key
                                                  for label, text in labels.items()):
                return value
        raise AssertionError(f"{name} {labels} not in:\n{text}")

    for name in set(columns["name"]):
        durations = [columns["dur"][i] / 1e9 for i, n in enumerate(columns["name"]) if n == name]
        assert sample("opsight_span_duration_seconds_count", span=name) == len(durations)
        assert sample("opsight_span_duration_seconds_bucket", span=name, le="+Inf") == len(durations)
        assert sample("opsight_span_duration_seconds_sum", span=name) == pytest.approx(
            sum(durations), rel=1e-9, abs=1e-12)
    # The resource's service.name is the Collector's job label; the tracer's own totals too.
    assert sample("opsight_span_duration_seconds_count", span="job", job="exporter-test") == 3
    assert sample("opsight_events_dropped_total") == trace.run_info()["events_dropped"]


def native_exposition(trace) -> str:
    """The exposition text opsight pushes for ``trace`` (the same C++ function)."""
    import http.server
    import threading

    received: list[bytes] = []

    class Receiver(http.server.BaseHTTPRequestHandler):
        def do_PUT(self):  # noqa: N802
            received.append(self.rfile.read(int(self.headers["Content-Length"])))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        trace.export([f"pushgateway=http://127.0.0.1:{server.server_port}"])
    finally:
        server.shutdown()
    return received[0].decode()


def test_a_server_that_is_down_costs_a_bounded_wait_and_counted_drops(tmp_path):
    import socket

    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    trace, _ = run_traced(tmp_path)
    start = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "opsight", "export", str(tmp_path / "run.opsight"), "--to",
         f"otlp=http://127.0.0.1:{port}", "--timeout", "2", "--format", "json"],
        capture_output=True, text=True, timeout=60)
    elapsed = time.monotonic() - start
    assert done.returncode == 1
    assert elapsed < 10
    report = json.loads(done.stdout)[0]
    assert report["sent"] == 0 and report["dropped"] == report["spans"] == trace.run_info()["slices"]
    assert "no answer" in report["error"]


LIVE_PROGRAM = textwrap.dedent("""
    import os, sys, time, opsight
    for i in range(40):
        with opsight.span("step"):
            time.sleep(0.002)
    print("done", flush=True)
    deadline = time.monotonic() + 60  # still running until the test has seen the steps
    while not os.path.exists(sys.argv[1]) and time.monotonic() < deadline:
        time.sleep(0.05)
""")


def test_live_metrics_are_scraped_by_prometheus_while_the_program_runs(tmp_path):
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    script = tmp_path / "live.py"
    script.write_text(LIVE_PROGRAM)
    with prometheus(scrape_targets=[f"127.0.0.1:{port}"], job="live") as server:
        run = subprocess.Popen(
            [sys.executable, "-m", "opsight", "run", "--no-store", "--report", "none", "-o",
             str(tmp_path / "live.opsight"), "--export", f"prometheus=127.0.0.1:{port}", "--",
             sys.executable, str(script), str(tmp_path / "release")], stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True)
        try:
            assert run.stdout.readline() == "done\n"
            # Seen live: the program is still sleeping when Prometheus has all 40 steps.
            # (Prometheus starts scraping a new target after its 5 s discovery delay.)
            result = server.wait_for('opsight_span_duration_seconds_count{span="step"} == 40',
                                     timeout=30)
            assert run.poll() is None
            assert result[0]["metric"]["job"] == "live"
            # Each step sleeps 2 ms: the median falls in the buckets around it (Prometheus
            # interpolates inside the 1 ms - 2.5 ms bucket).
            quantile = server.wait_for(
                'histogram_quantile(0.5, opsight_span_duration_seconds_bucket{span="step"})')
            assert 0.001 <= float(quantile[0]["value"][1]) <= 0.1
        finally:
            (tmp_path / "release").touch()
            _, stderr = run.communicate(timeout=60)
        assert run.returncode == 0, stderr
        assert f"live metrics on http://127.0.0.1:{port}/metrics" in stderr


EXEMPLAR_PROGRAM = textwrap.dedent("""
    import os, sys, time, opsight
    for i in range(40):  # fast and slow steps: exemplars in several buckets
        with opsight.span("step", index=i):
            time.sleep(0.0005 if i % 2 else 0.02)
    print("done", flush=True)
    deadline = time.monotonic() + 60  # still running until the test has seen the steps
    while not os.path.exists(sys.argv[1]) and time.monotonic() < deadline:
        time.sleep(0.05)
""")

OPENMETRICS = "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5"


def test_live_openmetrics_exemplars_in_prometheus_are_the_runs_spans(tmp_path):
    """Prometheus with exemplar storage scrapes ``opsight run --export prometheus=...``'s
    live /metrics (it asks for OpenMetrics); /api/v1/query_exemplars then gives, per bucket
    of the step histogram, a trace id and span id that are a step span's in the run's trace
    (the ids the span exporters give it), with that span's duration as the value, inside the
    bucket. promtool lints both formats as served."""
    import socket
    import urllib.request

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    script = tmp_path / "exemplars.py"
    script.write_text(EXEMPLAR_PROGRAM)
    output = tmp_path / "exemplars.opsight"
    began = time.time()
    with prometheus(scrape_targets=[f"127.0.0.1:{port}"], job="exemplars",
                    features=["exemplar-storage"]) as server:
        run = subprocess.Popen(
            [sys.executable, "-m", "opsight", "run", "--no-store", "--report", "none", "-o",
             str(output), "--export", f"prometheus=127.0.0.1:{port}", "--", sys.executable,
             str(script), str(tmp_path / "release")], stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True)
        try:
            assert run.stdout.readline() == "done\n"
            server.wait_for('opsight_span_duration_seconds_count{span="step"} == 40', timeout=30)
            exemplars = poll("exemplars of the step histogram", lambda: [
                series for series in server.query_exemplars(
                    'opsight_span_duration_seconds_bucket{span="step"}', began - 60,
                    time.time() + 60) if series["exemplars"]], timeout=20)
            served = {}
            for accept in (OPENMETRICS, None):
                request = urllib.request.Request(f"http://127.0.0.1:{port}/metrics",
                                                 headers={"Accept": accept} if accept else {})
                with urllib.request.urlopen(request, timeout=10) as response:
                    served[accept] = (response.headers["Content-Type"], response.read().decode())
            assert run.poll() is None  # seen live
        finally:
            (tmp_path / "release").touch()
            _, stderr = run.communicate(timeout=60)
        assert run.returncode == 0, stderr

    trace = native.read_trace(str(output))
    columns = trace.slice_columns()
    steps = {(trace_id, span_id): (end - start) * 1e-9 for trace_id, span_id, name, start, end in
             zip(columns["trace_id"], columns["span_id"], columns["name"], columns["start"],
                 columns["end"]) if name == "step"}
    assert len(steps) == 40
    buckets = set()
    for series in exemplars:
        assert series["seriesLabels"]["span"] == "step"
        upper = float(series["seriesLabels"]["le"])
        for exemplar in series["exemplars"]:
            key = (exemplar["labels"]["trace_id"], exemplar["labels"]["span_id"])
            assert key in steps, (key, sorted(steps)[:3])
            # the span's duration (the live reader's and the merged trace's times may round
            # a clock tick apart: a few ns)
            assert float(exemplar["value"]) == pytest.approx(steps[key], abs=1e-7)
            assert float(exemplar["value"]) <= upper
            buckets.add(upper)
    assert len(buckets) >= 2  # the fast steps' bucket and the slow steps'

    content_type, text = served[OPENMETRICS]
    assert content_type == "application/openmetrics-text; version=1.0.0; charset=utf-8"
    assert text.endswith("# EOF\n")
    assert ' # {trace_id="' in text
    assert "# TYPE opsight_events_dropped counter\nopsight_events_dropped_total 0\n" in text
    content_type, text = served[None]
    assert content_type == "text/plain; version=0.0.4; charset=utf-8"
    assert "# EOF" not in text and " # {" not in text
    # promtool parses it (exit 3: lint complaints only); its one complaint is about the
    # process samplers' gauges named *_per_s (abbreviated units), not about these families.
    linted = promtool_check_metrics(text)
    assert linted.returncode in (0, 3), linted
    assert all(line.endswith("should not contain abbreviated units")
               for line in (linted.stdout + linted.stderr).splitlines()), linted
    # promtool (2.42) parses only the Prometheus text: the OpenMetrics text stops it at the
    # first exemplar (exit 1, "text format parsing error ... expected integer as timestamp").
    linted = promtool_check_metrics(served[OPENMETRICS][1])
    assert linted.returncode == 1 and "parsing error" in linted.stderr, linted


STREAMED_PROGRAM = textwrap.dedent("""
    import os, sys, time, opsight
    with opsight.span("warm-up", phase=1):
        for i in range(30):
            with opsight.span("step", index=i):
                time.sleep(0.001)
    print("done", flush=True)
    deadline = time.monotonic() + 60  # running until the test has seen the spans
    while not os.path.exists(sys.argv[1]) and time.monotonic() < deadline:
        time.sleep(0.05)
    with opsight.span("after release"):
        pass
""")


@pytest.mark.parametrize("protocol", ["otlp", "otlp-grpc"])
def test_spans_stream_to_jaeger_while_the_program_runs(tmp_path, jaeger_server, protocol):
    endpoint = (f"http://{jaeger_server.otlp_grpc_endpoint}" if protocol == "otlp-grpc"
                else jaeger_server.otlp_http_endpoint)
    service = f"live-{protocol}"
    script = tmp_path / "streamed.py"
    script.write_text(STREAMED_PROGRAM)
    output = tmp_path / "streamed.opsight"
    run = subprocess.Popen(
        [sys.executable, "-m", "opsight", "run", "--no-store", "--report", "none", "-o",
         str(output), "--export-live", "--export", f"{protocol}={endpoint}",
         "--service", service, "--", sys.executable, str(script), str(tmp_path / "release")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert run.stdout.readline() == "done\n"
        # The program is still running: its first 31 spans are in Jaeger already.
        for _ in range(100):
            services = jaeger_server.services()
            if service in services:
                break
            time.sleep(0.1)
        assert service in jaeger_server.services()
        assert run.poll() is None
    finally:
        (tmp_path / "release").touch()
        _, stderr = run.communicate(timeout=60)
    assert run.returncode == 0, stderr
    assert "dropped" not in stderr, stderr
    # Everything, including what ended after the release, with the ids, parents and times
    # of the file the run wrote.
    trace = native.read_trace(str(output))
    expected = expected_spans(trace)
    got = otlp_spans(jaeger_server.get_traces(traces_of(trace)))
    assert sorted(span["spanId"] for span in got) == sorted(expected)
    # Live times come from the clock line through the syncs read so far, the file's from the
    # line through all of them: on this VM they differ by up to a few tens of ns.
    error_bound = 1000
    for span in got:
        want = expected[span["spanId"]]
        assert span["name"] == want["name"]
        assert (span.get("parentSpanId") or None) == want["parent"], span["name"]
        assert span["traceId"] == want["trace"], span["name"]  # live: the file's trace too
        assert abs(int(span["startTimeUnixNano"]) - want["start"]) <= error_bound, span["name"]
        assert abs(int(span["endTimeUnixNano"]) - want["end"]) <= error_bound, span["name"]
    steps = [span for span in got if span["name"] == "step"]
    assert sorted(attributes_dict(span["attributes"])["index"] for span in steps) == list(range(30))


OUTAGE_PROGRAM = textwrap.dedent("""
    import os, sys, time, opsight

    def wait_for(name):
        deadline = time.monotonic() + 120
        while not os.path.exists(os.path.join(sys.argv[1], name)) and time.monotonic() < deadline:
            time.sleep(0.02)

    for phase, count in enumerate([int(sys.argv[2]), int(sys.argv[3])]):
        for i in range(count):
            with opsight.span("burst", phase=phase):
                pass
        print(f"phase {phase}", flush=True)
        wait_for(f"go{phase}")
""")


def test_live_export_rides_out_a_collector_down_at_start_and_mid_run(tmp_path, jaeger_server):
    """`opsight run --export-live` to Jaeger through a gate the test takes down: down at
    start, up, down again while the program records more spans than the export queue
    holds (256 batches of 512), up again. The live exporter holds the reading back instead
    of dropping (the spans wait in the run's files) and catches up: every span the file
    holds is sent, none dropped, and Jaeger's receiver counted every one of them."""
    gate = TcpGate(jaeger_server.otlp_http_port)  # closed: nobody listens on its port
    before = jaeger_server.accepted_spans()
    script = tmp_path / "outage.py"
    script.write_text(OUTAGE_PROGRAM)
    output = tmp_path / "outage.opsight"
    run = subprocess.Popen(
        [sys.executable, "-m", "opsight", "run", "--no-store", "--report", "none", "-o",
         str(output), "--export-live", "--export", f"otlp={gate.url}", "--service", "outage",
         "--", sys.executable, str(script), str(tmp_path), "20000", "200000"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def accepted_reaches(count: int, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if jaeger_server.accepted_spans() - before >= count:
                return True
            time.sleep(0.1)
        return False

    try:
        assert run.stdout.readline() == "phase 0\n"
        time.sleep(1.5)  # down at start: the first batches are refused and retried
        assert jaeger_server.accepted_spans() == before
        gate.open()
        assert accepted_reaches(20000, 30), jaeger_server.accepted_spans() - before
        gate.close()  # down mid-run, while 200 000 more spans are recorded
        (tmp_path / "go0").touch()
        assert run.stdout.readline() == "phase 1\n"
        time.sleep(2.0)
        down_count = jaeger_server.accepted_spans() - before
        assert down_count < 20000 + 200000  # held back, not sent
        gate.open()
        assert accepted_reaches(20000 + 200000, 60), jaeger_server.accepted_spans() - before
        (tmp_path / "go1").touch()
        _, stderr = run.communicate(timeout=120)
    finally:
        if run.poll() is None:
            run.kill()
            run.communicate()
        gate.close()
    assert run.returncode == 0, stderr
    recorded = native.read_trace(str(output)).run_info()["slices"]
    assert recorded == 220000, stderr  # the recorder kept every span
    assert f"exported {recorded} of {recorded} spans" in stderr, stderr
    assert "dropped" not in stderr, stderr
    assert jaeger_server.accepted_spans() - before == recorded


GEN_AI_PROGRAM = textwrap.dedent("""
    import torch
    import opsight

    class TinyNet(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.body = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU())

        def forward(self, x):
            return self.body(x)

    model = TinyNet()
    with torch.inference_mode():
        for _ in range(2):
            model(torch.ones(1, 8))
""")


@pytest.mark.parametrize("live", [False, True], ids=["at exit", "live"])
def test_model_inference_spans_carry_gen_ai_attributes_with_the_opt_in(tmp_path, jaeger_server,
                                                                        live):
    """A real torch model under `opsight run` with OpenTelemetry's GenAI opt-in: in Jaeger,
    each forward of the model (its outermost module call) carries gen_ai.operation.name,
    gen_ai.provider.name and gen_ai.request.model; its inner modules do not."""
    require_modules("torch")
    script = tmp_path / "tiny.py"
    script.write_text(GEN_AI_PROGRAM)
    output = tmp_path / "tiny.opsight"
    done = subprocess.run(
        [sys.executable, "-m", "opsight", "run", "--no-store", "--report", "none", "-o",
         str(output), *(["--export-live"] if live else []), "--export",
         f"otlp={jaeger_server.otlp_http_endpoint}", "--", sys.executable, str(script)],
        capture_output=True, text=True, timeout=300,
        env={**os.environ, "OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental"})
    assert done.returncode == 0, done.stderr
    trace = native.read_trace(str(output))
    modules = sum(1 for category in trace.slice_columns()["category"] if category == "module")
    assert modules == 2 * 4  # TinyNet, body, body.0, body.1 per forward
    spans = otlp_spans(jaeger_server.get_traces(traces_of(trace)))
    by_name: dict[str, list[dict]] = {}
    for span in spans:
        by_name.setdefault(span["name"], []).append(attributes_dict(span["attributes"]))
    assert len(by_name["TinyNet"]) == 2
    for attributes in by_name["TinyNet"]:
        assert (attributes["gen_ai.operation.name"], attributes["gen_ai.provider.name"],
                attributes["gen_ai.request.model"]) == ("inference", "pytorch", "TinyNet")
    for inner in ("body", "body.0", "body.1"):
        assert all(not any(key.startswith("gen_ai.") for key in attributes)
                   for attributes in by_name[inner]), inner


REQUESTS = 100  # issue 33: "100 requests without traceparent give 100 traces"


@pytest.mark.parametrize("arguments", [[], ["--export-live"], ["--merge", "stream"]],
                         ids=["at exit", "live", "at exit merged streaming"])
def test_a_live_fastapi_server_gives_a_trace_per_request(tmp_path, jaeger_server, zipkin_server,
                                                         arguments):
    """A real FastAPI service under uvicorn and `opsight run`, sent REQUESTS requests without
    a `traceparent`: Jaeger and Zipkin each hold REQUESTS traces, one server span each,
    none of them the run's own trace id (as the OpenTelemetry SDK gives every root span a
    new trace id). Before, the whole server was one trace. Merged streaming, the run is
    exported from its files at the end, with the ids and traces of the merged trace."""
    import signal
    import urllib.error
    import urllib.request

    from real_servers import free_ports
    from test_run_control import SERVICE  # a FastAPI service under uvicorn on argv[1]

    require_modules("fastapi", "uvicorn")
    port, = free_ports(1)
    script = tmp_path / "service.py"
    script.write_text(SERVICE)
    output = tmp_path / "service.opsight"
    environment = {key: value for key, value in os.environ.items() if not key.startswith("OTEL_")}
    run = subprocess.Popen(
        [sys.executable, "-m", "opsight", "run", "--no-store", "--report", "none", "-o",
         str(output), *arguments, "--service", "per-request",
         "--export", f"otlp={jaeger_server.otlp_http_endpoint}",
         "--export", f"zipkin={zipkin_server.url}", "--", sys.executable, str(script), str(port)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
        env=environment)
    try:
        deadline = time.monotonic() + 60
        for item in range(REQUESTS):
            while True:
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{port}/infer/{item}",
                                                timeout=10) as answer:
                        assert answer.status == 200
                    break
                except (urllib.error.URLError, ConnectionError):
                    assert item == 0 and run.poll() is None and time.monotonic() < deadline
                    time.sleep(0.1)
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGINT)
        _, stderr = run.communicate(timeout=60)
    assert run.returncode == 0, stderr
    assert "dropped" not in stderr, stderr
    assert ("merged streaming" in stderr) == ("--merge" in arguments), stderr
    trace = native.read_trace(str(output))
    columns = trace.slice_columns()
    served = [(trace_id, span_id) for trace_id, span_id, name in
              zip(columns["trace_id"], columns["span_id"], columns["name"])
              if name == "GET /infer/{item}"]
    assert len(served) == REQUESTS
    trace_ids = {trace_id for trace_id, _ in served}
    assert len(trace_ids) == REQUESTS  # a trace per request
    assert trace.run_info()["trace_id"] not in trace_ids
    for trace_id, span_id in served:
        spans = otlp_spans(jaeger_server.get_trace(trace_id, min_spans=1))
        assert [span["spanId"] for span in spans] == [span_id]
        assert "parentSpanId" not in spans[0] and spans[0]["kind"] in (2, "SPAN_KIND_SERVER")
        zipkin_spans = zipkin_server.get_trace(trace_id, min_spans=1)
        assert [span["id"] for span in zipkin_spans] == [span_id]
        assert "parentId" not in zipkin_spans[0]


def test_a_b3_caller_continues_its_trace_in_zipkin(tmp_path, zipkin_server):
    """A caller instrumented the Zipkin way sends a `b3` header to a FastAPI service under
    `opsight run` with OTEL_PROPAGATORS=b3: in Zipkin the service's span is in the caller's
    trace, the caller's span its parent."""
    import signal
    import urllib.error
    import urllib.request

    from real_servers import free_ports
    from test_run_control import SERVICE

    # FastAPI imports opentelemetry-api, which fails at import under OTEL_PROPAGATORS=b3
    # unless the B3 propagator package is installed: a Zipkin shop has it.
    require_modules("fastapi", "uvicorn", "opentelemetry.propagators.b3")
    port, = free_ports(1)
    script = tmp_path / "service.py"
    script.write_text(SERVICE)
    environment = {key: value for key, value in os.environ.items() if not key.startswith("OTEL_")}
    environment["OTEL_PROPAGATORS"] = "b3"
    run = subprocess.Popen(
        [sys.executable, "-m", "opsight", "run", "--no-store", "--report", "none", "-o",
         str(tmp_path / "service.opsight"), "--service", "b3-service", "--export",
         f"zipkin={zipkin_server.url}", "--", sys.executable, str(script), str(port)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
        env=environment)
    trace_id, caller = "463ac35c9f6413ad48485a3953bb6124", "a2fb4a1d1a96d312"
    try:
        deadline = time.monotonic() + 60
        while True:
            request = urllib.request.Request(f"http://127.0.0.1:{port}/infer/7",
                                             headers={"b3": f"{trace_id}-{caller}-1"})
            try:
                with urllib.request.urlopen(request, timeout=10) as answer:
                    assert answer.status == 200
                break
            except (urllib.error.URLError, ConnectionError):
                assert run.poll() is None and time.monotonic() < deadline, run.communicate()
                time.sleep(0.1)
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGINT)
        _, stderr = run.communicate(timeout=60)
    assert run.returncode == 0, stderr
    spans = zipkin_server.get_trace(trace_id, min_spans=1)
    served = [span for span in spans if span["name"] == "get /infer/{item}"]
    assert len(served) == 1, spans
    assert served[0]["parentId"] == caller
    assert served[0]["localEndpoint"]["serviceName"] == "b3-service"
