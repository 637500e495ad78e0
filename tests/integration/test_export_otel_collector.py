"""The OpenTelemetry Collector configured as a platform team runs it (issue 33, *Done
when*): its OTLP receiver over gRPC with mutual TLS and gzip, and over HTTP with TLS and
gzip, receives one `opsight run`'s traces, metrics and log records, each exact: every span
with its trace (a trace per root span), span and parent ids, every span name's duration
histogram count and sum, every log record with the ids of the span it was logged in. The
Collector is built from its own modules (scripts/servers/otelcol, `real_servers.otelcol()`)
and writes what it received as OTLP JSON lines, read back here."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time

import opsight
import pytest

from real_servers import otelcol, self_signed_certificate

PROGRAM = textwrap.dedent("""
    import logging, opsight
    logging.basicConfig(level=logging.INFO)
    log = logging.getLogger("platform.app")
    for request in range(5):
        with opsight.span("handle", request=request):
            log.warning("request %d", request)
            with opsight.span("forward"):
                pass
""")


@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
def test_the_collector_receives_traces_metrics_and_logs_exact_over_tls_and_gzip(tmp_path,
                                                                               protocol):
    server_certificate, server_key = self_signed_certificate(tmp_path, "collector")
    client_certificate, client_key = self_signed_certificate(tmp_path, "client")
    tls = (server_certificate, server_key, client_certificate)  # mutual: the client's is its CA
    script = tmp_path / "app.py"
    script.write_text(PROGRAM)
    output = tmp_path / "run.opsight"
    with otelcol(grpc_tls=tls, http_tls=tls) as collector:
        endpoint = collector.grpc_endpoint if protocol == "grpc" else collector.http_endpoint
        environment = {key: value for key, value in os.environ.items()
                       if not key.startswith(("OPSIGHT_", "OTEL_"))}
        environment.update(OTEL_EXPORTER_OTLP_ENDPOINT=endpoint,
                           OTEL_EXPORTER_OTLP_PROTOCOL=protocol,
                           OTEL_EXPORTER_OTLP_COMPRESSION="gzip",
                           OTEL_EXPORTER_OTLP_CERTIFICATE=server_certificate,
                           OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE=client_certificate,
                           OTEL_EXPORTER_OTLP_CLIENT_KEY=client_key,
                           OTEL_SERVICE_NAME="platform")
        done = subprocess.run(
            [sys.executable, "-m", "opsight", "run", "--no-store", "--report", "none", "-o",
             str(output), "--export", "otlp", "--export", "otlp-metrics", "--export",
             "otlp-logs", "--", sys.executable, str(script)],
            capture_output=True, text=True, timeout=120, env=environment)
        assert done.returncode == 0, done.stderr
        assert "dropped" not in done.stderr, done.stderr
        trace = opsight.load(str(output)).trace
        columns = trace.slice_columns()
        records = trace.log_records()
        assert len(columns["span_id"]) == 10 and len(records) == 5
        collector.wait_for("spans", lambda: len(collector.spans()), 10)
        collector.wait_for("log records", lambda: len(collector.log_records()), 5)
        collector.wait_for("metrics", lambda: len(collector.metrics()), 1)
        time.sleep(0.3)  # anything sent twice would have landed by now
        spans, logs, metrics = collector.spans(), collector.log_records(), collector.metrics()

    # Traces: every span once, with the ids the run's file gives it; a trace per root span.
    want = sorted(zip(columns["trace_id"], columns["span_id"],
                      [parent or "" for parent in columns["parent_span_id"]]))
    got = sorted((span["traceId"], span["spanId"], span.get("parentSpanId", ""))
                 for span in spans)
    assert got == want
    handles = [i for i, name in enumerate(columns["name"]) if name == "handle"]
    assert len({columns["trace_id"][i] for i in handles}) == 5

    # Metrics: each span name's duration histogram counts and sums the file's spans.
    histogram = next(metric for metric in metrics if metric["name"] == "opsight.span.duration")
    points = {point["attributes"][0]["value"]["stringValue"]: point
              for point in histogram["histogram"]["dataPoints"]}
    for name in ("handle", "forward"):
        durations = [columns["dur"][i] for i, n in enumerate(columns["name"]) if n == name]
        assert int(points[name]["count"]) == len(durations) == 5
        assert points[name]["sum"] == pytest.approx(sum(durations) / 1e9, rel=1e-9)

    # Logs: every record once, with its body and the ids of the span it was logged in.
    assert sorted((record["body"]["stringValue"], record.get("traceId", ""),
                   record.get("spanId", "")) for record in logs) == sorted(
        (record["message"], record["trace_id"] or "", record["span_id"] or "")
        for record in records)
