"""The OpenTelemetry SDK settings opsight honours when it exports (docs/export.md,
*OpenTelemetry conformance*), each against a real HTTP receiver in this process that
records what reaches it: gzip bodies (``OTEL_EXPORTER_OTLP_[TRACES_]COMPRESSION``), the
per-request bound (``OTEL_EXPORTER_OTLP_TIMEOUT``), the batch span processor's
``OTEL_BSP_*``, ``OTEL_SDK_DISABLED``, the User-Agent; and the failures that say so: every
target checked before ``opsight run`` starts the program (exit 64), a permanent error
named and not retried, and exit 75 when an export dropped spans. Each test fails without
the behaviour it names."""

from __future__ import annotations

import gzip
import http.server
import os
import re
import subprocess
import sys
import threading
import time

import pytest

import opsight
from conftest import require, require_command


class _Receiver:
    """An OTLP/HTTP receiver on 127.0.0.1 answering ``status`` (after ``delay_s``) with
    ``answer`` as its body; keeps each request's headers and raw body."""

    def __init__(self, status: int = 200, delay_s: float = 0.0, answer: bytes = b""):
        self.requests: list[tuple[dict[str, str], bytes]] = []
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 (the http.server API)
                body = self.rfile.read(int(self.headers["Content-Length"]))
                receiver.requests.append(({key.lower(): value
                                           for key, value in self.headers.items()}, body))
                time.sleep(delay_s)
                self.send_response(status)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            do_PUT = do_POST  # noqa: N815 (a Pushgateway's method)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver():
    made: list[_Receiver] = []

    def make(status: int = 200, delay_s: float = 0.0) -> _Receiver:
        made.append(_Receiver(status, delay_s))
        return made[-1]

    yield make
    for server in made:
        server.close()


@pytest.fixture
def otel_free(monkeypatch):
    """This process's environment with no OTEL_* or OPSIGHT_EXPORT variable: each test
    sets what it checks."""
    for name in list(os.environ):
        if name.startswith("OTEL_") or name == "OPSIGHT_EXPORT":
            monkeypatch.delenv(name)
    return monkeypatch


def _trace(tmp_path, spans: int = 5):
    with opsight.profile(tmp_path / "run.opsight"):
        for index in range(spans):
            with opsight.span("work", index=index):
                pass
    return opsight.load(tmp_path / "run.opsight").trace


def _span_count(body: bytes) -> int:
    """Spans in an OTLP ExportTraceServiceRequest (protobuf), read with opentelemetry-proto."""
    require("opentelemetry.proto")
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest)

    request = ExportTraceServiceRequest.FromString(body)
    return sum(len(scope.spans) for resource in request.resource_spans
               for scope in resource.scope_spans)


def test_gzip_compression_sends_a_gzip_body_that_holds_every_span(tmp_path, receiver, otel_free):
    trace = _trace(tmp_path)
    server = receiver()
    otel_free.setenv("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip")
    report, = trace.export([f"otlp={server.url}"], timeout_s=10)
    assert report["sent"] == 5, report
    (headers, body), = server.requests
    assert headers["content-encoding"] == "gzip"
    assert body[:2] == b"\x1f\x8b"  # a gzip member on the wire
    assert _span_count(gzip.decompress(body)) == 5
    assert report["bytes"] == len(body)  # the report counts what went on the wire


def test_the_traces_compression_variable_wins_over_the_general_one(tmp_path, receiver, otel_free):
    trace = _trace(tmp_path)
    server = receiver()
    otel_free.setenv("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip")
    otel_free.setenv("OTEL_EXPORTER_OTLP_TRACES_COMPRESSION", "none")
    report, = trace.export([f"otlp={server.url}"], timeout_s=10)
    assert report["sent"] == 5, report
    (headers, body), = server.requests
    assert "content-encoding" not in headers
    assert _span_count(body) == 5


def test_every_request_names_opsight_and_its_version_in_its_user_agent(tmp_path, receiver,
                                                                        otel_free):
    trace = _trace(tmp_path)
    server = receiver()
    trace.export([f"otlp={server.url}", f"zipkin={server.url}"], timeout_s=10)
    agents = {headers["user-agent"] for headers, _ in server.requests}
    assert agents == {f"opsight/{opsight.__version__} (OTLP/HTTP; cpp-httplib)"}


