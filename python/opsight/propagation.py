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
clients. Which trace the current request belongs to, and which span serves it, is kept in
a :mod:`contextvars` variable, so threads and asyncio tasks each see their own (a thread pool
that copies the context, as ``asyncio.to_thread`` and Starlette's ``run_in_threadpool`` do,
sees the request's). A request that arrives without a ``traceparent`` begins a trace of its
own, as the OpenTelemetry SDK gives every root span a new trace id: N requests are N traces.
Outside any request the session's trace id is used.

Which headers are read and written follows ``OTEL_PROPAGATORS`` (a comma list; default
``tracecontext,baggage``): ``tracecontext`` (W3C ``traceparent``/``tracestate``),
``baggage`` (the W3C ``baggage`` header, passed on unchanged from a served request to its
calls), ``b3`` (Zipkin's single ``b3`` header) and ``b3multi`` (``X-B3-TraceId``,
``X-B3-SpanId``, ``X-B3-Sampled``), or ``none``. A request's context is taken from the first
of them, in the list's order, whose headers it carries; a call carries the headers of each.
An unknown name is reported once on stderr and ignored.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import sys
import threading
from typing import Any, Iterator, Mapping, MutableMapping, NamedTuple

from . import _native

__all__ = ["TraceContext", "continue_trace", "current", "extract", "inject"]


class TraceContext(NamedTuple):
    """A parsed ``traceparent``: the caller's trace, its span (our parent) and flags."""

    trace_id: str  # 32 lowercase hex digits
    parent_span_id: int
    flags: int  # bit 0: sampled
    tracestate: str = ""
    baggage: str = ""  # the W3C baggage header, passed on as it came

    @property
    def sampled(self) -> bool:
        return bool(self.flags & 1)


class _Served(NamedTuple):
    """The request this task or thread is serving: its trace, the span serving it (the
    parent of calls made on another track) and the track that span is on."""

    trace_id: str
    flags: int
    tracestate: str
    span_id: int
    track: tuple[int, int]
    baggage: str = ""


_current: contextvars.ContextVar[_Served | None] = contextvars.ContextVar(
    "opsight_trace_context", default=None)


def _track() -> tuple[int, int]:
    """Which track the calling code records on: (its thread, its asyncio task or 0); the
    spans of a traced coroutine, and those inside it, are on its task's track."""
    asyncio = sys.modules.get("asyncio")
    if asyncio is not None:
        loop = asyncio._get_running_loop()
        if loop is not None:
            task = asyncio.current_task(loop)
            if task is not None:
                return threading.get_ident(), id(task)
    return threading.get_ident(), 0


def _text(value: Any) -> str:
    return value.decode("latin-1") if isinstance(value, bytes) else str(value)


def _header(headers: Any, name: str) -> str | None:
    """``name`` (lowercase) from a mapping, a list of pairs (ASGI: bytes) or a WSGI
    environ."""
    if headers is None:
        return None
    if type(headers) is dict:  # a WSGI environ, or headers keyed in any case
        value = headers.get(name)
        if value is None:
            value = headers.get("HTTP_" + name.upper().replace("-", "_"))
            if value is None and "REQUEST_METHOD" not in headers:  # not an environ
                for key, item in headers.items():
                    if isinstance(key, str) and key.lower() == name:
                        value = item
                        break
        return None if value is None else _text(value)
    if isinstance(headers, Mapping):  # requests', httpx's, Starlette's headers, ...
        for key in (name, name.title(), "HTTP_" + name.upper().replace("-", "_")):
            if key in headers:
                return _text(headers[key])
        for key, value in headers.items():
            if isinstance(key, str) and key.lower() == name:
                return _text(value)
        return None
    wanted = name.encode("latin-1")
    for key, value in headers:  # ASGI scope["headers"]: [(b"name", b"value"), ...], lowercase
        if key == wanted or (key if isinstance(key, bytes)
                             else str(key).encode("latin-1")).lower() == wanted:
            return _text(value)
    return None


#: OTEL_PROPAGATORS's names opsight knows.
PROPAGATORS = ("tracecontext", "baggage", "b3", "b3multi", "none")
_propagators_cache: tuple[str, tuple[str, ...]] | None = None


def propagators() -> tuple[str, ...]:
    """The propagators ``OTEL_PROPAGATORS`` names, in its order (default ``tracecontext``
    and ``baggage``); an unknown name is reported once on stderr and left out."""
    global _propagators_cache
    value = os.environ.get("OTEL_PROPAGATORS", "").strip() or "tracecontext,baggage"
    if _propagators_cache is not None and _propagators_cache[0] == value:
        return _propagators_cache[1]
    names = []
    for name in (item.strip().lower() for item in value.split(",")):
        if name in PROPAGATORS:
            if name != "none" and name not in names:
                names.append(name)
        elif name:
            print(f"opsight: OTEL_PROPAGATORS: unknown propagator '{name}' ignored (known: "
                  f"{', '.join(PROPAGATORS)})", file=sys.stderr)
    _propagators_cache = (value, tuple(names))
    return _propagators_cache[1]


_HEX = set("0123456789abcdef")


def _b3_ids(trace_id: str | None, span_id: str | None) -> tuple[str, int] | None:
    """(32-digit trace id, span id) from B3's hex ids (a 64-bit trace id is left-padded);
    None unless both are valid and not zero."""
    if not trace_id or not span_id:
        return None
    trace_id, span_id = trace_id.strip().lower(), span_id.strip().lower()
    if len(trace_id) not in (16, 32) or len(span_id) != 16 or not set(trace_id + span_id) <= _HEX:
        return None
    trace_id = trace_id.rjust(32, "0")
    if int(trace_id, 16) == 0 or int(span_id, 16) == 0:
        return None
    return trace_id, int(span_id, 16)


def _b3_flags(sampled: str | None) -> int:
    """B3's sampling state: "0" not sampled; "1", "d" (debug) or absent (defer): sampled."""
    return 0 if (sampled or "").strip() in ("0", "false") else 1


def _extract_one(name: str, headers: Any) -> TraceContext | None:
    if name == "tracecontext":
        value = _header(headers, "traceparent")
        parsed = _native.parse_traceparent(value) if value else None
        if parsed is None:
            return None
        trace_id, parent, flags = parsed
        return TraceContext(trace_id, parent, flags, _header(headers, "tracestate") or "")
    if name == "b3":
        value = _header(headers, "b3")
        parts = value.split("-") if value else []
        ids = _b3_ids(parts[0], parts[1]) if len(parts) >= 2 else None
        if ids is None:
            return None
        return TraceContext(ids[0], ids[1], _b3_flags(parts[2] if len(parts) > 2 else None))
    if name == "b3multi":
        ids = _b3_ids(_header(headers, "x-b3-traceid"), _header(headers, "x-b3-spanid"))
        if ids is None:
            return None
        flags = 1 if (_header(headers, "x-b3-flags") or "").strip() == "1" else \
            _b3_flags(_header(headers, "x-b3-sampled"))
        return TraceContext(ids[0], ids[1], flags)
    return None


def extract(headers: Any) -> TraceContext | None:
    """The caller's context from request headers (a mapping, ASGI header pairs or a WSGI
    environ), by the first of ``OTEL_PROPAGATORS`` that finds one (``traceparent`` by
    default); None when none does. The ``baggage`` header comes along when ``baggage`` is
    named."""
    names = propagators()
    for name in names:
        context = _extract_one(name, headers)
        if context is not None:
            if "baggage" in names:
                context = context._replace(baggage=_header(headers, "baggage") or "")
            return context
    return None


def _write_headers(headers: MutableMapping[str, str], trace_id: str, span_id: int, flags: int,
                   tracestate: str = "", baggage: str = "") -> None:
    """The call's context, in the headers of every propagator OTEL_PROPAGATORS names."""
    for name in propagators():
        if name == "tracecontext":
            headers["traceparent"] = _native.format_traceparent(trace_id, span_id, flags)
            if tracestate:
                headers["tracestate"] = tracestate
        elif name == "b3":
            headers["b3"] = f"{trace_id}-{span_id:016x}-{flags & 1}"
        elif name == "b3multi":
            headers["X-B3-TraceId"] = trace_id
            headers["X-B3-SpanId"] = f"{span_id:016x}"
            headers["X-B3-Sampled"] = str(flags & 1)
        elif name == "baggage" and baggage:
            headers["baggage"] = baggage


@contextlib.contextmanager
def continue_trace(headers_or_context: Any) -> Iterator[TraceContext | None]:
    """Inside a span begun for an incoming request: that span joins the caller's trace (if
    the request carried one; else it begins a trace of its own), and calls made until the
    block ends propagate it, with that span as their parent even when they are made on
    another thread or task (a synchronous handler run in a thread pool). Yields the
    caller's context, or None. Without a session it does nothing."""
    context = (headers_or_context if isinstance(headers_or_context, TraceContext)
               else extract(headers_or_context))
    token = _serve(context)
    try:
        yield context
    finally:
        if token is not None:
            _current.reset(token)


def _serve(context: TraceContext | None) -> contextvars.Token | None:
    """continue_trace's work without the ``with``, for the server middleware (a request
    costs microseconds less): the innermost open span joins ``context`` (or, without one,
    begins a new trace as its root) and becomes the request being served. Returns the
    token that ``_current.reset`` takes at the request's end; None when no session records."""
    if not _native.recording():
        return None
    if context is not None:
        _native.join_remote_trace(
            _native.format_traceparent(context.trace_id, context.parent_span_id, context.flags))
        trace_id, flags, tracestate = context.trace_id, context.flags, context.tracestate
        baggage = context.baggage
    else:
        trace_id = _native.begin_trace()
        if not trace_id:
            return None
        flags, tracestate, baggage = 1, "", ""
    span_id = _native.new_flow_id()
    _native.set_span_id(span_id)
    return _current.set(_Served(trace_id, flags, tracestate, span_id, _track(), baggage))


def current() -> tuple[str, int] | None:
    """(trace id hex, flags) of the request being served here, else the session's trace
    (flags 1: the trace a call made here propagates, see :func:`inject`); None without a
    session."""
    served = _current.get()
    if served is not None:
        return served.trace_id, served.flags
    session = _native.session_trace_id()
    return (session, 1) if session else None


def inject(headers: MutableMapping[str, str] | None = None) -> MutableMapping[str, str]:
    """Adds ``traceparent`` (and the served request's ``tracestate``; or the headers of the
    propagators ``OTEL_PROPAGATORS`` names) to ``headers`` for a call made inside the
    current span, which becomes the callee's parent: it is given the id the header carries. If the call is made on another thread or task than the span
    serving the request (a handler run in a thread pool), the current span also joins the
    request's trace, as a child of that span. Inside a unit that sampling left out, the
    header carries the sampled flag off (and no span of ours). Returns ``headers`` (a new
    dict when None); unchanged without a session."""
    if headers is None:
        headers = {}
    served = _current.get()
    if _native.sampled_out():
        # The unit this call is made in was sampled out: the callee is told (the sampled
        # flag off) so that its own spans for this request are left out too.
        trace_id = served.trace_id if served is not None else _native.session_trace_id()
        if trace_id:
            flags = (served.flags if served is not None else 1) & ~1
            _write_headers(headers, trace_id, _native.new_flow_id(), flags)
        return headers
    if served is not None:
        if not _native.recording():
            return headers
        trace_id, flags = served.trace_id, served.flags
        if served.track != _track():
            _native.join_remote_trace(
                _native.format_traceparent(trace_id, served.span_id, flags))
    else:
        # Outside any request served, the root of what is open here stays in the session's
        # trace (else a root span is a trace of its own), so the callee joins the caller's.
        session = _native.join_session_trace()
        if not session:
            return headers
        trace_id, flags = session, 1
    span_id = _native.new_flow_id()
    _native.set_span_id(span_id)
    _write_headers(headers, trace_id, span_id, flags,
                   served.tracestate if served is not None else "",
                   served.baggage if served is not None else "")
    return headers
