"""Switching the tracing of a live server from outside: on, off, on for a window of T
seconds, or on for the next N requests it serves and off again.

Three doors lead here, with the same routes and answers (``handle``):

* ``opsight run --control-port`` (``opsight._cli.control_server``), which fans each request
  out to every process of the run through the control files of ``opsight ctl``;
* the HTTP middleware's own routes (``OpsightMiddleware(app, control_path="/opsight/control")``
  for ASGI and WSGI), which drive the process serving them (``LiveControl``);
* ``opsight ctl PID requests N``, through the control files.

Routes, below the control path (JSON answers)::

    GET  /                        the state: on/off, requests left, window seconds left
    POST /on    POST /off         switch (ends a window or a budget of requests)
    POST /window?seconds=T        on now, off after T seconds
    POST /requests?count=N        on now, off once N requests have been served

A budget of requests is counted by the server span integrations (ASGI, WSGI): each
request that starts while requests are left takes one and is traced; once none is left and
the last counted request has finished, tracing switches off. Requests that arrive after the
budget is spent are served untraced (no server span), but tracing is per process: other
work running while the last counted requests finish is recorded too. With several worker
processes, each traces its next N requests.

Security: a token (``OPSIGHT_CONTROL_TOKEN``, or the one given) is required as
``Authorization: Bearer <token>`` on every route when set; without one, only clients on the
loopback address are served (403 otherwise).
"""

from __future__ import annotations

import hmac
import os
import threading
import time
import urllib.parse
from typing import Any, Protocol

import opsight._native as _native

#: A request may ask for at most this many requests or seconds.
MAX_REQUESTS = 1_000_000_000
MAX_WINDOW_SECONDS = 86_400.0

LOOPBACK = ("127.0.0.1", "localhost", "::1")

# What claim_request() answers.
UNCOUNTED = 0  # no budget in force: trace the request if tracing is on
COUNTED = 1    # took one of the budget: trace it, and call release_request() when it ends
REFUSED = 2    # the budget is spent: serve it untraced


class ControlBackend(Protocol):
    """What the routes drive: this process (LiveControl) or every process of a run."""

    def status(self) -> dict: ...
    def switch(self, state: str) -> dict: ...
    def window(self, seconds: float) -> dict: ...
    def trace_requests(self, count: int) -> dict: ...


