"""A server span per request of any WSGI application (Flask, Django's WSGI handler, ...),
joined to the caller's trace by its ``traceparent`` header.

::

    from opsight.integrations.wsgi import OpsightMiddleware

    app = Flask(__name__)
    app.wsgi_app = OpsightMiddleware(app.wsgi_app)     # any WSGI app: OpsightMiddleware(app)

While a session records, each request is a span named ``METHOD route`` (Flask's URL rule,
``GET /items/<int:item_id>``; ``METHOD path`` when no rule is known) with
``span.kind=server`` and the attributes of OpenTelemetry's HTTP semantic conventions (as
``opsight.integrations.asgi``). The span begins when the server calls the application and
ends when the server has iterated the response (PEP 3333), so a streamed body is inside
it (the span ends when the body is exhausted, fails or is closed, whichever comes first);
a response made by the server's ``wsgi.file_wrapper`` is handed back untouched (the server
keeps its fast file path) and its span ends when the application returns it. A status of
500 or more marks the span as an error; an exception from the application, or from
iterating its body, is recorded on the span and propagates unchanged, and so is one that
Flask turned into a 500 (its ``got_request_exception`` signal).

Tracing control: ``OpsightMiddleware(app, control_path="/opsight/control")`` also answers
the control routes (as ``opsight.integrations.asgi`` documents), ``requests?count=N``
included.

Without a session the application is called straight through and its iterable returned as
it is. Under ``opsight run`` or ``OPSIGHT_OUTPUT`` Flask applications get this span without
the middleware (see ``opsight.integrations``); adding it as well records one span per
request, not two.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Iterator

import opsight._native as _native
import opsight.propagation as propagation
from . import _http
from ._control_routes import ControlRoutes, _wsgi_path
import opsight._session.live_control as live_control

#: Set in the environ of a request that already has its server span.
ENVIRON_KEY = "opsight.server_span"

__all__ = ["OpsightMiddleware"]


class OpsightMiddleware:
    """WSGI middleware: a server span around each request of ``app`` (see the module's
    documentation). Thread-safety: one instance serves any number of threads."""

    def __init__(self, app: Callable, *, control_path: str | None = None,
                 control_token: str | None = None) -> None:
        self.app = app
        self._control = None if control_path is None else ControlRoutes(control_path,
                                                                         control_token)
        # Flask's URL rules name the spans: ``app.wsgi_app`` is a method of the Flask app.
        owner = getattr(app, "__self__", app)
        self._flask = owner if hasattr(owner, "url_map") and hasattr(owner, "request_class") \
            else None

    def __call__(self, environ: dict, start_response: Callable) -> Iterable[bytes]:
        if self._control is not None and self._control.owns(_wsgi_path(environ)):
            return self._control.serve_wsgi(environ, start_response)
        if ENVIRON_KEY in environ or not _http.active():
            return self.app(environ, start_response)
        return serve(self.app, self._flask, environ, start_response)


def serve(app: Callable, flask_app: Any, environ: dict,
          start_response: Callable) -> Iterable[bytes]:
    """Calls ``app`` for one request inside its server span; the span ends when the
    returned iterable is closed. ``flask_app``: the Flask application whose URL rules name
    the span, or None."""
    environ[ENVIRON_KEY] = None
    method = str(environ.get("REQUEST_METHOD") or "GET")
    path = _path(environ)
    route = None
    if flask_app is not None:
        route = _routes.get(
            (id(flask_app), method, path, environ.get("HTTP_HOST"), environ.get("SCRIPT_NAME"),
             environ.get("wsgi.url_scheme")),
            lambda: flask_route(flask_app, environ))
        _note_flask_exceptions()
    claim = live_control.claim_request()
    if claim == live_control.REFUSED:  # the budget of `requests N` is spent
        return app(environ, start_response)
    caller = propagation.extract(environ)
    if caller is not None:  # with sampling, the caller's sampled flag decides for this request
        _native.decide_next_sampling_unit(caller.sampled)
    if not _native.begin(_http.server_span_name_id(method, route, path)):
        if claim == live_control.COUNTED:
            live_control.release_request()
        return app(environ, start_response)
    exchange = environ[ENVIRON_KEY] = _Exchange(claim == live_control.COUNTED)
    try:
        _http.add_attributes(_request_attributes(environ, method, route, path))
        token = propagation._serve(caller)
        try:
            exchange.served = propagation._current.get()
            body = app(environ, exchange.start_response(start_response))
        finally:
            if token is not None:
                propagation._current.reset(token)
    except BaseException as error:
        exchange.finish(error)
        raise
    file_wrapper = environ.get("wsgi.file_wrapper")
    if isinstance(file_wrapper, type) and isinstance(body, file_wrapper):
        exchange.finish(None)
        return body
    traced = _TracedSizedBody if hasattr(body, "__len__") else _TracedBody
    return traced(body, exchange)


class _Exchange:
    """One request's span while it is open: the status the application sent, an exception
    the framework handled (Flask turns it into a 500), the request's trace context (set
    while the application's code runs: its call, each step of its body, its close; never
    left set while the server has control), and the end (once)."""

    __slots__ = ("status", "error", "served", "finished", "counted")

    def __init__(self, counted: bool) -> None:
        self.counted = counted  # one of a budget of requests: released when it ends
        self.status: int | None = None
        self.error: BaseException | None = None
        self.served: Any = None
        self.finished = False

    def run(self, step: Callable[[], Any]) -> Any:
        """``step()`` with the request's trace context set."""
        token = propagation._current.set(self.served)
        try:
            return step()
        finally:
            propagation._current.reset(token)

    def start_response(self, start_response: Callable) -> Callable:
        def note_status(status: str, headers: list, exc_info: Any = None) -> Any:
            try:
                self.status = int(str(status).split(None, 1)[0])
            except (ValueError, IndexError):
                pass
            if exc_info is None:
                return start_response(status, headers)
            return start_response(status, headers, exc_info)

        return note_status

    def finish(self, error: BaseException | None) -> None:
        """Ends the span, on the thread that began it (the server's, which iterates and
        closes the body there)."""
        if self.finished:
            return
        self.finished = True
        error = error or self.error
        try:
            _http.record_status(self.status, client=False)
            if error is not None:
                _http.record_exception(error)
        finally:
            _native.end()
            if self.counted:
                live_control.release_request()


