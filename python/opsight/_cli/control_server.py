"""``opsight run --control-port``: switch the tracing of a running program over HTTP, for
platform teams who profile a live inference server for a while and then turn it off.

Routes (JSON in and out):

- ``GET /control``: the state of each process of the run (``on``/``off``) and the
  seconds left in a window;
- ``POST /control/on``, ``POST /control/off``: switch every process of the run;
- ``POST /control/window?seconds=T``: on now, off again after T seconds (a new window
  replaces the previous one).

It goes through the same control files as ``opsight ctl`` (``opsight._session.control``),
so a process started by the run after the request is switched at the next request.

Security: it listens on 127.0.0.1 unless told otherwise. Any other address needs a token:
``OPSIGHT_CONTROL_TOKEN``, or one made up at start and printed on stderr. When a token is
set, every request must carry ``Authorization: Bearer <token>`` or it gets 401. A malformed
request gets 400 or 404 with a message, never a crash.
"""

from __future__ import annotations

import hmac
import http.server
import json
import os
import re
import secrets
import threading
import time
import urllib.parse

from .._session import control as _control

_TRACE_FILE = re.compile(r"^trace\.(\d+)\.opsight$")
_LOOPBACK = ("127.0.0.1", "localhost", "::1")


def parse_address(text: str) -> tuple[str, int] | None:
    """``"9465"``, ``":9465"`` or ``"0.0.0.0:9465"`` -> (host, port); None if malformed."""
    host, _, port = text.rpartition(":")
    host = host.strip("[]") or "127.0.0.1"
    if not port.isdigit() or not 0 <= int(port) <= 65535:
        return None
    return host, int(port)


class ControlServer:
    """The HTTP control endpoint of one ``opsight run``. Thread-safety: start/stop from
    one thread; requests are served on the server's threads (a lock guards the window)."""

    def __init__(self, run_directory: str, host: str, port: int, token: str | None) -> None:
        self.run_directory = run_directory
        self.token = token
        self._lock = threading.Lock()
        self._window_timer: threading.Timer | None = None
        self._window_ends: float | None = None
        server = self
        self._http = http.server.ThreadingHTTPServer((host, port), _handler_for(server))
        self._http.daemon_threads = True
        self.port = self._http.server_address[1]
        self._thread = threading.Thread(target=self._http.serve_forever, daemon=True,
                                        name="opsight-control")

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        with self._lock:
            if self._window_timer is not None:
                self._window_timer.cancel()
        self._http.shutdown()
        self._http.server_close()

    # ---- what the routes do -------------------------------------------------------------
    def pids(self) -> list[int]:
        try:
            names = os.listdir(self.run_directory)
        except OSError:
            return []
        return sorted(int(match.group(1)) for name in names
                      if (match := _TRACE_FILE.match(name)))

    def status(self) -> dict:
        processes = []
        for pid in self.pids():
            try:
                processes.append({"pid": pid, "state": _control.request(pid, "status", 1.0)})
            except RuntimeError as error:
                processes.append({"pid": pid, "state": None, "error": str(error)})
        with self._lock:
            left = (None if self._window_ends is None
                    else max(0.0, round(self._window_ends - time.monotonic(), 3)))
        return {"processes": processes, "window_seconds_left": left}

    def switch(self, state: str) -> dict:
        results = []
        for pid in self.pids():
            try:
                results.append({"pid": pid, "state": _control.request(pid, state, 5.0)})
            except RuntimeError as error:  # a process that ended, or is not traced
                results.append({"pid": pid, "state": None, "error": str(error)})
        return {"processes": results}

    def window(self, seconds: float) -> dict:
        with self._lock:
            if self._window_timer is not None:
                self._window_timer.cancel()
            self._window_timer = threading.Timer(seconds, self._end_window)
            self._window_timer.daemon = True
            self._window_ends = time.monotonic() + seconds
        answer = self.switch("on")
        with self._lock:
            self._window_timer.start()
        answer["window_seconds"] = seconds
        return answer

    def _end_window(self) -> None:
        with self._lock:
            self._window_ends = None
        self.switch("off")


def _handler_for(server: ControlServer):
    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args):  # noqa: D401 - no access log on stderr
            pass

        def _answer(self, status: int, body: dict) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _authorized(self) -> bool:
            if server.token is None:
                return True
            given = self.headers.get("Authorization", "")
            if hmac.compare_digest(given.encode(), f"Bearer {server.token}".encode()):
                return True
            self._answer(401, {"error": "missing or wrong token (Authorization: Bearer <token>)"})
            return False

        def do_GET(self):  # noqa: N802 - the handler's name
            if not self._authorized():
                return
            if urllib.parse.urlsplit(self.path).path != "/control":
                self._answer(404, {"error": f"no route GET {self.path[:200]} (GET /control)"})
                return
            self._answer(200, server.status())

        def do_POST(self):  # noqa: N802
            if not self._authorized():
                return
            parts = urllib.parse.urlsplit(self.path)
            if parts.path in ("/control/on", "/control/off"):
                self._answer(200, server.switch(parts.path.rsplit("/", 1)[1]))
                return
            if parts.path == "/control/window":
                values = urllib.parse.parse_qs(parts.query).get("seconds", [])
                try:
                    seconds = float(values[0]) if values else float("nan")
                except ValueError:
                    seconds = float("nan")
                if not 0 < seconds <= 86400:
                    self._answer(400, {"error": "window: seconds must be a number in (0, 86400] "
                                                "(POST /control/window?seconds=30)"})
                    return
                self._answer(200, server.window(seconds))
                return
            self._answer(404, {"error": f"no route POST {self.path[:200]} "
                                        "(POST /control/on, /control/off, /control/window?seconds=T)"})

    return Handler


def start_control_server(run_directory: str, address: tuple[str, int]) -> tuple[ControlServer, str]:
    """The server, started, and the line to print about it. A host other than loopback
    requires a token (OPSIGHT_CONTROL_TOKEN, or a new one printed in the line)."""
    host, port = address
    token = os.environ.get("OPSIGHT_CONTROL_TOKEN") or None
    made_up = False
    if token is None and host not in _LOOPBACK:
        token = secrets.token_urlsafe(24)
        made_up = True
    server = ControlServer(run_directory, host, port, token)
    server.start()
    line = f"tracing control on http://{host}:{server.port}/control"
    if made_up:
        line += f" (token: {token})"
    elif token is not None:
        line += " (token from OPSIGHT_CONTROL_TOKEN)"
    return server, line