def test_the_batch_size_comes_from_otel_bsp_unless_given(tmp_path, receiver, otel_free):
    trace = _trace(tmp_path)
    server = receiver()
    otel_free.setenv("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "2")
    report, = trace.export([f"otlp={server.url}"], timeout_s=10)
    assert (report["sent"], report["requests"]) == (5, 3)  # 2 + 2 + 1
    assert sorted(_span_count(body) for _, body in server.requests) == [1, 2, 2]
    given, = trace.export([f"otlp={server.url}"], timeout_s=10, batch_spans=4)
    assert given["requests"] == 2  # the caller's batch size wins


def test_the_otlp_timeout_bounds_each_request(tmp_path, receiver, otel_free):
    """A receiver that takes 3 s: with OTEL_EXPORTER_OTLP_TIMEOUT=300 (ms) each attempt
    gives up after 0.3 s and is retried; without it the first attempt would wait for the
    whole export (2 s) and never be retried."""
    trace = _trace(tmp_path)
    server = receiver(delay_s=3.0)
    otel_free.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "300")
    report, = trace.export([f"otlp={server.url}"], timeout_s=2)
    assert report["dropped"] == 5
    assert report["retries"] >= 1, report


def test_the_bsp_export_timeout_bounds_one_batch_with_its_retries(tmp_path, receiver, otel_free):
    """Always 503: the batch is retried until OTEL_BSP_EXPORT_TIMEOUT (600 ms) and then
    given up, long before the export's own 8 s (the default bound per batch is 60 s)."""
    trace = _trace(tmp_path)
    server = receiver(status=503)
    otel_free.setenv("OTEL_BSP_EXPORT_TIMEOUT", "600")
    start = time.monotonic()
    report, = trace.export([f"otlp={server.url}"], timeout_s=8)
    assert time.monotonic() - start < 4
    assert report["dropped"] == 5
    assert "5 failed" in report["error"] and "gave up after" in report["error"], report


def test_a_permanent_error_is_named_and_not_retried(tmp_path, receiver, otel_free):
    trace = _trace(tmp_path)
    server = receiver(status=401)
    report, = trace.export([f"otlp={server.url}"], timeout_s=10)
    assert report["retries"] == 0 and len(server.requests) == 1
    assert "HTTP 401 Unauthorized" in report["error"], report
    assert "permanent: not retried" in report["error"]


def test_a_partial_success_counts_the_rejected_spans_as_dropped(tmp_path, otel_free):
    """A collector that takes each batch but rejects 2 of its spans (an OTLP partial
    success, as opentelemetry-proto encodes it): 2 per batch are dropped, with its reason."""
    require("opentelemetry.proto")
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTracePartialSuccess, ExportTraceServiceResponse)

    answer = ExportTraceServiceResponse(partial_success=ExportTracePartialSuccess(
        rejected_spans=2, error_message="spans older than 1 h")).SerializeToString()
    trace = _trace(tmp_path, spans=6)
    server = _Receiver(answer=answer)
    try:
        report, = trace.export([f"otlp={server.url}"], timeout_s=10, batch_spans=3)
    finally:
        server.close()
    assert (report["sent"], report["dropped"], report["requests"]) == (2, 4, 2), report
    assert "rejected 2 spans of the batch (OTLP partial success): spans older than 1 h" in \
        report["error"], report


def test_a_slow_servers_drops_say_why(tmp_path, receiver, otel_free):
    trace = _trace(tmp_path, spans=4)
    server = receiver(delay_s=3.0)
    report, = trace.export([f"otlp={server.url}"], timeout_s=1, batch_spans=1)
    assert report["dropped"] == 4
    assert "unsent when the export's time ran out" in report["error"], report


# ---- opsight run ------------------------------------------------------------------------

PROGRAM = """
import sys, opsight
open(sys.argv[1], "w").close()  # proof that the program ran
for i in range(3):
    with opsight.span("step"):
        pass
"""


def _opsight_run(tmp_path, arguments: list[str], **environment: str):
    script = tmp_path / "prog.py"
    script.write_text(PROGRAM)
    marker = tmp_path / "ran"
    if marker.exists():
        marker.unlink()
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("OTEL_", "OPSIGHT_")) or key == "OPSIGHT_HOME"}
    env.update(environment)
    done = subprocess.run(
        [sys.executable, "-m", "opsight", "run", "--no-store", "--report", "none", "-o",
         str(tmp_path / "run.opsight"), *arguments, "--", sys.executable, str(script),
         str(marker)], capture_output=True, text=True, timeout=120, env=env)
    return done, marker.exists()


