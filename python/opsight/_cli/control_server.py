"""``opsight run --control-port``: switch the tracing of a running program over HTTP, for
platform teams who profile a live inference server for a while and then turn it off.

Routes (JSON in and out):

- ``GET /control``: the state of each process of the run (``on``/``off``) and the
  seconds left in a window;
- ``POST /control/on``, ``POST /control/off``: switch every process of the run;
- ``POST /control/window?seconds=T``: on now, off again after T seconds (a new window
  replaces the previous one);
- ``POST /control/requests?count=N``: each process traces the next N HTTP requests it
  serves, then switches off (``opsight._session.live_control``).

It goes through the same control files as ``opsight ctl`` (``opsight._session.control``),
so a process started by the run after the request is switched at the next request. The
routes and answers are those of the middleware's own control routes (``live_control.handle``).

Security: it listens on 127.0.0.1 unless told otherwise. Any other address needs a token:
``OPSIGHT_CONTROL_TOKEN``, or one made up at start and printed on stderr. When a token is
set, every request must carry ``Authorization: Bearer <token>`` or it gets 401. A malformed
request gets 400 or 404 with a message, never a crash.
"""

from __future__ import annotations

import http.server
import json
import os
import re
import secrets
import threading
import time
import urllib.parse

from .._session import control as _control
from .._session import live_control

_TRACE_FILE = re.compile(r"^trace\.(\d+)\.opsight$")


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
        """On or off, ending a window."""
        self._cancel_window()
        return self._send(state)

    def _send(self, state: str) -> dict:
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
            timer = self._window_timer = threading.Timer(seconds, self._end_window)
            timer.daemon = True
            self._window_ends = time.monotonic() + seconds
        answer = self._send("on")
        timer.start()  # cancelled meanwhile: it starts and does nothing
        answer["window_seconds"] = seconds
        return answer

    def trace_requests(self, count: int) -> dict:
        self._cancel_window()
        answer = self._send(f"requests {count}")
        answer["requests"] = count
        return answer

    def _cancel_window(self) -> None:
        with self._lock:
            if self._window_timer is not None:
                self._window_timer.cancel()
            self._window_timer = None
            self._window_ends = None

    def _end_window(self) -> None:
        with self._lock:
            if self._window_timer is not threading.current_thread():
                return  # cancelled or replaced meanwhile
            self._window_timer = None
            self._window_ends = None
        self._send("off")


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

        def _serve(self, method: str) -> None:
            parts = urllib.parse.urlsplit(self.path)
            refused = live_control.authorize(server.token, self.headers.get("Authorization"),
                                             None)
            if refused is not None:
                self._answer(*refused)
                return
            if parts.path != "/control" and not parts.path.startswith("/control/"):
                self._answer(404, {"error": f"no route {method} {self.path[:200]} (GET /control, "
                                            "POST /control/on, /control/off, "
                                            "/control/window?seconds=T, /control/requests?count=N)"})
                return
            self._answer(*live_control.handle(server, method, parts.path[len("/control"):],
                                              parts.query))

        def do_GET(self):  # noqa: N802 - the handler's name
            self._serve("GET")

        def do_POST(self):  # noqa: N802
            self._serve("POST")

    return Handler


def start_control_server(run_directory: str, address: tuple[str, int]) -> tuple[ControlServer, str]:
    """The server, started, and the line to print about it. A host other than loopback
    requires a token (OPSIGHT_CONTROL_TOKEN, or a new one printed in the line)."""
    host, port = address
    token = os.environ.get("OPSIGHT_CONTROL_TOKEN") or None
    made_up = False
    if token is None and host not in live_control.LOOPBACK:
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
