"""What the HTTP integration (opsight.integrations) costs per request, in one process,
without a network: a FastAPI request driven straight through its ASGI interface, a Flask
request through its WSGI interface, and an ``httpx.Client`` call answered by a
``MockTransport``.

    .venv/bin/python benchmarks/python/http_overhead.py [--requests 2000] [--rounds 7]

Three variants of each, timed in rounds whose order is reversed every other round
(benchmarks/python/interleaved.py):

* ``no session``: no recording (the integration installs nothing);
* ``session, OPSIGHT_HTTP=off``: a session records, HTTP is not instrumented (what the
  session itself costs a request);
* ``session, HTTP spans``: a session records with the integration on: a server span (route
  matched, attributes, trace context) or a client span (attributes, ``traceparent``).

Then a minimal ASGI and a minimal WSGI application (one response, nothing else) without and
with ``OpsightMiddleware`` inside a session, where the middleware's own work is most of what
is measured.

Per variant: the median time per request over rounds, and the difference to the previous
line. A benchmark, not a test: nothing is asserted on a time.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))

import opsight  # noqa: E402
from interleaved import run_rounds  # noqa: E402


def fastapi_requests(count: int) -> Callable[[], None]:
    from fastapi import FastAPI

    app = FastAPI()

    @app.get("/items/{item_id}")
    async def item(item_id: int):
        return {"id": item_id}

    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
             "method": "GET", "scheme": "http", "path": "/items/7", "raw_path": b"/items/7",
             "query_string": b"", "root_path": "", "client": ("127.0.0.1", 5000),
             "server": ("127.0.0.1", 8000),
             "headers": [(b"host", b"127.0.0.1:8000"), (b"user-agent", b"bench"),
                         (b"traceparent",
                          b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")]}

    async def receive():
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message):
        pass

    async def many():
        for _ in range(count):
            await app(dict(scope), receive, send)

    return lambda: asyncio.run(many())


def flask_requests(count: int) -> Callable[[], None]:
    from flask import Flask
    from werkzeug.test import EnvironBuilder

    app = Flask("bench")

    @app.get("/items/<int:item_id>")
    def item(item_id):
        return {"id": item_id}

    environ = EnvironBuilder(path="/items/7", headers={
        "traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}).get_environ()

    def start_response(status, headers, exc_info=None):
        pass

    def many():
        for _ in range(count):
            body = app(dict(environ), start_response)
            b"".join(body)
            body.close()

    return many


def httpx_calls(count: int) -> Callable[[], None]:
    import httpx

    client = httpx.Client(transport=httpx.MockTransport(lambda request: httpx.Response(200)))

    def many():
        for _ in range(count):
            client.get("http://backend:9000/score")

    return many


TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def plain_asgi_requests(count: int, wrapped: bool) -> Callable[[], None]:
    """A minimal ASGI app (start, one body message): the middleware's own cost shows."""
    from opsight.integrations.asgi import OpsightMiddleware

    async def app(scope, receive, send):
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})

    served = OpsightMiddleware(app) if wrapped else app
    scope = {"type": "http", "http_version": "1.1", "method": "GET", "scheme": "http",
             "path": "/items/7", "root_path": "", "client": ("127.0.0.1", 5000),
             "server": ("127.0.0.1", 8000),
             "headers": [(b"host", b"127.0.0.1:8000"), (b"user-agent", b"bench"),
                         (b"traceparent", TRACEPARENT.encode())]}

    async def receive():
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message):
        pass

    async def many():
        for _ in range(count):
            await served(dict(scope), receive, send)

    return lambda: asyncio.run(many())


def plain_wsgi_requests(count: int, wrapped: bool) -> Callable[[], None]:
    """A minimal WSGI app (one chunk): the middleware's own cost shows."""
    from opsight.integrations.wsgi import OpsightMiddleware

    def app(environ, start_response):
        start_response("200 OK", [])
        return [b"{}"]

    served = OpsightMiddleware(app) if wrapped else app
    environ = {"REQUEST_METHOD": "GET", "SCRIPT_NAME": "", "PATH_INFO": "/items/7",
               "SERVER_NAME": "127.0.0.1", "SERVER_PORT": "8000", "SERVER_PROTOCOL": "HTTP/1.1",
               "REMOTE_ADDR": "127.0.0.1", "HTTP_HOST": "127.0.0.1:8000",
               "HTTP_USER_AGENT": "bench", "HTTP_TRACEPARENT": TRACEPARENT,
               "wsgi.url_scheme": "http"}

    def start_response(status, headers, exc_info=None):
        pass

    def many():
        for _ in range(count):
            body = served(dict(environ), start_response)
            b"".join(body)
            getattr(body, "close", lambda: None)()

    return many


def variant(work: Callable[[], None], count: int, mode: str | None) -> Callable[[], tuple[int, int]]:
    def run() -> tuple[int, int]:
        if mode is None:
            began = time.perf_counter_ns()
            work()
            elapsed = time.perf_counter_ns() - began
            return elapsed // count, elapsed // count
        os.environ["OPSIGHT_HTTP"] = mode
        with opsight.profile():
            began = time.perf_counter_ns()
            work()
            elapsed = time.perf_counter_ns() - began
        return elapsed // count, elapsed // count
    return run


def report(title: str, results: dict[str, tuple[float, float]]) -> None:
    print(f"\n{title}")
    previous = None
    for name, (per_request, _) in results.items():
        added = "" if previous is None else f"   {per_request - previous:+8.0f} ns"
        print(f"  {name:<28} {per_request / 1000:8.1f} µs{added}")
        previous = per_request


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=7)
    options = parser.parse_args()
    count = options.requests
    print(f"{count} requests per variant and round, {options.rounds} rounds, medians")
    for title, make in (("FastAPI (ASGI) request", fastapi_requests),
                        ("Flask (WSGI) request", flask_requests),
                        ("httpx.Client call", httpx_calls)):
        work = make(count)
        work()  # warm up
        report(title, run_rounds({"no session": variant(work, count, None),
                                  "session, OPSIGHT_HTTP=off": variant(work, count, "off"),
                                  "session, HTTP spans": variant(work, count, "on")},
                                 options.rounds))
    for title, make in (("minimal ASGI app", plain_asgi_requests),
                        ("minimal WSGI app", plain_wsgi_requests)):
        bare, wrapped = make(count, False), make(count, True)
        bare(), wrapped()
        report(title, run_rounds({"no session": variant(bare, count, None),
                                  "session, no middleware": variant(bare, count, "off"),
                                  "session, OpsightMiddleware": variant(wrapped, count, "off")},
                                 options.rounds))


if __name__ == "__main__":
    main()
