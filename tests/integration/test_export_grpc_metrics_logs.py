"""OTLP metrics and log records over gRPC (``otlp-metrics-grpc``, ``otlp-logs-grpc``, and
``otlp-metrics`` / ``otlp-logs`` turned into them by ``OTEL_EXPORTER_OTLP_[METRICS_|LOGS_]
PROTOCOL=grpc``) into the OpenTelemetry Collector's OTLP gRPC receiver (Jaeger v2, a Collector
distribution: ``real_servers.jaeger()``), read back from its prometheus exporter (metrics) and
its ``debug`` exporter's log (log records), and compared with the trace the run wrote:
plaintext at exit, live with TLS + mutual TLS + gzip, and gzip's smaller messages over TLS.
Also OTEL_METRIC_EXPORT_TIMEOUT: an export to a port that never answers ends within it, over
HTTP and gRPC, its data points counted as dropped."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import textwrap
import time

import opsight
import pytest

import real_servers
from real_servers import jaeger, jaeger_server, self_signed_certificate  # noqa: F401

PROGRAM = textwrap.dedent("""
    import logging, os, sys, time, opsight
    logging.basicConfig(level=logging.INFO)
    log = logging.getLogger("grpc.app")
    log.info("before any span")
    for i in range(6):
        with opsight.span("step", index=i):
            log.warning("step %d of the run", i)
            with opsight.span("inner"):
                time.sleep(0.001)
    release = sys.argv[1] if len(sys.argv) > 1 else None
    if release:
        print("done", flush=True)
        deadline = time.monotonic() + 60  # running until the test has seen what was sent
        while not os.path.exists(release) and time.monotonic() < deadline:
            time.sleep(0.05)
        with opsight.span("after release"):
            log.error("after the release")
    log.error("the end")
""")


def _environment(**settings: str) -> dict[str, str]:
    environment = {key: value for key, value in os.environ.items()
                   if not key.startswith(("OPSIGHT_", "OTEL_")) or key == "OPSIGHT_HOME"}
    environment.update(settings)
    return environment


def _command(tmp_path, service: str, targets: list[str], live: bool = False,
             release: bool = False) -> list[str]:
    script = tmp_path / "program.py"
    script.write_text(PROGRAM)
    command = [sys.executable, "-m", "opsight", "run", "--no-store", "--report", "none", "-o",
               str(tmp_path / "run.opsight"), "--service", service]
    if live:
        command.append("--export-live")
    for target in targets:
        command += ["--export", target]
    command += ["--", sys.executable, str(script)]
    if release:
        command.append(str(tmp_path / "release"))
    return command


def _run(tmp_path, service: str, targets: list[str], **settings: str):
    """PROGRAM under ``opsight run --export`` each of ``targets``; the trace it wrote and
    the process (stderr holds the export reports)."""
    done = subprocess.run(_command(tmp_path, service, targets), capture_output=True, text=True,
                          timeout=120, env=_environment(**settings))
    assert done.returncode == 0, done.stderr
    return opsight.load(str(tmp_path / "run.opsight")).trace, done


def _reports(stderr: str) -> dict[str, tuple[int, int, str]]:
    """The export report lines: item ("data points") -> (sent, offered, target)."""
    return {item: (int(sent), int(offered), target) for sent, offered, item, target in
            re.findall(r"exported (\d+) of (\d+) (data points|log records) to (\S+ \S+)",
                       stderr)}


def _sample(text: str, name: str, **labels: str) -> float | None:
    for line in text.splitlines():
        if line.startswith(name + "{") and all(f'{label}="{want}"' in line
                                               for label, want in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    return None


def _metrics_of(server, service: str, spans: int) -> str:
    """The Collector's prometheus exporter's text once it counts ``spans`` spans of
    ``service`` in all."""
    def attempt():
        text = server.received_metrics_text()
        counts = [float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                  if line.startswith("opsight_span_duration_seconds_count{")
                  and f'job="{service}"' in line]
        return text if sum(counts) >= spans else None
    return real_servers.poll(f"{spans} spans of {service} in the Collector's metrics", attempt, 30)


def _assert_metrics_exact(text: str, trace, service: str, sums: bool = True) -> None:
    """Every span name's count and +Inf bucket (and sum) as the Collector shows them for
    ``service`` are the trace's."""
    columns = trace.slice_columns()
    for name in set(columns["name"]):
        durations = [columns["dur"][i] / 1e9 for i, n in enumerate(columns["name"]) if n == name]
        assert _sample(text, "opsight_span_duration_seconds_count", span=name,
                       job=service) == len(durations), name
        assert _sample(text, "opsight_span_duration_seconds_bucket", span=name, le="+Inf",
                       job=service) == len(durations), name
        if sums:
            assert _sample(text, "opsight_span_duration_seconds_sum", span=name,
                           job=service) == pytest.approx(sum(durations), rel=1e-9, abs=1e-12)


