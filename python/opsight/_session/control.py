"""Switching tracing on and off from outside a traced process (``opsight ctl PID on|off``).

The protocol is two small files per traced process in the control directory
(``$OPSIGHT_CONTROL_DIR``, default ``/tmp/opsight-<uid>``):

* ``<pid>.state``: written by the traced process: ``on`` or ``off``, what it is doing now;
* ``<pid>.request``: written by ``opsight ctl``: ``on`` or ``off``, what it should do.

A daemon thread in the traced process looks at the request file every 100 ms (one
``stat``), applies a new request (``opsight.enable()``/``disable()``) and rewrites the
state; ``opsight ctl`` waits for the state to match. Files rather than a signal: no
handler of the program is replaced, and it works while the main thread is busy in C code.
"""

from __future__ import annotations

import os
import threading
import time

POLL_SECONDS = 0.1


def control_directory() -> str:
    return os.environ.get("OPSIGHT_CONTROL_DIR") or f"/tmp/opsight-{os.getuid()}"


def _paths(pid: int) -> tuple[str, str]:
    directory = control_directory()
    return os.path.join(directory, f"{pid}.state"), os.path.join(directory, f"{pid}.request")


def _write_atomically(path: str, text: str) -> None:
    temporary = f"{path}.{os.getpid()}.tmp"
    with open(temporary, "w") as file:
        file.write(text)
    os.replace(temporary, path)


def _read(path: str) -> str | None:
    try:
        with open(path) as file:
            return file.read().strip()
    except OSError:
        return None


class ControlWatcher:
    """The traced process's side: publishes its state and applies requests."""

    def __init__(self, apply) -> None:
        self._apply = apply  # callable(bool)
        self._pid = os.getpid()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last_request_mtime = 0

    def start(self, enabled: bool) -> None:
        self._pid = os.getpid()
        state_path, request_path = _paths(self._pid)
        try:
            os.makedirs(control_directory(), mode=0o700, exist_ok=True)
            _write_atomically(state_path, "on" if enabled else "off")
            try:  # a stale request from an earlier process with this pid
                os.unlink(request_path)
            except FileNotFoundError:
                pass
        except OSError:
            return  # no control directory: the process runs on, just not controllable
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="opsight-control", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        state_path, request_path = _paths(self._pid)
        while not self._stop.wait(POLL_SECONDS):
            try:
                mtime = os.stat(request_path).st_mtime_ns
            except OSError:
                continue
            if mtime == self._last_request_mtime:
                continue
            self._last_request_mtime = mtime
            request = _read(request_path)
            if request not in ("on", "off"):
                continue
            self._apply(request == "on")
            try:
                _write_atomically(state_path, request)
            except OSError:
                pass

    def stop(self) -> None:
        self._stop.set()
        for path in _paths(self._pid):
            try:
                os.unlink(path)
            except OSError:
                pass


def request(pid: int, state: str, timeout_seconds: float = 5.0) -> str:
    """``opsight ctl``: asks process ``pid`` to switch tracing ``on``/``off`` (or just reads
    it, for ``status``) and returns its state; raises RuntimeError if it is not traced."""
    state_path, request_path = _paths(pid)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        raise RuntimeError(f"no process {pid}") from None
    except PermissionError:
        pass
    current = _read(state_path)
    if current is None:
        raise RuntimeError(
            f"process {pid} is not traced by opsight (no {state_path}; start it with "
            "opsight run or OPSIGHT_OUTPUT)"
        )
    if state == "status" or current == state:
        return current
    _write_atomically(request_path, state)
    deadline = time.monotonic() + timeout_seconds
    while time.monotonic() < deadline:
        if _read(state_path) == state:
            return state
        time.sleep(POLL_SECONDS / 2)
    raise RuntimeError(f"process {pid} did not switch tracing {state} within {timeout_seconds:g} s")


def traced_processes() -> list[tuple[int, str]]:
    """(pid, state) of the live traced processes this user can control."""
    result = []
    try:
        names = os.listdir(control_directory())
    except OSError:
        return result
    for name in sorted(names):
        if not name.endswith(".state"):
            continue
        try:
            pid = int(name[: -len(".state")])
            os.kill(pid, 0)
        except (ValueError, ProcessLookupError):
            continue
        except PermissionError:
            pass
        result.append((pid, _read(os.path.join(control_directory(), name)) or "?"))
    return result