@pytest.mark.parametrize("live", [False, True], ids=["at exit", "live"])
@pytest.mark.parametrize("arguments, environment, named", [
    (["--export", "otlp=http//x"], {}, "not a URL"),
    (["--export", "bogus=x"], {}, "unknown kind 'bogus'"),
    (["--export", "kafka=127.0.0.1:9?securty.protocol=SSL"], {}, "securty.protocol"),
    (["--export", "otlp"], {"OTEL_EXPORTER_OTLP_PROTOCOL": "http/thrift"},
     "'http/thrift' is not supported"),
    (["--export", "otlp-grpc=http://x:4318/v1/traces"], {}, "'/v1/traces' is a path"),
    (["--export", "otlp"], {"OTEL_EXPORTER_OTLP_COMPRESSION": "br"}, "'br' is not gzip or none"),
    (["--export", "otlp"], {"OTEL_BSP_SCHEDULE_DELAY": "5s"}, "OTEL_BSP_SCHEDULE_DELAY '5s'"),
    ([], {"OPSIGHT_EXPORT": "zipkin=ftp://x"}, "scheme 'ftp'"),
    (["--export", "otlp-logs"], {"OTEL_BLRP_SCHEDULE_DELAY": "soon"},
     "OTEL_BLRP_SCHEDULE_DELAY 'soon'"),
    (["--export", "otlp-metrics"], {"OTEL_METRIC_EXPORT_INTERVAL": "0"},
     "OTEL_METRIC_EXPORT_INTERVAL '0'"),
], ids=["url", "kind", "kafka property", "protocol", "grpc path", "compression", "bsp",
        "OPSIGHT_EXPORT", "blrp", "metric interval"])
def test_a_bad_target_is_refused_before_the_program_starts(tmp_path, live, arguments,
                                                           environment, named):
    done, ran = _opsight_run(tmp_path, [*(["--export-live"] if live else []), *arguments],
                             **environment)
    if named == "securty.protocol" and "built without Kafka support" in done.stderr:
        named = "built without Kafka support"
    if named == "'/v1/traces' is a path" and "without OTLP/gRPC support" in done.stderr:
        named = "without OTLP/gRPC support"
    assert done.returncode == 64, done.stderr
    assert not ran, "the program ran"
    assert named in done.stderr and "(the program was not started)" in done.stderr, done.stderr


def test_opsight_run_exits_75_when_an_export_dropped_spans(tmp_path, receiver):
    server = receiver(status=401)
    done, ran = _opsight_run(tmp_path, ["--export", f"otlp={server.url}"])
    assert ran and done.returncode == 75, done.stderr
    assert "3 dropped: 3 failed; last error: HTTP 401 Unauthorized" in done.stderr, done.stderr
    allowed, _ = _opsight_run(tmp_path, ["--allow-export-drops", "--export", f"otlp={server.url}"])
    assert allowed.returncode == 0, allowed.stderr


def test_otel_sdk_disabled_sends_nothing_and_says_so(tmp_path, receiver):
    server = receiver()
    for live in ([], ["--export-live"]):
        done, ran = _opsight_run(tmp_path, [*live, "--export", f"otlp={server.url}"],
                                 OTEL_SDK_DISABLED="true")
        assert ran and done.returncode == 0, done.stderr
        assert "OTEL_SDK_DISABLED=true: nothing will be exported" in done.stderr
    assert server.requests == []
    sent, _ = _opsight_run(tmp_path, ["--export", f"otlp={server.url}"],
                           OTEL_SDK_DISABLED="false")
    assert sent.returncode == 0 and len(server.requests) == 1, sent.stderr


LIVE_PROGRAM = """
import os, sys, time, opsight
with opsight.span("first"):
    pass
print("recorded", flush=True)
deadline = time.monotonic() + 60
while not os.path.exists(sys.argv[1]) and time.monotonic() < deadline:
    time.sleep(0.05)
"""


