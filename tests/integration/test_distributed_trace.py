"""One request's trace across three REAL processes, queried back from a REAL Jaeger.

A client process (``requests``) calls service A (FastAPI under uvicorn), which calls
service B (Flask under waitress) with ``httpx``. No program imports opsight or adds a line
for it: the client runs under ``opsight run --export otlp=...``, the two services with
``OPSIGHT_OUTPUT`` and ``OPSIGHT_EXPORT`` (each exports its own trace when it stops) or
under ``opsight run --export-live`` (their spans reach Jaeger while they serve), and
the automatic HTTP integration (``opsight.integrations``) makes the client and server spans
and carries ``traceparent`` between them. Jaeger (tests/integration/real_servers.py) must
then hold ONE trace, the client's, with spans from three services whose parentage is
client call -> A's server span -> A's call -> B's server span, by span id, each inside its
parent in time, with the HTTP attributes of OpenTelemetry's semantic conventions.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from real_servers import (attributes_dict, free_ports, get_json, jaeger_server,  # noqa: F401
                          otlp_spans, port_open, require_modules)


SERVICE_B = textwrap.dedent("""
    import sys
    from flask import Flask, request
    from waitress import serve

    app = Flask("service_b")

    @app.get("/score/<int:user>")
    def score(user):
        return {"user": user, "score": 0.75, "traceparent": request.headers.get("traceparent")}

    try:
        serve(app, host="127.0.0.1", port=int(sys.argv[1]), threads=2, _quiet=True)
    except KeyboardInterrupt:
        pass
""")

SERVICE_A = textwrap.dedent("""
    import sys
    import httpx
    import uvicorn
    from fastapi import FastAPI, Request

    app = FastAPI()
    B = sys.argv[2]

    @app.get("/recommend/{user}")
    async def recommend(user: int, request: Request):
        async with httpx.AsyncClient() as client:
            scored = (await client.get(f"http://{B}/score/{user}")).json()
        return {"traceparent": request.headers.get("traceparent"), "b": scored}

    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
""")

CLIENT = textwrap.dedent("""
    import json, sys
    import requests

    print(json.dumps(requests.get(f"http://{sys.argv[1]}/recommend/42", timeout=30).json()))
""")


def _environment() -> dict[str, str]:
    return {key: value for key, value in os.environ.items()
            if not key.startswith(("OPSIGHT_", "OTEL_")) or key == "OPSIGHT_HOME"}


def _opsight_run(tmp_path: Path, name: str, *options: str) -> list[str]:
    return [sys.executable, "-m", "opsight", "run", "--no-store", "--report", "none",
            "-o", str(tmp_path / f"{name}.opsight"), "--service", name, *options, "--"]


def _start_service(tmp_path: Path, name: str, source: str, arguments: list[str],
                   jaeger_endpoint: str, live: bool) -> subprocess.Popen:
    """The service, unchanged: exporting its trace when it stops (``OPSIGHT_OUTPUT`` and
    ``OPSIGHT_EXPORT``), or each span while it runs (``opsight run --export-live``)."""
    script = tmp_path / f"{name}.py"
    script.write_text(source)
    environment = _environment()
    command = [sys.executable, str(script), *arguments]
    if live:
        command = _opsight_run(tmp_path, name, "--export-live", "--export",
                               f"otlp={jaeger_endpoint}") + command
    else:
        environment.update(OPSIGHT_OUTPUT=str(tmp_path / f"{name}.%p.opsight"),
                           OPSIGHT_EXPORT=f"otlp={jaeger_endpoint}", OTEL_SERVICE_NAME=name)
    log = open(tmp_path / f"{name}.log", "wb")
    # A session of its own: Ctrl-C goes to its whole process group, as from a terminal. And
    # SIGINT's default action, as a terminal gives it: a test run started in the background
    # by a non-interactive shell has SIGINT ignored, which children would inherit (Python
    # then installs no KeyboardInterrupt handler and the servers would never stop).
    return subprocess.Popen(command, cwd=tmp_path, env=environment, stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True,
                            preexec_fn=_default_sigint)


def _default_sigint() -> None:  # runs in the child between fork and exec
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _wait_listening(process: subprocess.Popen, port: int, log: Path, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not port_open(port):
        if process.poll() is not None or time.monotonic() > deadline:
            pytest.fail(f"{log.stem} did not start listening on {port}:\n"
                        f"{log.read_text(errors='replace')[-3000:]}")
        time.sleep(0.05)


def _stop(process: subprocess.Popen, log: Path) -> str:
    """Ctrl-C to the service's process group, as a user stops a server: it shuts down, and
    opsight writes (and exports) its trace at exit. Returns the log."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGINT)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            pytest.fail(f"{log.stem} did not stop on SIGINT:\n{log.read_text(errors='replace')}")
    return log.read_text(errors="replace")