class LiveControl:
    """This process's switch: on/off, a window and a budget of requests (see the module's
    documentation). One per process (``live_control``). Thread-safety: any thread; the
    middleware's claim and release run on the threads and event loops serving requests."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._requests_left: int | None = None  # a budget in force: how many are left
        self._requests_in_flight = 0            # counted requests not yet finished
        self._window_timer: threading.Timer | None = None
        self._window_ends: float | None = None

    # ---- the middleware's side: one check per request when no budget is in force --------
    def claim_request(self) -> int:
        """UNCOUNTED, COUNTED or REFUSED (see above), for a request that starts now."""
        if self._requests_left is None:
            return UNCOUNTED
        with self._lock:
            left = self._requests_left
            if left is None:
                return UNCOUNTED
            if left == 0:
                return REFUSED
            self._requests_left = left - 1
            self._requests_in_flight += 1
        _native.publish_control_state(f"requests {left - 1}")
        return COUNTED

    def release_request(self) -> None:
        """A COUNTED request ended: the last of a spent budget switches tracing off."""
        with self._lock:
            self._requests_in_flight -= 1
            done = self._requests_left == 0 and self._requests_in_flight == 0
            if done:
                self._requests_left = None
        if done:
            self._set(False)
            _native.publish_control_state("off")

    # ---- the routes' side ------------------------------------------------------------------
    def status(self) -> dict:
        with self._lock:
            left = (None if self._window_ends is None
                    else max(0.0, round(self._window_ends - time.monotonic(), 3)))
            return {"processes": [{"pid": os.getpid(), "state": _state_name(),
                                   "requests_left": self._requests_left}],
                    "window_seconds_left": left}

    def switch(self, state: str) -> dict:
        self._end_window_and_budget()
        self._set(state == "on")
        _native.publish_control_state(state)
        return {"processes": [{"pid": os.getpid(), "state": state}]}

    def window(self, seconds: float) -> dict:
        self._end_window_and_budget()
        with self._lock:
            timer = self._window_timer = threading.Timer(seconds, self._window_ended)
            timer.daemon = True
            self._window_ends = time.monotonic() + seconds
        self._set(True)
        _native.publish_control_state("on")
        timer.start()
        return {"processes": [{"pid": os.getpid(), "state": "on"}], "window_seconds": seconds}

    def trace_requests(self, count: int) -> dict:
        state = self.apply_request_budget(count)
        _native.publish_control_state(state)
        return {"processes": [{"pid": os.getpid(), "state": state}], "requests": count}

    def apply_request_budget(self, count: int) -> str:
        """``opsight ctl PID requests N`` (called on the control watcher's thread): starts
        a budget and returns the state to publish."""
        self._end_window_and_budget()
        with self._lock:
            self._requests_left = count
        self._set(True)
        return f"requests {count}"

    def apply_switch(self, enabled: bool) -> None:
        """``opsight ctl PID on|off`` (on the control watcher's thread)."""
        self._end_window_and_budget()
        self._set(enabled)

    # ---- helpers ---------------------------------------------------------------------------
    def _end_window_and_budget(self) -> None:
        with self._lock:
            if self._window_timer is not None:
                self._window_timer.cancel()
            self._window_timer = None
            self._window_ends = None
            self._requests_left = None  # counted requests in flight still release

    def _window_ended(self) -> None:
        with self._lock:
            if self._window_timer is None or self._window_timer is not threading.current_thread():
                return  # replaced or cancelled meanwhile
            self._window_timer = None
            self._window_ends = None
        self._set(False)
        _native.publish_control_state("off")

    @staticmethod
    def _set(enabled: bool) -> None:
        from .switch import set_enabled

        set_enabled(enabled)


def _state_name() -> str:
    return "on" if _native.tracing_enabled() else "off"


#: The process's one LiveControl, and its middleware side as functions.
live_control = LiveControl()
claim_request = live_control.claim_request
release_request = live_control.release_request


# ---- the routes ------------------------------------------------------------------------------

def authorize(token: str | None, authorization: str | None,
              client_host: str | None) -> tuple[int, dict] | None:
    """None when the caller may use the routes, else the answer: 401 without the right
    token when one is set, 403 for a client off the loopback address when none is."""
    if token is not None:
        if hmac.compare_digest((authorization or "").encode(), f"Bearer {token}".encode()):
            return None
        return 401, {"error": "missing or wrong token (Authorization: Bearer <token>)"}
    if client_host is None or client_host in LOOPBACK:
        return None
    return 403, {"error": f"tracing control from {client_host} needs a token: set "
                          "OPSIGHT_CONTROL_TOKEN in the traced program's environment"}


def handle(backend: ControlBackend, method: str, route: str, query: str) -> tuple[int, dict]:
    """(HTTP status, JSON body) for ``method`` on ``route`` (the path below the control
    path: ``""``, ``"/on"``, ``"/window"``...) with the URL's ``query``."""
    route = route.rstrip("/")
    values = urllib.parse.parse_qs(query)
    if method == "GET" and route == "":
        return 200, backend.status()
    if method == "POST" and route in ("/on", "/off"):
        return 200, backend.switch(route[1:])
    if method == "POST" and route == "/window":
        seconds = _number(values.get("seconds"), float)
        if seconds is None or not 0 < seconds <= MAX_WINDOW_SECONDS:
            return 400, {"error": "window: seconds must be a number in (0, 86400] "
                                  "(POST .../window?seconds=30)"}
        return 200, backend.window(seconds)
    if method == "POST" and route == "/requests":
        count = _number(values.get("count"), int)
        if count is None or not 1 <= count <= MAX_REQUESTS:
            return 400, {"error": "requests: count must be a whole number in [1, 1000000000] "
                                  "(POST .../requests?count=100)"}
        return 200, backend.trace_requests(count)
    return 404, {"error": f"no route {method} {route[:200] or '/'} (GET /, POST /on, /off, "
                          "/window?seconds=T, /requests?count=N)"}


def _number(values: list[str] | None, kind: Any) -> Any:
    if not values:
        return None
    try:
        number = kind(values[0])
    except ValueError:
        return None
    return number if number == number else None  # NaN is no number of seconds