def test_the_schedule_delay_holds_a_partial_live_batch(tmp_path, receiver):
    """OTEL_BSP_SCHEDULE_DELAY=30000: a lone span waits (the default 1 s would send it
    within about a second); it is sent at the end all the same."""
    server = receiver()
    script = tmp_path / "live.py"
    script.write_text(LIVE_PROGRAM)
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("OTEL_", "OPSIGHT_")) or key == "OPSIGHT_HOME"}
    env["OTEL_BSP_SCHEDULE_DELAY"] = "30000"
    run = subprocess.Popen(
        [sys.executable, "-m", "opsight", "run", "--no-store", "--report", "none", "-o",
         str(tmp_path / "live.opsight"), "--export-live", "--export", f"otlp={server.url}",
         "--", sys.executable, str(script), str(tmp_path / "release")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert run.stdout.readline() == "recorded\n"
        time.sleep(2.5)
        held = len(server.requests)
    finally:
        (tmp_path / "release").touch()
        _, stderr = run.communicate(timeout=60)
    assert run.returncode == 0, stderr
    assert held == 0, "sent before the schedule delay"
    assert sum(_span_count(body) for _, body in server.requests) == 1


def test_a_certificate_the_check_refuses_is_named_and_not_retried(tmp_path, otel_free):
    """An https receiver whose self-signed certificate no CA vouches for: the handshake is
    refused once, named, and not retried (retrying cannot mend a configuration)."""
    import ssl

    require_command("openssl", "openssl")  # makes the test certificate
    key, certificate = tmp_path / "key.pem", tmp_path / "cert.pem"
    made = subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days",
                           "1", "-subj", "/CN=127.0.0.1", "-keyout", str(key), "-out",
                           str(certificate)], capture_output=True, text=True, timeout=60)
    assert made.returncode == 0, made.stderr
    trace = _trace(tmp_path)
    server = _Receiver()
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(certificate, key)
    handshakes = []
    plain_socket = server.server.socket
    server.server.socket = context.wrap_socket(plain_socket, server_side=True,
                                               do_handshake_on_connect=False)
    original_get_request = server.server.get_request

    def get_request():
        connection, address = original_get_request()
        handshakes.append(address)
        return connection, address

    server.server.get_request = get_request
    try:
        report, = trace.export([f"otlp=https://127.0.0.1:{server.server.server_port}"],
                               timeout_s=10)
    finally:
        server.close()
    assert report["dropped"] == 5 and report["retries"] == 0, report
    assert "TLS with https://127.0.0.1" in report["error"], report
    assert "permanent: not retried" in report["error"], report
    assert len(handshakes) <= 2  # one connection per sender thread at most: no retries
    assert server.requests == []


def test_a_port_that_answers_only_http2_is_named_and_not_retried(tmp_path, otel_free):
    """A server that answers an HTTP/1.1 request with an HTTP/2 SETTINGS frame and hangs up,
    as a gRPC server does (an OTLP/gRPC port given as OTLP/HTTP): named, not retried.
    tests/integration/test_export_servers.py does the same against Jaeger's gRPC port."""
    import socket

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    connections = []

    def serve():
        while True:
            try:
                connection, _ = listener.accept()
            except OSError:
                return
            connections.append(connection)
            connection.recv(65536)
            connection.sendall(b"\x00\x00\x06\x04\x00\x00\x00\x00\x00\x00\x05\x00\x00\x40\x00")
            connection.close()

    threading.Thread(target=serve, daemon=True).start()
    trace = _trace(tmp_path)
    try:
        report, = trace.export([f"otlp=http://127.0.0.1:{listener.getsockname()[1]}"],
                               timeout_s=10, batch_spans=5)
    finally:
        listener.close()
    assert report["dropped"] == 5 and report["retries"] == 0, report
    assert "answers in HTTP/2 only, as an OTLP/gRPC port does" in report["error"], report
    assert len(connections) <= 2 * 2  # per sender: the request and one probe


def _certificate(tmp_path, name: str) -> tuple[str, str]:
    """A self-signed certificate for 127.0.0.1 and its key (PEM files), made by openssl."""
    require_command("openssl", "openssl")  # makes the test certificates
    key, certificate = tmp_path / f"{name}.key", tmp_path / f"{name}.pem"
    made = subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days",
                           "1", "-subj", f"/CN={name}", "-addext", "subjectAltName=IP:127.0.0.1",
                           "-keyout", str(key), "-out", str(certificate)],
                          capture_output=True, text=True, timeout=60)
    assert made.returncode == 0, made.stderr
    return str(certificate), str(key)


def _https(receiver: _Receiver, certificate: str, key: str, client_ca: str | None = None):
    """Serves `receiver` over TLS; with `client_ca`, a client certificate it signed is
    required (mutual TLS)."""
    import ssl

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(certificate, key)
    if client_ca:
        context.verify_mode = ssl.CERT_REQUIRED
        context.load_verify_locations(client_ca)
    receiver.server.socket = context.wrap_socket(receiver.server.socket, server_side=True)
    return f"https://127.0.0.1:{receiver.server.server_port}"


