"""A client span per HTTP call made with ``requests`` or ``httpx``, whose ``traceparent``
header makes the called service's span its child.

::

    import opsight.integrations.http_clients as http_clients

    http_clients.instrument_http_clients()   # requests and httpx, those that are installed
    http_clients.uninstrument_http_clients()

``instrument_requests()`` wraps ``requests.Session.send`` (so ``requests.get`` and every
session), ``instrument_httpx()`` wraps ``httpx.Client.send`` and ``httpx.AsyncClient.send``
(so ``httpx.get``, ``client.get``, ``client.stream``). While a session records, each call
is a span ``METHOD host:port`` with ``span.kind=client``, ``http.request.method``,
``url.full`` (a user name and password replaced by ``REDACTED``), ``server.address``,
``server.port`` and ``http.response.status_code``; a 4xx or 5xx answer marks it as an error
(``error.type``), as does an exception (recorded, and re-raised unchanged). The outgoing
request gets ``traceparent`` (and ``tracestate``) naming that span
(``opsight.propagation.inject``): a traced server at the other end continues the trace. A
request that already carries a ``traceparent`` of the program's own is sent unchanged.
An ``httpx.AsyncClient`` call is a span on the calling asyncio task's track. A redirect
followed by ``requests`` is a span of its own inside the first; ``httpx`` follows redirects
inside the one span. A streamed response's span ends when its headers have arrived.

Each function is idempotent; ``uninstrument_*`` puts the original methods back (unless
someone replaced them since). When no session records, a wrapped call costs one check and
calls the original: nothing is added to the request. ``opsight run`` and ``OPSIGHT_OUTPUT``
instrument both clients by themselves (see ``opsight.integrations``).
"""

from __future__ import annotations

import functools
import importlib
import sys
from typing import Any, Callable

import opsight._native as _native
import opsight.propagation as propagation
from . import _http

__all__ = [
    "instrument_http_clients", "instrument_httpx", "instrument_requests", "is_instrumented",
    "uninstrument_http_clients", "uninstrument_httpx", "uninstrument_requests",
]

#: The attribute on each wrapper that holds the method it wraps.
ORIGINAL = "__opsight_http_original__"


def _traced_sync_send(original: Callable) -> Callable:
    """``requests.Session.send`` and ``httpx.Client.send``: (self, request, ...)."""

    @functools.wraps(original)
    def send(self: Any, request: Any, *args: Any, **kwargs: Any) -> Any:
        if not _http.active():
            return original(self, request, *args, **kwargs)
        try:
            method = str(request.method or "GET")
            name_id, attributes = _http.client_attributes(method, str(request.url))
        except Exception:  # noqa: BLE001 - not a request we can read: untouched
            return original(self, request, *args, **kwargs)
        if not _native.begin(name_id):
            if _native.sampled_out():  # the callee learns the request was sampled out
                _inject(request)
            return original(self, request, *args, **kwargs)
        try:
            _http.add_attributes(attributes)
            _inject(request)
            response = original(self, request, *args, **kwargs)
        except BaseException as error:
            _http.record_exception(error)
            _native.end()
            raise
        try:
            _http.record_status(_status_of(response), client=True)
        finally:
            _native.end()
        return response

    setattr(send, ORIGINAL, original)
    return send


def _traced_async_send(original: Callable) -> Callable:
    """``httpx.AsyncClient.send``: the span is on the calling task's track."""

    @functools.wraps(original)
    async def send(self: Any, request: Any, *args: Any, **kwargs: Any) -> Any:
        if not _http.active():
            return await original(self, request, *args, **kwargs)
        try:
            method = str(request.method or "GET")
            name_id, attributes = _http.client_attributes(method, str(request.url))
        except Exception:  # noqa: BLE001
            return await original(self, request, *args, **kwargs)
        return await _native.TracedAwaitable(
            _async_call(original, self, request, args, kwargs, attributes), name_id)

    setattr(send, ORIGINAL, original)
    return send