def _by_id(spans: list[dict]) -> dict[str, dict]:
    return {span["spanId"]: span for span in spans}


#: How long a server may go on after its response has left: the caller's span can end
#: first (uvicorn has written the response before the application's coroutine returns;
#: waitress closes the body after writing it). Measured at 0.1 to 2 ms on a busy 2-core VM.
SERVER_TAIL_NS = 50_000_000


def _times(span: dict) -> tuple[int, int]:
    return int(span["startTimeUnixNano"]), int(span["endTimeUnixNano"])


def _inside(child: dict, parent: dict, tail_ns: int = 0) -> bool:
    """``child`` begins after ``parent`` begins and ends before it ends (give or take
    ``tail_ns`` at the end, for a server span under its remote caller)."""
    (child_start, child_end), (parent_start, parent_end) = _times(child), _times(parent)
    return parent_start <= child_start and child_end <= parent_end + tail_ns


@pytest.mark.parametrize("export", ["at exit", "live"])
def test_a_request_through_two_services_is_one_trace_in_jaeger(tmp_path, jaeger_server, export):
    require_modules("fastapi", "uvicorn", "httpx", "flask", "waitress", "requests")
    live = export == "live"
    # Names of their own per variant: the two share one Jaeger.
    name_a, name_b, name_client = (f"{name}-{'live' if live else 'at-exit'}"
                                   for name in ("service-a", "service-b", "client"))
    endpoint = jaeger_server.otlp_http_endpoint
    port_a, port_b = free_ports(2)
    service_b = _start_service(tmp_path, name_b, SERVICE_B, [str(port_b)], endpoint, live)
    service_a = _start_service(tmp_path, name_a, SERVICE_A,
                               [str(port_a), f"127.0.0.1:{port_b}"], endpoint, live)
    try:
        _wait_listening(service_b, port_b, tmp_path / f"{name_b}.log")
        _wait_listening(service_a, port_a, tmp_path / f"{name_a}.log")
        (tmp_path / "client.py").write_text(CLIENT)
        client = subprocess.run(
            _opsight_run(tmp_path, name_client, "--export", f"otlp={endpoint}")
            + [sys.executable, str(tmp_path / "client.py"), f"127.0.0.1:{port_a}"],
            cwd=tmp_path, env=_environment(), capture_output=True, text=True, timeout=120)
        assert client.returncode == 0, client.stderr
        answer = json.loads(client.stdout.strip().splitlines()[-1])
        trace_id = answer["traceparent"].split("-")[1]
        if live:  # the services' spans reach Jaeger while they still serve
            jaeger_server.get_trace(trace_id, min_spans=4, timeout=30)
            assert service_a.poll() is None and service_b.poll() is None
    finally:
        log_a = _stop(service_a, tmp_path / f"{name_a}.log")
        log_b = _stop(service_b, tmp_path / f"{name_b}.log")
    for log in (client.stderr, log_a, log_b):
        assert "exported" in log and "dropped" not in log, log

    # The traceparent each service received names the caller's span in the client's trace.
    _, trace_id, client_call_id, flags = answer["traceparent"].split("-")
    _, b_trace_id, a_call_id, _ = answer["b"]["traceparent"].split("-")
    assert b_trace_id == trace_id and flags == "01"

    spans = otlp_spans(jaeger_server.get_trace(trace_id, min_spans=4, timeout=30))
    assert {span["traceId"] for span in spans} == {trace_id}  # one trace
    by_id = _by_id(spans)
    services = {span["resource"]["service.name"] for span in spans}
    assert services == {name_client, name_a, name_b}
    assert len({span["resource"]["process.pid"] for span in spans}) == 3

    client_call = by_id[client_call_id]
    a_server = next(span for span in spans if span.get("parentSpanId") == client_call_id)
    a_call = by_id[a_call_id]
    b_server = next(span for span in spans if span.get("parentSpanId") == a_call_id)
    # SPAN_KIND in OTLP JSON: 2 server, 3 client.
    assert (client_call["resource"]["service.name"], client_call["kind"]) == (name_client, 3)
    assert (a_server["resource"]["service.name"], a_server["kind"]) == (name_a, 2)
    assert (a_call["resource"]["service.name"], a_call["kind"]) == (name_a, 3)
    assert (b_server["resource"]["service.name"], b_server["kind"]) == (name_b, 2)
    assert "parentSpanId" not in client_call or not client_call["parentSpanId"]  # the root
    assert a_call["parentSpanId"] == a_server["spanId"]
    # Durations nest: in one process exactly; across processes each server span begins
    # after its caller's span began (the request left after it), and ends no later than the
    # caller's end plus the server's tail.
    assert _inside(a_call, a_server), (_times(a_call), _times(a_server))
    assert _inside(a_server, client_call, SERVER_TAIL_NS), (_times(a_server), _times(client_call))
    assert _inside(b_server, a_call, SERVER_TAIL_NS), (_times(b_server), _times(a_call))
    assert _times(b_server)[0] >= _times(a_call)[0] > _times(a_server)[0] > _times(client_call)[0]

    assert client_call["name"] == f"GET 127.0.0.1:{port_a}"
    assert a_server["name"] == "GET /recommend/{user}"
    assert a_call["name"] == f"GET 127.0.0.1:{port_b}"
    assert b_server["name"] == "GET /score/<int:user>"
    attributes = {name: attributes_dict(span["attributes"]) for name, span in
                  (("client", client_call), ("a", a_server), ("a call", a_call),
                   ("b", b_server))}
    assert attributes["client"]["url.full"] == f"http://127.0.0.1:{port_a}/recommend/42"
    assert attributes["a call"]["url.full"] == f"http://127.0.0.1:{port_b}/score/42"
    for key in ("client", "a call"):
        assert attributes[key]["http.request.method"] == "GET"
        assert attributes[key]["server.address"] == "127.0.0.1"
        assert attributes[key]["http.response.status_code"] == 200
    assert attributes["client"]["server.port"] == port_a
    assert attributes["a call"]["server.port"] == port_b
    for key, route, path, port in (("a", "/recommend/{user}", "/recommend/42", port_a),
                                   ("b", "/score/<int:user>", "/score/42", port_b)):
        server = attributes[key]
        assert server["http.request.method"] == "GET" and server["http.route"] == route
        assert server["url.path"] == path and server["url.scheme"] == "http"
        assert server["server.address"] == "127.0.0.1" and server["server.port"] == port
        assert server["client.address"] == "127.0.0.1"
        assert server["network.protocol.version"] == "1.1"
        assert server["http.response.status_code"] == 200
        assert server["user_agent.original"]
    assert "python-requests" in attributes["a"]["user_agent.original"]
    assert "python-httpx" in attributes["b"]["user_agent.original"]
    assert all(span.get("status", {}).get("code", 0) != 2 for span in spans)

    # Every HTTP span the services sent is in this one trace, none in a trace of its own.
    for service in (name_a, name_b):
        found = get_json(f"{jaeger_server.query_url}/api/traces?service={service}&limit=20")
        assert [trace["traceID"] for trace in found["data"]] == [trace_id], service
