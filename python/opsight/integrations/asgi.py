"""A server span per HTTP request of any ASGI application (FastAPI, Starlette, Quart, ...),
joined to the caller's trace by its ``traceparent`` header.

::

    from opsight.integrations.asgi import OpsightMiddleware

    app = FastAPI()
    app.add_middleware(OpsightMiddleware)      # or: app = OpsightMiddleware(app)

While a session records (``opsight run``, ``OPSIGHT_OUTPUT``, ``opsight.profile``), each
HTTP request is a span named ``METHOD route`` (``GET /items/{item_id}``; ``METHOD path``
when the application has no route for it) with ``span.kind=server`` and the attributes of
OpenTelemetry's HTTP semantic conventions: ``http.request.method``, ``url.path``,
``url.scheme``, ``http.route``, ``server.address``, ``server.port``, ``client.address``,
``user_agent.original``, ``network.protocol.version``, ``http.response.status_code``. A
response of 500 or more marks the span as an error (``error.type``); an exception leaving
the application is recorded on the span (``exception.type``, ``exception.message``) and
propagates unchanged. The span begins and ends on the request's asyncio task, on that
task's own track, so concurrent requests never nest into each other; the span covers the
whole response, streamed bodies included.

Tracing control (``control_path="/opsight/control"``): the middleware also answers the
routes of ``opsight._session.live_control`` below that path: ``GET`` for the state,
``POST .../on``, ``.../off``, ``.../window?seconds=T`` and ``.../requests?count=N`` (trace
the next N requests, then switch off), for loopback clients only unless a token is set
(``control_token=`` or ``OPSIGHT_CONTROL_TOKEN``; then ``Authorization: Bearer <token>``).
Under ``opsight run --control-port`` the same routes are served by the run.

Without a session the middleware calls the application straight through. Lifespan and
WebSocket scopes always pass straight through. Under ``opsight run`` or ``OPSIGHT_OUTPUT``
FastAPI and Starlette applications get this span without the middleware (see
``opsight.integrations``); adding it as well records one span per request, not two.
"""

from __future__ import annotations

from typing import Any, Awaitable, Callable

import opsight._native as _native
import opsight.propagation as propagation
from . import _http
from ._control_routes import ControlRoutes
import opsight._session.live_control as live_control

Scope = dict
Receive = Callable[[], Awaitable[dict]]
Send = Callable[[dict], Awaitable[None]]

#: Set in the scope of a request that already has its server span (an application mounted
#: in another, the middleware added twice, or added beside the automatic integration).
SCOPE_KEY = "opsight.server_span"

__all__ = ["OpsightMiddleware"]


class OpsightMiddleware:
    """Pure ASGI middleware: a server span around each HTTP request of ``app`` (see the
    module's documentation). Thread-safety: one instance serves any number of concurrent
    requests."""

    def __init__(self, app: Any, *, control_path: str | None = None,
                 control_token: str | None = None) -> None:
        self.app = app
        self._control = None if control_path is None else ControlRoutes(control_path,
                                                                         control_token)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (self._control is not None and scope.get("type") == "http"
                and self._control.owns(str(scope.get("path") or ""))):
            await self._control.serve_asgi(scope, send)
            return
        if scope.get("type") != "http" or SCOPE_KEY in scope or not _http.active():
            await self.app(scope, receive, send)
            return
        await serve(self.app, _routes_owner(scope, self.app), scope, receive, send)


async def serve(app: Callable, routes_owner: Any, scope: Scope, receive: Receive,
                send: Send) -> None:
    """Runs ``app`` for one HTTP request inside its server span. ``routes_owner``: the
    Starlette application (or router) whose routes name the span, or None."""
    scope[SCOPE_KEY] = True
    method = str(scope.get("method") or "GET")
    path = str(scope.get("path") or "/")
    host = user_agent = None
    for key, value in scope.get("headers") or ():
        if key == b"host":
            host = value.decode("latin-1")
        elif key == b"user-agent":
            user_agent = value.decode("latin-1")
    route = None
    if routes_owner is not None:
        route = _routes.get(
            (id(routes_owner), len(_routes_of(routes_owner) or ()), method,
             scope.get("root_path"), path, host),
            lambda: starlette_route(routes_owner, scope))
    claim = live_control.claim_request()
    if claim == live_control.REFUSED:  # the budget of `requests N` is spent
        await app(scope, receive, send)
        return
    name_id = _http.server_span_name_id(method, route, path)
    caller = propagation.extract(scope.get("headers") or ())
    if caller is not None:  # with sampling, the caller's sampled flag decides for this request
        # (taken by the span's begin at the awaitable's first resume, with no await between)
        _native.decide_next_sampling_unit(caller.sampled)
    # The span begins on the first resume of this awaitable and ends when the request's
    # coroutine returns or raises, on the track of the task running it.
    try:
        await _native.TracedAwaitable(
            _serve(app, scope, receive, send, method, route, path, host, user_agent, caller),
            name_id)
    finally:
        if claim == live_control.COUNTED:
            live_control.release_request()


