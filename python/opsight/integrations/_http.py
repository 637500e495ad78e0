"""What the HTTP server middleware and the client hooks share: whether a span would be
recorded, span names (bounded in number), the attributes of OpenTelemetry's HTTP semantic
conventions, and the error rules (docs/export.md, *Traces across processes*).

Only the standard library is imported here.
"""

from __future__ import annotations

import threading
import urllib.parse
from typing import Any

import opsight._native as _native
from .._capture.wrapping import name_id

#: The category of every HTTP span (server and client).
CATEGORY = "http"

#: Span names made from a request's path (no route known) or a client's address are
#: interned for the life of the process: past this many, the name is the method alone
#: (the attributes still hold the path), so a server with ids in its paths cannot grow
#: the name table without bound.
MAX_DYNAMIC_NAMES = 1000

_lock = threading.Lock()
_dynamic_names: dict[str, int] = {}


class RouteCache:
    """Route templates already matched, by whatever identifies a request's route (the
    application, method, path, host): most requests repeat a path, and matching again costs
    microseconds. Bounded: emptied when full. Thread-safe under the GIL."""

    __slots__ = ("_entries", "_size")

    def __init__(self, size: int = 1024) -> None:
        self._entries: dict[Any, str | None] = {}
        self._size = size

    def get(self, key: Any, match: Any) -> str | None:
        """The cached template for ``key``, else ``match()``'s (then kept)."""
        try:
            return self._entries[key]
        except KeyError:
            pass
        found = match()
        if len(self._entries) >= self._size:
            self._entries.clear()
        self._entries[key] = found
        return found


def active() -> bool:
    """Whether a span begun now would be recorded: a session records and Python tracing
    is on (``opsight.disable()`` turns it off)."""
    return _native.recording() and _native.tracing_enabled()


def span_name_id(name: str, bounded: bool, fallback: str) -> int:
    """The recorder's id for ``name``. ``bounded``: the name comes from a finite set (a
    route template, a method); else it counts towards MAX_DYNAMIC_NAMES, beyond which
    ``fallback`` is used."""
    if bounded:
        return name_id(name, CATEGORY)
    found = _dynamic_names.get(name)
    if found is not None:
        return found
    with _lock:
        if len(_dynamic_names) >= MAX_DYNAMIC_NAMES:
            return name_id(fallback, CATEGORY)
        found = _dynamic_names[name] = name_id(name, CATEGORY)
    return found


def server_span_name_id(method: str, route: str | None, path: str) -> int:
    """``METHOD route`` when the framework's route is known, else ``METHOD path``."""
    if route:
        return span_name_id(f"{method} {route}", True, method)
    return span_name_id(f"{method} {path}", False, method)


def exception_type_name(exception_type: type) -> str:
    """``ValueError``, ``requests.exceptions.ConnectionError``: as opsight.span records it."""
    module = getattr(exception_type, "__module__", "builtins")
    qualname = getattr(exception_type, "__qualname__", exception_type.__name__)
    return qualname if module == "builtins" else f"{module}.{qualname}"


def record_exception(error: BaseException) -> None:
    """``exception.type`` and ``exception.message`` on the innermost open span: its error
    status and exception event in every exporter."""
    _native.add_arg("exception.type", exception_type_name(type(error)))
    _native.add_arg("exception.message", str(error)[:4096])


def record_status(status: int | None, *, client: bool) -> None:
    """``http.response.status_code``, and ``error.type`` (the code, which makes the span's
    status an error) for 5xx on a server span and for 4xx and 5xx on a client span, as the
    semantic conventions ask."""
    if status is None:
        return
    _native.add_arg("http.response.status_code", status)
    if status >= 500 or (client and status >= 400):
        _native.add_arg("error.type", str(status))


def add_attributes(attributes: list[tuple[str, Any]]) -> None:
    for key, value in attributes:
        if value is not None and value != "":
            _native.add_arg(key, value)


def split_host(host: str) -> tuple[str, int | None]:
    """``"example.com:8080"`` -> ("example.com", 8080); ``"[::1]:80"`` -> ("::1", 80)."""
    host = host.strip()
    if host.startswith("["):
        end = host.find("]")
        if end > 0:
            address, rest = host[1:end], host[end + 1:]
            port = rest[1:] if rest.startswith(":") else ""
            return address, int(port) if port.isdigit() else None
    address, colon, port = host.rpartition(":")
    if colon and port.isdigit() and ":" not in address:
        return address, int(port)
    return host, None


DEFAULT_PORTS = {"http": 80, "https": 443, "ws": 80, "wss": 443}


def server_attributes(method: str, path: str, scheme: str, route: str | None,
                      address: Any, port: Any, client_address: Any, user_agent: Any,
                      protocol_version: Any) -> list[tuple[str, Any]]:
    """A server span's attributes by the HTTP semantic conventions (ASGI and WSGI alike)."""
    return [
        ("span.kind", "server"),
        ("http.request.method", method),
        ("url.path", path),
        ("url.scheme", scheme),
        ("http.route", route),
        ("server.address", address),
        ("server.port", port),
        ("client.address", client_address),
        ("user_agent.original", user_agent),
        ("network.protocol.version", protocol_version),
    ]


def redact_url(url: str) -> str:
    """``url.full`` as the conventions ask: a user name and password are replaced by
    ``REDACTED``."""
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return url
    return _redacted(url, parts)


def _redacted(url: str, parts: urllib.parse.SplitResult) -> str:
    if "@" not in parts.netloc:
        return url
    host = parts.netloc.rpartition("@")[2]
    return urllib.parse.urlunsplit(parts._replace(netloc="REDACTED:REDACTED@" + host))


def client_attributes(method: str, url: str) -> tuple[int, list[tuple[str, Any]]]:
    """The name id (``METHOD host:port``) and the attributes of a client span."""
    try:
        parts = urllib.parse.urlsplit(url)
        host = parts.hostname or ""
        port = parts.port or DEFAULT_PORTS.get(parts.scheme)
        full = _redacted(url, parts)
    except ValueError:
        host, port, full = "", None, url
    authority = f"{host}:{port}" if port else host
    name = f"{method} {authority}" if authority else method
    attributes: list[tuple[str, Any]] = [
        ("span.kind", "client"),
        ("http.request.method", method),
        ("url.full", full),
        ("server.address", host),
        ("server.port", port),
    ]
    return span_name_id(name, False, method), attributes
