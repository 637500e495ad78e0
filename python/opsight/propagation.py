"""W3C trace context (``traceparent``/``tracestate``) across processes, so that one
request's spans in a client and the services it calls form one trace in Jaeger or any
OpenTelemetry back-end (docs/export.md, *Traces across processes*).

Server side, inside the span begun for an incoming request::

    with opsight.span("GET /predict", **{"span.kind": "server"}):
        with opsight.propagation.continue_trace(request.headers):
            ...   # spans here are in the caller's trace

Client side, inside the span that makes the call::

    with opsight.span("POST /backend", **{"span.kind": "client"}):
        headers = opsight.propagation.inject({})   # adds traceparent (and tracestate)
        requests.post(url, headers=headers)

``opsight.integrations`` does both for ASGI/WSGI servers and the ``requests`` and ``httpx``
clients. Which trace the current request belongs to is kept in a :mod:`contextvars`
variable, so threads and asyncio tasks each see their own. Outside any request the
session's trace id is used (every span of a run not joined to a caller's trace is in it).
"""

from __future__ import annotations

import contextlib
import contextvars
from typing import Any, Iterator, Mapping, MutableMapping, NamedTuple

from . import _native

__all__ = ["TraceContext", "continue_trace", "current", "extract", "inject"]


class TraceContext(NamedTuple):
    """A parsed ``traceparent``: the caller's trace, its span (our parent) and flags."""

    trace_id: str  # 32 lowercase hex digits
    parent_span_id: int
    flags: int  # bit 0: sampled
    tracestate: str = ""

    @property
    def sampled(self) -> bool:
        return bool(self.flags & 1)


# (trace id hex, flags, tracestate) of the request this task or thread is serving.
_current: contextvars.ContextVar[tuple[str, int, str] | None] = contextvars.ContextVar(
    "opsight_trace_context", default=None)


def _header(headers: Any, name: str) -> str | None:
    """``name`` from a mapping, a list of pairs (ASGI: bytes) or a WSGI environ."""
    if headers is None:
        return None
    if isinstance(headers, Mapping):
        for key in (name, name.title(), "HTTP_" + name.upper().replace("-", "_")):
            if key in headers:
                value = headers[key]
                return value.decode("latin-1") if isinstance(value, bytes) else str(value)
        lowered = name.lower()
        for key, value in headers.items():
            if isinstance(key, str) and key.lower() == lowered:
                return value.decode("latin-1") if isinstance(value, bytes) else str(value)
        return None
    lowered = name.lower().encode("latin-1")
    for key, value in headers:  # ASGI scope["headers"]: [(b"name", b"value"), ...]
        key_bytes = key if isinstance(key, bytes) else str(key).encode("latin-1")
        if key_bytes.lower() == lowered:
            return value.decode("latin-1") if isinstance(value, bytes) else str(value)
    return None


def extract(headers: Any) -> TraceContext | None:
    """The caller's context from request headers (a mapping, ASGI header pairs or a WSGI
    environ); None when there is no valid ``traceparent``."""
    value = _header(headers, "traceparent")
    if not value:
        return None
    parsed = _native.parse_traceparent(value)
    if parsed is None:
        return None
    trace_id, parent, flags = parsed
    return TraceContext(trace_id, parent, flags, _header(headers, "tracestate") or "")


@contextlib.contextmanager
def continue_trace(headers_or_context: Any) -> Iterator[TraceContext | None]:
    """Inside a span begun for an incoming request: that span joins the caller's trace (if
    the request carried one), and calls made until the block ends propagate it."""
    context = (headers_or_context if isinstance(headers_or_context, TraceContext)
               else extract(headers_or_context))
    if context is None:
        yield None
        return
    _native.join_remote_trace(
        _native.format_traceparent(context.trace_id, context.parent_span_id, context.flags))
    token = _current.set((context.trace_id, context.flags, context.tracestate))
    try:
        yield context
    finally:
        _current.reset(token)


def current() -> tuple[str, int] | None:
    """(trace id hex, flags) of the request being served here, else the session's trace
    (flags 1); None without a session."""
    served = _current.get()
    if served is not None:
        return served[0], served[1]
    session = _native.session_trace_id()
    return (session, 1) if session else None


def inject(headers: MutableMapping[str, str] | None = None) -> MutableMapping[str, str]:
    """Adds ``traceparent`` (and the served request's ``tracestate``) to ``headers`` for a
    call made inside the current span, which becomes the callee's parent: it is given the
    id the header carries. Returns ``headers`` (a new dict when None); unchanged without a
    session."""
    if headers is None:
        headers = {}
    trace = current()
    if trace is None:
        return headers
    span_id = _native.new_flow_id()
    _native.set_span_id(span_id)
    headers["traceparent"] = _native.format_traceparent(trace[0], span_id, trace[1])
    served = _current.get()
    if served is not None and served[2]:
        headers["tracestate"] = served[2]
    return headers