def test_the_otlp_certificate_names_the_ca_of_the_servers_certificate(tmp_path, otel_free):
    trace = _trace(tmp_path)
    certificate, key = _certificate(tmp_path, "server")
    server = _Receiver()
    url = _https(server, certificate, key)
    try:
        refused, = trace.export([f"otlp={url}"], timeout_s=10)  # the system's CAs: refused
        otel_free.setenv("OTEL_EXPORTER_OTLP_CERTIFICATE", certificate)
        sent, = trace.export([f"otlp={url}"], timeout_s=10)
    finally:
        server.close()
    assert refused["dropped"] == 5 and "TLS with" in refused["error"], refused
    assert sent["sent"] == 5, sent
    assert sum(_span_count(body) for _, body in server.requests) == 5


def test_mutual_tls_with_the_client_certificate_and_key(tmp_path, otel_free):
    trace = _trace(tmp_path)
    server_certificate, server_key = _certificate(tmp_path, "server")
    client_certificate, client_key = _certificate(tmp_path, "client")
    server = _Receiver()
    url = _https(server, server_certificate, server_key, client_ca=client_certificate)
    otel_free.setenv("OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE", server_certificate)
    try:
        without, = trace.export([f"otlp={url}"], timeout_s=10)  # no client certificate
        otel_free.setenv("OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE", client_certificate)
        otel_free.setenv("OTEL_EXPORTER_OTLP_CLIENT_KEY", client_key)
        with_client, = trace.export([f"otlp={url}"], timeout_s=10)
    finally:
        server.close()
    assert without["dropped"] == 5, without
    assert with_client["sent"] == 5, with_client
    assert sum(_span_count(body) for _, body in server.requests) == 5


def test_tls_files_are_checked_with_the_target(tmp_path, otel_free):
    trace = _trace(tmp_path)
    otel_free.setenv("OTEL_EXPORTER_OTLP_CERTIFICATE", str(tmp_path / "missing.pem"))
    with pytest.raises(ValueError, match="OTEL_EXPORTER_OTLP_CERTIFICATE '.*missing.pem': "
                                         "cannot be read"):
        trace.export(["otlp=https://127.0.0.1:1"])
    otel_free.delenv("OTEL_EXPORTER_OTLP_CERTIFICATE")
    otel_free.setenv("OTEL_EXPORTER_OTLP_CLIENT_KEY", __file__)
    with pytest.raises(ValueError, match="mutual TLS needs both"):
        trace.export(["otlp=https://127.0.0.1:1"])


# ---- OTEL_PROPAGATORS -------------------------------------------------------------------

def test_b3_and_b3multi_headers_are_read_when_named(otel_free, capsys):
    from opsight import propagation

    single = {"b3": "80f198ee56343ba864fe8b2a57d3eff7-e457b5a2e4d86bd1-0-05e3ac9a4f6e3b90"}
    multi = {"X-B3-TraceId": "a3ce929d0e0e4736", "X-B3-SpanId": "00f067aa0ba902b7",
             "X-B3-Sampled": "1"}
    assert propagation.extract(single) is None  # the default: tracecontext, baggage
    otel_free.setenv("OTEL_PROPAGATORS", "b3,b3multi")
    assert propagation.extract(single) == ("80f198ee56343ba864fe8b2a57d3eff7",
                                           0xe457b5a2e4d86bd1, 0, "", "")
    # A 64-bit trace id is left-padded to 128 bits; header names in any case (ASGI's).
    assert propagation.extract([(b"x-b3-traceid", b"a3ce929d0e0e4736"),
                                (b"x-b3-spanid", b"00f067aa0ba902b7"),
                                (b"x-b3-sampled", b"1")]) == (
        "0000000000000000a3ce929d0e0e4736", 0x00f067aa0ba902b7, 1, "", "")
    assert propagation.extract({"b3": "0"}) is None  # a sampling decision alone: no context
    otel_free.setenv("OTEL_PROPAGATORS", "b3multi, tracecontext")
    assert propagation.extract(multi).parent_span_id == 0x00f067aa0ba902b7
    otel_free.setenv("OTEL_PROPAGATORS", "none")
    assert propagation.extract(multi) is None
    otel_free.setenv("OTEL_PROPAGATORS", "tracecontext,jaeger")
    propagation.propagators()
    assert "unknown propagator 'jaeger' ignored" in capsys.readouterr().err


