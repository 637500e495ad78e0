"""W3C trace context in Python: headers read from every shape servers hand them over in,
a request's span joined to the caller's trace, the id sent to a callee kept by the span
that made the call, and both seen in what the exporter sends (captured by a small HTTP
receiver here; tests/integration proves the same against a real Jaeger)."""

from __future__ import annotations

import http.server
import json
import threading

import opsight
import opsight.propagation as propagation

HEADER = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def test_extract_reads_mappings_asgi_pairs_and_wsgi_environs():
    expected = ("4bf92f3577b34da6a3ce929d0e0e4736", 0x00f067aa0ba902b7, 1)
    for headers in ({"traceparent": HEADER}, {"Traceparent": HEADER},
                    [(b"traceparent", HEADER.encode())], {"HTTP_TRACEPARENT": HEADER}):
        context = propagation.extract(headers)
        assert context is not None, headers
        assert context[:3] == expected
    assert propagation.extract({"traceparent": "00-zz-00f067aa0ba902b7-01"}) is None
    assert propagation.extract({}) is None
    with_state = propagation.extract({"traceparent": HEADER, "tracestate": "vendor=1"})
    assert with_state.tracestate == "vendor=1" and with_state.sampled


def test_without_a_session_inject_adds_nothing():
    assert propagation.current() is None
    assert propagation.inject({}) == {}


class _Receiver(http.server.BaseHTTPRequestHandler):
    bodies: list[bytes] = []

    def do_POST(self):  # noqa: N802 - the handler's name
        length = int(self.headers["Content-Length"])
        _Receiver.bodies.append(self.rfile.read(length))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args):
        pass


def test_a_joined_request_and_an_injected_call_reach_the_exporter():
    server = http.server.HTTPServer(("127.0.0.1", 0), _Receiver)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        with opsight.profile() as profile:
            session_trace = propagation.current()[0]
            with opsight.span("GET /predict", **{"span.kind": "server"}):
                with propagation.continue_trace({"traceparent": HEADER, "tracestate": "v=1"}):
                    assert propagation.current() == ("4bf92f3577b34da6a3ce929d0e0e4736", 1)
                    with opsight.span("POST /backend", **{"span.kind": "client"}):
                        sent = propagation.inject({})
                assert propagation.current() == (session_trace, 1)  # the block ended
            with opsight.span("outside"):
                outside = propagation.inject({})
        reports = profile.trace.export([f"otlp-json=http://127.0.0.1:{server.server_port}"])
    finally:
        server.shutdown()
    assert reports[0]["dropped"] == 0, reports
    assert sent["tracestate"] == "v=1"
    trace_id, call_id, flags = sent["traceparent"].split("-")[1:]
    assert trace_id == "4bf92f3577b34da6a3ce929d0e0e4736" and flags == "01"
    assert outside["traceparent"].split("-")[1] == session_trace
    spans = {}
    for body in _Receiver.bodies:
        for resource in json.loads(body)["resourceSpans"]:
            for scope in resource["scopeSpans"]:
                for span in scope["spans"]:
                    spans[span["name"]] = span
    request, call = spans["GET /predict"], spans["POST /backend"]
    assert request["traceId"] == "4bf92f3577b34da6a3ce929d0e0e4736"
    assert request["parentSpanId"] == "00f067aa0ba902b7"
    assert request["kind"] == 2 and request["flags"] == 0x301
    assert call["traceId"] == request["traceId"] and call["spanId"] == call_id
    assert call["parentSpanId"] == request["spanId"] and call["kind"] == 3
    assert spans["outside"]["traceId"] == session_trace
    assert spans["outside"]["spanId"] == outside["traceparent"].split("-")[2]