def _received_records(server, service: str, count: int) -> list[dict]:
    """The log records of ``service`` the Collector's debug exporter printed, once it has
    ``count`` of them."""
    def attempt():
        got = [record for record in server.received_log_records()
               if record["resource"].get("service.name") == service]
        return got if len(got) >= count else None
    return real_servers.poll(f"{count} log records of {service} in the Collector", attempt, 20)


def _assert_records_exact(received: list[dict], trace, time_tolerance_ns: int = 0) -> None:
    """The Collector has each of the trace's log records once, field for field; live, the
    time from the clock line through the syncs read so far, within ``time_tolerance_ns`` of
    the whole file's (docs/export.md, *Live span export*)."""
    records = trace.log_records()
    assert sorted(record["body"] for record in received) == sorted(
        record["message"] for record in records)
    by_body = {record["body"]: record for record in received}
    for want in records:
        got = by_body[want["message"]]
        assert got["scope"] == want["logger"]
        assert abs(got["time_unix_nano"] - want["time_unix_ns"]) <= time_tolerance_ns
        assert (got["severity_number"], got["severity_text"]) == (want["severity_number"],
                                                                  want["level_name"])
        assert got["trace_id"] == (want["trace_id"] or "")
        assert got["span_id"] == (want["span_id"] or "")


def test_metrics_and_logs_arrive_exact_over_plaintext_grpc_at_exit(tmp_path, jaeger_server):
    """otlp-metrics-grpc and otlp-logs-grpc to the Collector's plaintext gRPC receiver: every
    span name's count, +Inf bucket and sum, and every log record with its trace and span ids,
    are the trace's; the reports count every data point and record sent."""
    service = "grpc-at-exit"
    endpoint = f"http://{jaeger_server.otlp_grpc_endpoint}"
    trace, done = _run(tmp_path, service,
                       [f"otlp-metrics-grpc={endpoint}", f"otlp-logs-grpc={endpoint}"])
    records = trace.log_records()
    assert len(records) == 1 + 6 + 1
    reports = _reports(done.stderr)
    points, offered, target = reports["data points"]
    assert points == offered > 0 and target == f"otlp-metrics-grpc {endpoint}", done.stderr
    assert reports["log records"] == (len(records), len(records), f"otlp-logs-grpc {endpoint}")
    assert "dropped" not in done.stderr, done.stderr
    _assert_metrics_exact(_metrics_of(jaeger_server, service, trace.run_info()["slices"]),
                          trace, service)
    _assert_records_exact(_received_records(jaeger_server, service, len(records)), trace)
    time.sleep(0.5)  # anything sent twice would have landed by now
    assert len(_received_records(jaeger_server, service, len(records))) == len(records)