def test_a_call_carries_the_headers_of_every_propagator_named_and_the_baggage(otel_free):
    from opsight import propagation

    otel_free.setenv("OTEL_PROPAGATORS", "tracecontext,baggage,b3,b3multi")
    incoming = {"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
                "baggage": "tenant=ml,region=eu"}
    with opsight.profile():
        with opsight.span("GET /predict", **{"span.kind": "server"}):
            with propagation.continue_trace(incoming):
                with opsight.span("POST /backend", **{"span.kind": "client"}):
                    sent = propagation.inject({})
    trace_id, span_id, flags = sent["traceparent"].split("-")[1:]
    assert trace_id == "4bf92f3577b34da6a3ce929d0e0e4736" and flags == "01"
    assert sent["b3"] == f"{trace_id}-{span_id}-1"
    assert (sent["X-B3-TraceId"], sent["X-B3-SpanId"], sent["X-B3-Sampled"]) == (
        trace_id, span_id, "1")
    assert sent["baggage"] == "tenant=ml,region=eu"
    otel_free.setenv("OTEL_PROPAGATORS", "b3")
    with opsight.profile():
        with opsight.span("call"):
            only_b3 = propagation.inject({})
    assert set(only_b3) == {"b3"}


# ---- OTEL_TRACES_SAMPLER ----------------------------------------------------------------

SAMPLED_PROGRAM = """
import opsight
for i in range(100):
    with opsight.span("unit"):
        with opsight.span("inside"):
            pass
"""


@pytest.mark.parametrize("environment, units", [
    ({}, 100),
    ({"OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0.1"}, 10),
    ({"OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0.25"}, 25),
    ({"OTEL_TRACES_SAMPLER": "parentbased_always_on"}, 100),
    ({"OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0.1",
      "OPSIGHT_SAMPLE": "0.5"}, 50),  # opsight's own setting (--sample) wins
    ({"OTEL_TRACES_SAMPLER": "always_off"}, 0),
    ({"OTEL_TRACES_SAMPLER": "parentbased_always_off"}, 0),
    ({"OTEL_TRACES_SAMPLER": "jaeger_remote"}, 100),  # reported, ignored
], ids=["unset", "traceidratio", "parentbased_traceidratio", "parentbased_always_on",
        "OPSIGHT_SAMPLE wins", "always_off", "parentbased_always_off", "jaeger_remote"])
