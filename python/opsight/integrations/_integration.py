"""HTTP in every recording session, without the program asking (registered by
``opsight/__init__`` through ``opsight._session.integrations``).

When a session starts (``opsight run``, ``OPSIGHT_OUTPUT``, ``opsight.profile``), and for
each library as soon as the program imports it if it has not yet:

* ``requests`` and ``httpx`` calls become client spans that send ``traceparent``
  (``opsight.integrations.http_clients``);
* FastAPI and Starlette applications (``Starlette.__call__``, which FastAPI's calls) and
  Flask applications (``Flask.__call__``) get a server span per request, as if
  ``opsight.integrations.asgi.OpsightMiddleware`` / ``wsgi.OpsightMiddleware`` wrapped them.

When the session stops, every method is given back (a client the program instrumented
itself stays instrumented). ``OPSIGHT_HTTP`` chooses: ``on`` (the default: both), ``clients``,
``servers`` or ``off``. Nothing is imported on the program's behalf.
"""

from __future__ import annotations

import functools
import os
import sys
import types
from typing import Any, Callable

from .._capture.import_hook import ImportHook
from .._session import integrations, state

#: The environment variable that chooses what is instrumented.
MODE_VARIABLE = "OPSIGHT_HTTP"

#: The attribute on each patched server method that holds the method it replaced.
ORIGINAL = "__opsight_http_original__"

# Module whose import completes a library -> what to do then.
_CLIENT_MODULES = {"requests": "requests", "httpx": "httpx", "httpx2": "httpx2"}
_SERVER_MODULES = {"starlette.applications": "starlette", "flask.app": "flask"}


def http_mode() -> str:
    """OPSIGHT_HTTP, normalised: on, clients, servers or off."""
    text = os.environ.get(MODE_VARIABLE, "on").strip().lower() or "on"
    if text in {"0", "off", "false", "no", "none"}:
        return "off"
    if text in {"1", "on", "true", "yes"}:
        return "on"
    if text not in {"clients", "servers"}:
        print(f"opsight: ignoring {MODE_VARIABLE}={os.environ[MODE_VARIABLE]!r} (expected on, "
              "clients, servers or off)", file=sys.stderr)
        return "on"
    return text


# ---- servers -----------------------------------------------------------------------------------

def _asgi_call(original: Callable) -> Callable:
    """Starlette.__call__ serving each HTTP request inside a server span."""
    from . import _http, asgi

    @functools.wraps(original)
    async def __call__(self: Any, scope: dict, receive: Any, send: Any) -> None:
        if scope.get("type") != "http" or asgi.SCOPE_KEY in scope or not _http.active():
            await original(self, scope, receive, send)
            return
        await asgi.serve(functools.partial(original, self), self, scope, receive, send)

    setattr(__call__, ORIGINAL, original)
    return __call__


def _wsgi_call(original: Callable) -> Callable:
    """Flask.__call__ serving each request inside a server span."""
    from . import _http, wsgi

    @functools.wraps(original)
    def __call__(self: Any, environ: dict, start_response: Callable) -> Any:
        if wsgi.ENVIRON_KEY in environ or not _http.active():
            return original(self, environ, start_response)
        return wsgi.serve(functools.partial(original, self), self, environ, start_response)

    setattr(__call__, ORIGINAL, original)
    return __call__


# library -> (module, class, attribute, wrapper factory)
_SERVER_HOOKS: dict[str, tuple[str, str, str, Callable[[Callable], Callable]]] = {
    "starlette": ("starlette.applications", "Starlette", "__call__", _asgi_call),
    "flask": ("flask.app", "Flask", "__call__", _wsgi_call),
}


def _patch_server(library: str) -> bool:
    module_name, class_name, attribute, make = _SERVER_HOOKS[library]
    owner = getattr(sys.modules.get(module_name), class_name, None)
    current = owner.__dict__.get(attribute) if isinstance(owner, type) else None
    if current is None:
        return False
    if not hasattr(current, ORIGINAL):
        setattr(owner, attribute, make(current))
    return True


def _unpatch_server(library: str) -> None:
    module_name, class_name, attribute, _ = _SERVER_HOOKS[library]
    owner = getattr(sys.modules.get(module_name), class_name, None)
    current = owner.__dict__.get(attribute) if isinstance(owner, type) else None
    original = getattr(current, ORIGINAL, None)
    if original is not None:
        setattr(owner, attribute, original)


# ---- the integration -----------------------------------------------------------------------------

class HttpIntegration(integrations.Integration):
    """Instruments the HTTP clients and servers while a session runs (see the module's
    documentation)."""

    name = "opsight.integrations.http"

    def __init__(self) -> None:
        self._watcher: Any = None
        self._clients: set[str] = set()   # clients this integration instrumented
        self._servers: set[str] = set()   # servers this integration patched
        self._wanted: dict[str, tuple[str, str]] = {}  # module -> (kind, library)

    def on_start(self) -> None:
        mode = http_mode()
        if mode == "off":
            return
        self._wanted = {}
        if mode in ("on", "clients"):
            self._wanted.update({module: ("client", library)
                                 for module, library in _CLIENT_MODULES.items()})
        if mode in ("on", "servers"):
            self._wanted.update({module: ("server", library)
                                 for module, library in _SERVER_MODULES.items()})
        waiting = False
        for module_name, (kind, library) in self._wanted.items():
            if module_name in sys.modules:
                self._apply(kind, library)
            else:
                waiting = True
        if waiting and self._watcher is None:
            self._watcher = ImportHook(self._wanted.__contains__, self._imported)
            sys.meta_path.insert(0, self._watcher)

    def on_stop(self) -> None:
        if self._watcher is not None:
            if self._watcher in sys.meta_path:
                sys.meta_path.remove(self._watcher)
            self._watcher = None
        if self._clients:
            from . import http_clients

            for client in self._clients:
                if client not in http_clients._explicit:
                    http_clients._uninstall(client)
            self._clients.clear()
        for library in self._servers:
            _unpatch_server(library)
        self._servers.clear()

    def _apply(self, kind: str, library: str) -> None:
        if kind == "client":
            from . import http_clients

            if http_clients._install(library, import_modules=False):
                self._clients.add(library)
        elif _patch_server(library):
            self._servers.add(library)

    def _imported(self, module: types.ModuleType) -> None:
        wanted = self._wanted.get(module.__name__)
        if wanted is not None and state.session is not None:
            integrations.call(self, "_apply", *wanted)