async def _async_call(original: Callable, client: Any, request: Any, args: tuple,
                      kwargs: dict, attributes: list) -> Any:
    # Runs inside the span TracedAwaitable began; an exception leaving here is recorded on
    # it by TracedAwaitable, and propagates.
    _http.add_attributes(attributes)
    _inject(request)
    response = await original(client, request, *args, **kwargs)
    _http.record_status(_status_of(response), client=True)
    return response


def _inject(request: Any) -> None:
    """``traceparent`` (or the headers OTEL_PROPAGATORS names) for the callee, unless the
    program set a trace context itself (its headers are sent as they are)."""
    headers = getattr(request, "headers", None)
    if headers is not None and not any(name in headers for name in _CONTEXT_HEADERS):
        propagation.inject(headers)


#: Headers that carry a trace context (requests' and httpx's headers match any case).
_CONTEXT_HEADERS = ("traceparent", "b3", "X-B3-TraceId")


def _status_of(response: Any) -> int | None:
    status = getattr(response, "status_code", None)
    return status if isinstance(status, int) else None


# ---- installing ----------------------------------------------------------------------------------

# (module, class, method, wrapper factory) per client.
_HOOKS: dict[str, list[tuple[str, str, Callable[[Callable], Callable]]]] = {
    "requests": [("requests.sessions", "Session", _traced_sync_send)],
    "httpx": [("httpx", "Client", _traced_sync_send),
              ("httpx", "AsyncClient", _traced_async_send)],
    # httpx2: httpx's successor package (same API), which huggingface_hub requires and
    # Starlette's TestClient prefers when it is installed.
    "httpx2": [("httpx2", "Client", _traced_sync_send),
               ("httpx2", "AsyncClient", _traced_async_send)],
}


def _install(client: str, import_modules: bool = True) -> bool:
    """Wraps ``client``'s send methods (importing it unless ``import_modules`` is False);
    False if it is not importable."""
    for module_name, class_name, make in _HOOKS[client]:
        try:
            module = importlib.import_module(module_name) if import_modules else \
                sys.modules.get(module_name)
        except ImportError:
            return False
        owner = getattr(module, class_name, None) if module is not None else None
        if owner is None:
            return False
        current = owner.__dict__.get("send")
        if current is None or hasattr(current, ORIGINAL):
            continue
        owner.send = make(current)
    return True


def _uninstall(client: str) -> None:
    for module_name, class_name, _ in _HOOKS[client]:
        owner = getattr(sys.modules.get(module_name), class_name, None)
        if owner is None:
            continue
        current = owner.__dict__.get("send")
        original = getattr(current, ORIGINAL, None)
        if original is not None:
            owner.send = original


def is_instrumented(client: str) -> bool:
    """Whether ``"requests"`` or ``"httpx"`` is instrumented now."""
    hooks = _HOOKS[client]
    owners = [getattr(sys.modules.get(module), cls, None) for module, cls, _ in hooks]
    return all(owner is not None and hasattr(owner.__dict__.get("send"), ORIGINAL)
               for owner in owners)


#: Clients the program instrumented itself: a session's end leaves them instrumented.
_explicit: set[str] = set()


def instrument_requests() -> None:
    """Client spans and ``traceparent`` for every ``requests`` call (imports requests)."""
    if not _install("requests"):
        raise ImportError("opsight: instrument_requests: requests cannot be imported")
    _explicit.add("requests")


def uninstrument_requests() -> None:
    _explicit.discard("requests")
    _uninstall("requests")


def instrument_httpx() -> None:
    """Client spans and ``traceparent`` for every ``httpx`` call, sync and async (imports
    httpx)."""
    if not _install("httpx"):
        raise ImportError("opsight: instrument_httpx: httpx cannot be imported")
    _explicit.add("httpx")


def uninstrument_httpx() -> None:
    _explicit.discard("httpx")
    _uninstall("httpx")


def instrument_http_clients() -> list[str]:
    """Instruments whichever of ``requests`` and ``httpx`` can be imported; returns their
    names."""
    done = []
    for client in ("requests", "httpx", "httpx2"):
        if _install(client):
            _explicit.add(client)
            done.append(client)
    return done


def uninstrument_http_clients() -> None:
    uninstrument_requests()
    uninstrument_httpx()
    _explicit.discard("httpx2")
    _uninstall("httpx2")