def test_otel_traces_sampler_maps_onto_sampling_by_unit(tmp_path, environment, units):
    script = tmp_path / "sampled.py"
    script.write_text(SAMPLED_PROGRAM)
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("OTEL_", "OPSIGHT_")) or key == "OPSIGHT_HOME"}
    env.update(environment)
    # opsight run passes OPSIGHT_SAMPLE on from its own --sample (it clears the variable).
    sample = ["--sample", env.pop("OPSIGHT_SAMPLE")] if "OPSIGHT_SAMPLE" in env else []
    output = tmp_path / "sampled.opsight"
    done = subprocess.run([sys.executable, "-m", "opsight", "run", "--no-store", "--report",
                           "none", "-o", str(output), *sample, "--", sys.executable, str(script)],
                          capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    names = opsight.load(output).trace.slice_columns()["name"]
    assert (names.count("unit"), names.count("inside")) == (units, units), done.stderr
    if environment.get("OTEL_TRACES_SAMPLER") == "jaeger_remote":
        assert "ignoring OTEL_TRACES_SAMPLER='jaeger_remote'" in done.stderr


# ---- the exit bound ---------------------------------------------------------------------

def _dead_url() -> str:
    import socket

    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{probe.getsockname()[1]}"


def test_the_exit_bound_of_opsight_run_is_export_timeout(tmp_path):
    """A server that is down: the export gives up after --export-timeout (1 s here; 10 s by
    default), drops and counts every span, and opsight run exits 75."""
    start = time.monotonic()
    done, ran = _opsight_run(tmp_path, ["--export-timeout", "1", "--export", f"otlp={_dead_url()}"])
    assert ran and done.returncode == 75, done.stderr
    assert time.monotonic() - start < 8  # 10 s of retries without the option
    assert "3 unsent when the export's time ran out" in done.stderr, done.stderr
    refused, ran = _opsight_run(tmp_path, ["--export-timeout", "0", "--export", "otlp"])
    assert refused.returncode == 64 and not ran, refused.stderr


def test_the_exit_bound_of_an_unchanged_program_is_opsight_export_timeout(tmp_path):
    script = tmp_path / "prog.py"
    script.write_text(PROGRAM)
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("OTEL_", "OPSIGHT_")) or key == "OPSIGHT_HOME"}
    env.update(OPSIGHT_OUTPUT=str(tmp_path / "p.opsight"), OPSIGHT_EXPORT=f"otlp={_dead_url()}",
               OPSIGHT_EXPORT_TIMEOUT="1")
    start = time.monotonic()
    done = subprocess.run([sys.executable, str(script), str(tmp_path / "ran")],
                          capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 0, done.stderr
    assert time.monotonic() - start < 8, done.stderr  # 10 s of retries without the variable
    assert "3 dropped" in done.stderr, done.stderr


def test_loki_pushes_carry_the_tenant_and_basic_authentication(tmp_path, receiver, otel_free):
    import base64

    trace = _trace(tmp_path)
    server = receiver(status=204)
    otel_free.setenv("OPSIGHT_LOKI_TENANT", "team-a")
    otel_free.setenv("OPSIGHT_LOKI_BASIC_AUTH", "ml:from-env")
    report, = trace.export([f"loki={server.url}"], timeout_s=10)
    host = server.url.split("//")[1]
    in_url, = trace.export([f"loki=http://ops:s%40cret@{host}"], timeout_s=10)
    assert report["sent"] == in_url["sent"] == 5, (report, in_url)
    assert "s%40cret" not in in_url["target"] and "ops" not in in_url["target"]
    (first, _), (second, _) = server.requests
    assert first["x-scope-orgid"] == second["x-scope-orgid"] == "team-a"
    assert first["authorization"] == "Basic " + base64.b64encode(b"ml:from-env").decode()
    assert second["authorization"] == "Basic " + base64.b64encode(b"ops:s@cret").decode()


def test_opsight_export_reads_otel_bsp_and_its_flag_wins(tmp_path, receiver):
    _trace(tmp_path)  # run.opsight, 5 spans
    server = receiver()
    env = {key: value for key, value in os.environ.items() if not key.startswith("OTEL_")}
    env["OTEL_BSP_MAX_EXPORT_BATCH_SIZE"] = "2"

    def export(*flags: str) -> dict:
        import json

        done = subprocess.run([sys.executable, "-m", "opsight", "export",
                               str(tmp_path / "run.opsight"), "--to", f"otlp={server.url}",
                               "--format", "json", *flags],
                              capture_output=True, text=True, timeout=60, env=env)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)[0]

    assert export()["requests"] == 3  # 2 + 2 + 1
    assert export("--batch-size", "4")["requests"] == 2
    env["OTEL_BSP_MAX_EXPORT_BATCH_SIZE"] = "two"
    bad = subprocess.run([sys.executable, "-m", "opsight", "export", str(tmp_path / "run.opsight"),
                          "--to", f"otlp={server.url}"], capture_output=True, text=True,
                         timeout=60, env=env)
    assert bad.returncode == 64, bad.stderr
    assert "OTEL_BSP_MAX_EXPORT_BATCH_SIZE 'two'" in bad.stderr, bad.stderr