class _TracedBody:
    """The application's response iterable, passed through; the span ends when it is
    exhausted, fails or is closed, whichever comes first."""

    __slots__ = ("_body", "_iterator", "_exchange")

    def __init__(self, body: Iterable[bytes], exchange: _Exchange) -> None:
        self._body = body
        self._iterator: Iterator[bytes] | None = None
        self._exchange = exchange

    def __iter__(self) -> "_TracedBody":
        if self._iterator is None:
            self._iterator = iter(self._body)
        return self

    def __next__(self) -> bytes:
        if self._iterator is None:
            self._iterator = iter(self._body)
        try:
            return self._exchange.run(self._iterator.__next__)
        except StopIteration:
            self._exchange.finish(None)
            raise
        except BaseException as error:
            self._exchange.finish(error)
            raise

    def close(self) -> None:
        try:
            close = getattr(self._body, "close", None)
            if close is not None:
                self._exchange.run(close)
        except BaseException as error:
            self._exchange.finish(error)
            raise
        self._exchange.finish(None)

    def __getattr__(self, attribute: str) -> Any:  # what a server may look for on the body
        return getattr(self._body, attribute)


class _TracedSizedBody(_TracedBody):
    """A body with a length (a list of chunks): servers use ``len`` to set Content-Length."""

    __slots__ = ()

    def __len__(self) -> int:
        return len(self._body)  # type: ignore[arg-type]


def _decoded(text: str) -> str:
    """A WSGI string (bytes as latin-1) as the UTF-8 text it carries."""
    try:
        return text.encode("latin-1").decode("utf-8")
    except (UnicodeEncodeError, UnicodeDecodeError):
        return text


def _path(environ: dict) -> str:
    return _decoded(str(environ.get("SCRIPT_NAME") or "") + str(environ.get("PATH_INFO") or "")) \
        or "/"


def _request_attributes(environ: dict, method: str, route: str | None,
                        path: str) -> list[tuple[str, Any]]:
    scheme = str(environ.get("wsgi.url_scheme") or "http")
    host = environ.get("HTTP_HOST")
    address: str | None = None
    port: int | None = None
    if host:  # what the client asked for (the conventions' choice), its port or the default
        address, port = _http.split_host(str(host))
        if port is None:
            port = _http.DEFAULT_PORTS.get(scheme)
    else:
        address = environ.get("SERVER_NAME")
        server_port = str(environ.get("SERVER_PORT") or "")
        port = int(server_port) if server_port.isdigit() else _http.DEFAULT_PORTS.get(scheme)
    protocol = str(environ.get("SERVER_PROTOCOL") or "")
    return _http.server_attributes(
        method, path, scheme, route, address, port, environ.get("REMOTE_ADDR"),
        environ.get("HTTP_USER_AGENT"),
        protocol.partition("/")[2] if protocol.upper().startswith("HTTP/") else None)


_routes = _http.RouteCache()


def flask_route(flask_app: Any, environ: dict) -> str | None:
    """The URL rule Flask will dispatch ``environ`` to (``/items/<int:item_id>``), matched
    with the application's own URL adapter; None when nothing matches."""
    try:
        adapter = flask_app.create_url_adapter(flask_app.request_class(environ))
        if adapter is None:
            return None
        rule, _ = adapter.match(return_rule=True)
        return rule.rule
    except Exception:  # noqa: BLE001 - NotFound, MethodNotAllowed, RequestRedirect, ...
        return None


_flask_signal_connected = False


def _note_flask_exceptions() -> None:
    """Connects (once) to Flask's ``got_request_exception``: an exception Flask turns into
    a 500 is recorded on the request's span when it ends."""
    global _flask_signal_connected
    if _flask_signal_connected:
        return
    _flask_signal_connected = True
    try:
        from flask import signals

        signals.got_request_exception.connect(_flask_exception, weak=False)
    except Exception:  # noqa: BLE001 - without it, the 500 alone marks the error
        pass


def _flask_exception(sender: Any, exception: BaseException | None = None, **extra: Any) -> None:
    try:
        from flask import request

        exchange = request.environ.get(ENVIRON_KEY)
    except Exception:  # noqa: BLE001 - outside a request
        return
    if isinstance(exchange, _Exchange) and exchange.error is None:
        exchange.error = exception