@pytest.mark.parametrize("case", ["signal-grpc", "general-grpc-logs-http"])
def test_the_metrics_and_logs_protocol_variables_select_grpc(tmp_path, jaeger_server, case):
    """``otlp-metrics`` and ``otlp-logs`` with OTEL_EXPORTER_OTLP_METRICS_PROTOCOL /
    LOGS_PROTOCOL=grpc over a general http/protobuf, the general endpoint scheme-less and
    made plaintext by INSECURE: both go over gRPC and arrive. Then the general PROTOCOL=grpc
    with LOGS_PROTOCOL=http/protobuf: metrics over gRPC, logs over HTTP to LOGS_ENDPOINT
    (the signal's variable wins, either way)."""
    service = f"grpc-{case}"
    settings = {"OTEL_EXPORTER_OTLP_ENDPOINT": jaeger_server.otlp_grpc_endpoint,
                "OTEL_EXPORTER_OTLP_INSECURE": "true"}
    if case == "signal-grpc":
        settings.update(OTEL_EXPORTER_OTLP_PROTOCOL="http/protobuf",
                        OTEL_EXPORTER_OTLP_METRICS_PROTOCOL="grpc",
                        OTEL_EXPORTER_OTLP_LOGS_PROTOCOL="grpc")
        logs_target = f"otlp-logs-grpc http://{jaeger_server.otlp_grpc_endpoint}"
    else:
        settings.update(OTEL_EXPORTER_OTLP_PROTOCOL="grpc",
                        OTEL_EXPORTER_OTLP_LOGS_PROTOCOL="http/protobuf",
                        OTEL_EXPORTER_OTLP_LOGS_ENDPOINT=jaeger_server.otlp_logs_url)
        logs_target = f"otlp-logs {jaeger_server.otlp_logs_url}"
    trace, done = _run(tmp_path, service, ["otlp-metrics", "otlp-logs"], **settings)
    records = trace.log_records()
    reports = _reports(done.stderr)
    grpc_target = f"otlp-metrics-grpc http://{jaeger_server.otlp_grpc_endpoint}"
    assert reports["data points"][2] == grpc_target, done.stderr
    assert reports["log records"] == (len(records), len(records), logs_target), done.stderr
    assert "dropped" not in done.stderr, done.stderr
    _assert_metrics_exact(_metrics_of(jaeger_server, service, trace.run_info()["slices"]),
                          trace, service)
    _assert_records_exact(_received_records(jaeger_server, service, len(records)), trace)


@pytest.fixture(scope="module")
def tls_collector(tmp_path_factory):
    """The Collector with its OTLP gRPC receiver over TLS, requiring a client certificate
    (mutual TLS), each certificate self-signed (its own CA); the OTEL_* variables that
    reach it."""
    directory = tmp_path_factory.mktemp("tls")
    server_certificate, server_key = self_signed_certificate(directory, "server")
    client_certificate, client_key = self_signed_certificate(directory, "client")
    with jaeger(grpc_tls=(server_certificate, server_key, client_certificate)) as server:
        yield server, {"OTEL_EXPORTER_OTLP_CERTIFICATE": server_certificate,
                       "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE": client_certificate,
                       "OTEL_EXPORTER_OTLP_CLIENT_KEY": client_key}


def test_live_metrics_and_logs_over_tls_and_gzip(tmp_path, tls_collector):
    """--export-live otlp-metrics-grpc and otlp-logs-grpc over mutual TLS with gzip, every
    OTEL_METRIC_EXPORT_INTERVAL (300 ms) and OTEL_BLRP_SCHEDULE_DELAY (200 ms): the Collector
    has the steps' metrics and the records logged so far while the program still runs; after
    it ends, the span and record after the release too, nothing twice, everything sent."""
    server, tls = tls_collector
    service = "grpc-live-tls"
    endpoint = f"https://{server.otlp_grpc_endpoint}"
    run = subprocess.Popen(
        _command(tmp_path, service,
                 [f"otlp-metrics-grpc={endpoint}", f"otlp-logs-grpc={endpoint}"], live=True,
                 release=True),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=_environment(OTEL_METRIC_EXPORT_INTERVAL="300", OTEL_BLRP_SCHEDULE_DELAY="200",
                         OTEL_EXPORTER_OTLP_COMPRESSION="gzip", **tls))
    try:
        assert run.stdout.readline() == "done\n"
        text = _metrics_of(server, service, 12)  # 6 steps, 6 inner spans
        assert _sample(text, "opsight_span_duration_seconds_count", span="step", job=service) == 6
        early = _received_records(server, service, 7)
        assert len(early) == 7
        assert run.poll() is None  # still running
    finally:
        (tmp_path / "release").touch()
        _, stderr = run.communicate(timeout=60)
    assert run.returncode == 0, stderr
    trace = opsight.load(str(tmp_path / "run.opsight")).trace
    records = trace.log_records()
    assert len(records) == 1 + 6 + 2
    text = _metrics_of(server, service, trace.run_info()["slices"])
    _assert_metrics_exact(text, trace, service, sums=False)
    _assert_records_exact(_received_records(server, service, len(records)), trace, 1000)
    time.sleep(0.5)  # anything sent twice would have landed by now
    assert len(_received_records(server, service, len(records))) == len(records)
    assert _sample(server.received_metrics_text(), "opsight_span_duration_seconds_count",
                   span="step", job=service) == 6  # cumulative: not counted twice
    reports = _reports(stderr)
    assert reports["log records"][:2] == (len(records), len(records)), stderr
    points, offered, _ = reports["data points"]
    assert points == offered > 0, stderr
    assert "dropped" not in stderr, stderr


