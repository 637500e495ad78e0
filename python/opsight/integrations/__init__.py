"""HTTP servers and clients in opsight's traces, with W3C trace context across processes, so
that one request's spans in a client and the services it calls are one trace in Jaeger or
any OpenTelemetry back-end (docs/export.md, *Traces across processes*).

* ``opsight.integrations.asgi.OpsightMiddleware``: a server span per request of an ASGI
  application (FastAPI, Starlette, any ASGI app): ``app.add_middleware(OpsightMiddleware)``.
* ``opsight.integrations.wsgi.OpsightMiddleware``: the same for WSGI (Flask:
  ``app.wsgi_app = OpsightMiddleware(app.wsgi_app)``).
* ``opsight.integrations.http_clients``: ``instrument_requests()``, ``instrument_httpx()``,
  ``instrument_http_clients()`` (and ``uninstrument_*``): a client span per call, with the
  ``traceparent`` header.
* ``opsight.integrations.handoffs``: flows from the span that hands work off to the one
  that picks it up (asyncio tasks, thread pools, child processes), while a session records.
* ``opsight.integrations.logs``: the program's ``logging`` records in the trace, each where
  it was logged (the span open there), for the ``otlp-logs`` and ``loki-logs`` exporters;
  ``OPSIGHT_LOGS`` sets the lowest level recorded (INFO) or switches it off.

Under ``opsight run``, ``OPSIGHT_OUTPUT`` or ``opsight.profile()`` none of this is needed:
while a session records, the clients are instrumented and FastAPI, Starlette and Flask
applications get their server spans by themselves (``OPSIGHT_HTTP=off|clients|servers``
narrows it). The middleware is for other frameworks, and for programs that want the spans
whatever starts the session.

This package imports no web framework or client library: each is used only once the
program has imported it.
"""

from __future__ import annotations

from .http_clients import (instrument_http_clients, instrument_httpx, instrument_requests,
                           uninstrument_http_clients, uninstrument_httpx, uninstrument_requests)

__all__ = [
    "instrument_http_clients", "instrument_httpx", "instrument_requests",
    "uninstrument_http_clients", "uninstrument_httpx", "uninstrument_requests",
]