def test_otlp_metrics_are_a_metrics_request_the_otel_protos_read(tmp_path, receiver, otel_free):
    """otlp-metrics: one ExportMetricsServiceRequest, read with opentelemetry-proto's own
    classes: a cumulative histogram per span name whose count and sum are the trace's, the
    bounds and one more bucket count, the resource's service.name; delta when
    OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE asks, and the METRICS_ headers."""
    require("opentelemetry.proto")
    from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
        ExportMetricsServiceRequest)
    from opentelemetry.proto.metrics.v1.metrics_pb2 import AggregationTemporality

    trace = _trace(tmp_path, spans=7)
    durations = [d / 1e9 for d, name in zip(trace.slice_columns()["dur"],
                                            trace.slice_columns()["name"]) if name == "work"]
    server = receiver()
    report, = trace.export([f"otlp-metrics={server.url}"], service="metrics-test", timeout_s=10)
    assert report["dropped"] == 0, report
    (headers, body), = server.requests
    assert headers["content-type"] == "application/x-protobuf"
    request = ExportMetricsServiceRequest.FromString(body)
    resource, = request.resource_metrics
    assert {kv.key: kv.value.string_value for kv in resource.resource.attributes}[
        "service.name"] == "metrics-test"
    metrics = {metric.name: metric for metric in resource.scope_metrics[0].metrics}
    histogram = metrics["opsight.span.duration"]
    assert histogram.unit == "s"
    assert (histogram.histogram.aggregation_temporality
            == AggregationTemporality.AGGREGATION_TEMPORALITY_CUMULATIVE)
    point, = [p for p in histogram.histogram.data_points
              if p.attributes[0].value.string_value == "work"]
    assert point.count == 7 and sum(point.bucket_counts) == 7
    assert len(point.bucket_counts) == len(point.explicit_bounds) + 1
    assert point.sum == pytest.approx(sum(durations), rel=1e-9, abs=1e-12)
    assert 0 < point.start_time_unix_nano <= point.time_unix_nano
    # Each bucket's exemplar is one of the run's "work" spans, by the ids its spans are sent with.
    span_ids = {span_id for span_id, name in zip(trace.slice_columns()["span_id"],
                                                          trace.slice_columns()["name"])
                if name == "work"}
    assert point.exemplars and len(point.exemplars) <= sum(1 for c in point.bucket_counts if c)
    for exemplar in point.exemplars:
        assert exemplar.span_id.hex() in span_ids and len(exemplar.trace_id) == 16
        assert exemplar.as_double in [pytest.approx(d, abs=1e-9) for d in durations]
    assert metrics["opsight.events.dropped"].sum.is_monotonic

    otel_free.setenv("OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE", "delta")
    otel_free.setenv("OTEL_EXPORTER_OTLP_METRICS_HEADERS", "x-tenant=a")
    trace.export([f"otlp-metrics={server.url}"], timeout_s=10)
    headers, body = server.requests[1]
    assert headers["x-tenant"] == "a"
    request = ExportMetricsServiceRequest.FromString(body)
    histogram = {m.name: m for m in request.resource_metrics[0].scope_metrics[0].metrics}[
        "opsight.span.duration"]
    assert (histogram.histogram.aggregation_temporality
            == AggregationTemporality.AGGREGATION_TEMPORALITY_DELTA)


LIVE_DELTA_PROGRAM = """
import time, opsight
for i in range(5):
    with opsight.span("work"):
        pass
time.sleep(1.0)  # a few export intervals
for i in range(3):
    with opsight.span("work"):
        pass
"""


def test_live_delta_metrics_add_up_to_the_run_without_overlap(tmp_path, receiver, otel_free):
    """--export-live otlp-metrics with OTEL_METRIC_EXPORT_INTERVAL=200 and delta temporality:
    several requests, each DELTA, each interval starting where the one before ended; the
    deltas of the "work" histogram add up to the 8 spans (nothing lost, nothing twice)."""
    require("opentelemetry.proto")
    from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
        ExportMetricsServiceRequest)
    from opentelemetry.proto.metrics.v1.metrics_pb2 import AggregationTemporality

    script = tmp_path / "delta.py"
    script.write_text(LIVE_DELTA_PROGRAM)
    server = receiver()
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("OTEL_", "OPSIGHT_")) or key == "OPSIGHT_HOME"}
    env.update(OTEL_METRIC_EXPORT_INTERVAL="200",
               OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE="delta")
    done = subprocess.run(
        [sys.executable, "-m", "opsight", "run", "--no-store", "--report", "none", "-o",
         str(tmp_path / "run.opsight"), "--export-live", "--export",
         f"otlp-metrics={server.url}", "--", sys.executable, str(script)],
        capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    assert len(server.requests) >= 3, done.stderr
    counts, intervals = [], []
    for _, body in server.requests:
        request = ExportMetricsServiceRequest.FromString(body)
        metrics = {m.name: m for m in request.resource_metrics[0].scope_metrics[0].metrics}
        dropped = metrics["opsight.events.dropped"].sum
        assert (dropped.aggregation_temporality
                == AggregationTemporality.AGGREGATION_TEMPORALITY_DELTA)
        point, = dropped.data_points
        intervals.append((point.start_time_unix_nano, point.time_unix_nano))
        if "opsight.span.duration" in metrics:
            histogram = metrics["opsight.span.duration"].histogram
            assert (histogram.aggregation_temporality
                    == AggregationTemporality.AGGREGATION_TEMPORALITY_DELTA)
            counts += [p.count for p in histogram.data_points
                       if p.attributes[0].value.string_value == "work"]
    assert sum(counts) == 8 and len(counts) >= 2, counts  # some while it ran
    for (_, end), (start, _) in zip(intervals, intervals[1:]):
        assert start == end  # each interval starts where the one before ended
    sent = re.findall(r"exported (\d+) of (\d+) data points", done.stderr)
    assert len(sent) == 1 and sent[0][0] == sent[0][1], done.stderr