async def _serve(app: Callable, scope: Scope, receive: Receive, send: Send, method: str,
                 route: str | None, path: str, host: str | None,
                 user_agent: str | None, caller: propagation.TraceContext | None) -> None:
    _http.add_attributes(_request_attributes(scope, method, route, path, host, user_agent))
    status: list[int] = []

    async def send_and_note_status(message: dict) -> None:
        if message.get("type") == "http.response.start":
            status[:] = [message.get("status")]
        await send(message)

    token = propagation._serve(caller)
    try:
        await app(scope, receive, send_and_note_status)
    finally:
        if token is not None:
            propagation._current.reset(token)
        if route is None:
            framework_route = getattr(scope.get("route"), "path", None)
            if isinstance(framework_route, str) and framework_route:
                _native.add_arg("http.route", framework_route)
        code = status[0] if status else None
        _http.record_status(code if isinstance(code, int) else None, client=False)


def _request_attributes(scope: Scope, method: str, route: str | None, path: str,
                        host: str | None, user_agent: str | None) -> list[tuple[str, Any]]:
    scheme = str(scope.get("scheme") or "http")
    address: str | None = None
    port: int | None = None
    server = scope.get("server")
    if host:  # what the client asked for (the conventions' choice), its port or the default
        address, port = _http.split_host(host)
        if port is None:
            port = _http.DEFAULT_PORTS.get(scheme)
    elif server:
        address, port = str(server[0]), server[1] if len(server) > 1 else None
    client = scope.get("client")
    return _http.server_attributes(method, path, scheme, route, address, port,
                                   str(client[0]) if client else None, user_agent,
                                   scope.get("http_version"))


# ---- routes ------------------------------------------------------------------------------------

def _routes_owner(scope: Scope, app: Any) -> Any:
    """The Starlette application whose routes name the request: ``scope["app"]`` (a
    middleware Starlette added), else the wrapped application or one wrapped inside it."""
    owner = scope.get("app")
    if owner is not None and hasattr(owner, "router"):
        return owner
    for _ in range(8):  # middleware conventionally keeps the next application in .app
        if app is None:
            return None
        if hasattr(app, "routes") and hasattr(app, "router"):
            return app
        app = getattr(app, "app", None)
    return None


_routes = _http.RouteCache()


def _routes_of(owner: Any) -> Any:
    return getattr(getattr(owner, "router", owner), "routes", None)


def _match_value(match: Any) -> int:
    return int(getattr(match, "value", 0) or 0)  # starlette.routing.Match: NONE 0, PARTIAL 1, FULL 2


def starlette_route(owner: Any, scope: Scope) -> str | None:
    """The route template Starlette's router will pick for ``scope`` (``/items/{id}``;
    a mount's prefix included), found with the routes' own ``matches``; None when no route
    matches, or ``owner`` has no Starlette routes."""
    try:
        routes = _routes_of(owner)
        if not routes:
            return None
        return _match_routes(routes, scope, "")
    except Exception:  # noqa: BLE001 - naming must never break a request
        return None


def _match_routes(routes: Any, scope: Scope, prefix: str) -> str | None:
    partial: tuple[Any, dict] | None = None
    for route in routes:
        matches = getattr(route, "matches", None)
        if matches is None:
            continue
        match, child_scope = matches(scope)
        value = _match_value(match)
        if value == 2:
            return _template(route, scope, child_scope, prefix)
        if value == 1 and partial is None:
            partial = (route, child_scope)
    if partial is not None:
        return _template(partial[0], scope, partial[1], prefix)
    return None


def _template(route: Any, scope: Scope, child_scope: dict, prefix: str) -> str | None:
    path = getattr(route, "path", "")
    path = path if isinstance(path, str) else ""
    inner_routes = getattr(route, "routes", None)
    if inner_routes:  # a Mount (or Host) of routes: the route inside it
        inner = _match_routes(inner_routes, {**scope, **child_scope}, prefix + path)
        if inner is not None:
            return inner
    if hasattr(route, "routes") and hasattr(route, "path_format"):  # a Mount of any app
        return prefix + path + "/{path:path}"
    return prefix + path or None