def test_gzip_over_tls_sends_smaller_messages_that_arrive_whole(tmp_path, tls_collector):
    """``opsight export`` of one run to the TLS Collector over gRPC, plain and then with
    OTEL_EXPORTER_OTLP_[METRICS_|LOGS_]COMPRESSION=gzip: every data point and record is sent
    both times, and the gzip messages are smaller (gRPC's message compression on the wire)."""
    server, tls = tls_collector
    service = "grpc-gzip"
    trace, _ = _run(tmp_path, service, [])
    endpoint = f"https://{server.otlp_grpc_endpoint}"

    def export(**settings: str) -> dict[str, dict]:
        done = subprocess.run(
            [sys.executable, "-m", "opsight", "export", str(tmp_path / "run.opsight"), "--to",
             f"otlp-metrics-grpc={endpoint}", "--to", f"otlp-logs-grpc={endpoint}",
             "--service", service, "--timeout", "20", "--format", "json"],
            capture_output=True, text=True, timeout=120, env=_environment(**tls, **settings))
        assert done.returncode == 0, done.stderr
        return {report["item"]: report for report in json.loads(done.stdout)}

    plain = export()
    compressed = export(OTEL_EXPORTER_OTLP_METRICS_COMPRESSION="gzip",
                        OTEL_EXPORTER_OTLP_LOGS_COMPRESSION="gzip")
    for item in ("data point", "log record"):
        assert plain[item]["sent"] == plain[item]["spans"] > 0, plain
        assert compressed[item]["sent"] == compressed[item]["spans"] == plain[item]["spans"]
        assert compressed[item]["bytes"] < plain[item]["bytes"], (plain[item], compressed[item])
    records = trace.log_records()
    received = _received_records(server, service, 2 * len(records))
    assert len(received) == 2 * len(records)  # each export's records once
    _assert_records_exact(received[len(records):], trace)


@pytest.mark.parametrize("kind", ["otlp-metrics", "otlp-metrics-grpc"])
def test_the_metric_export_timeout_bounds_an_export_to_a_black_hole(tmp_path, kind):
    """A port that takes connections and never answers: with OTEL_METRIC_EXPORT_TIMEOUT=1000
    the metrics export ends within about a second (HTTP: the request cut to it; gRPC: its
    connection attempts fail fast and are retried until the next would pass the bound) and
    counts every data point dropped; without it the request's 10 s timeout, or the retries,
    would hold it for the export's 10 s bound (--export-timeout)."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(64)
        port = listener.getsockname()[1]
        done = subprocess.run(
            _command(tmp_path, "black-hole", [f"{kind}=http://127.0.0.1:{port}"]),
            capture_output=True, text=True, timeout=120,
            env=_environment(OTEL_METRIC_EXPORT_TIMEOUT="1000"))
    assert done.returncode == 75, done.stderr  # an export dropped data
    found = re.search(r"exported 0 of (\d+) data points to \S+ \S+ in \d+ requests? "
                      r"\((\d+\.\d+) s\); (\d+) dropped", done.stderr)
    assert found, done.stderr
    assert int(found[1]) == int(found[3]) > 0, done.stderr
    assert float(found[2]) < 2.0, done.stderr
    # A bad value is refused before the program runs.
    refused = subprocess.run(
        _command(tmp_path, "black-hole", [f"{kind}=http://127.0.0.1:{port}"]),
        capture_output=True, text=True, timeout=60,
        env=_environment(OTEL_METRIC_EXPORT_TIMEOUT="1s"))
    assert refused.returncode == 64, refused.stderr
    assert "OTEL_METRIC_EXPORT_TIMEOUT '1s'" in refused.stderr, refused.stderr
    assert "the end" not in refused.stderr
