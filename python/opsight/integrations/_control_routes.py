"""The middleware's own tracing-control routes (``control_path=``): the routes of
``opsight._session.live_control`` served by the application itself, for a server traced
without ``opsight run`` (``opsight.profile()``, ``OPSIGHT_OUTPUT``)."""

from __future__ import annotations

import json
import os
from typing import Any, Callable

import opsight._session.live_control as live_control


class ControlRoutes:
    """The control routes under ``path`` (``/opsight/control``), guarded by ``token``
    (``OPSIGHT_CONTROL_TOKEN`` when not given; without one, loopback clients only)."""

    def __init__(self, path: str, token: str | None) -> None:
        if not path.startswith("/") or path == "/":
            raise ValueError(f"control_path must be a path below / such as /opsight/control, "
                             f"not {path!r}")
        self.path = path.rstrip("/")
        self.token = token if token is not None else (os.environ.get("OPSIGHT_CONTROL_TOKEN")
                                                      or None)

    def owns(self, path: str) -> bool:
        return path == self.path or path.startswith(self.path + "/")

    def answer(self, method: str, path: str, query: str, authorization: str | None,
               client_host: str | None) -> tuple[int, bytes]:
        refused = live_control.authorize(self.token, authorization, client_host)
        status, body = refused or live_control.handle(
            live_control.live_control, method, path[len(self.path):], query)
        return status, json.dumps(body).encode()

    # ---- ASGI -----------------------------------------------------------------------------
    async def serve_asgi(self, scope: dict, send: Callable) -> None:
        authorization = None
        for key, value in scope.get("headers") or ():
            if key == b"authorization":
                authorization = value.decode("latin-1")
        client = scope.get("client")
        query = scope.get("query_string") or b""
        status, body = self.answer(str(scope.get("method") or "GET"), str(scope.get("path")),
                                   query.decode("latin-1"), authorization,
                                   str(client[0]) if client else None)
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json"),
                                (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})

    # ---- WSGI -----------------------------------------------------------------------------
    def serve_wsgi(self, environ: dict, start_response: Callable) -> list[bytes]:
        status, body = self.answer(str(environ.get("REQUEST_METHOD") or "GET"),
                                   _wsgi_path(environ), str(environ.get("QUERY_STRING") or ""),
                                   environ.get("HTTP_AUTHORIZATION"),
                                   environ.get("REMOTE_ADDR"))
        start_response(f"{status} {_REASONS.get(status, 'Error')}",
                       [("Content-Type", "application/json"),
                        ("Content-Length", str(len(body)))])
        return [body]


_REASONS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 403: "Forbidden",
            404: "Not Found"}


def _wsgi_path(environ: dict) -> str:
    raw: Any = environ.get("PATH_INFO") or "/"
    return str(environ.get("SCRIPT_NAME") or "") + str(raw)
