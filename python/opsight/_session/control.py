"""Switching tracing on and off from outside a traced process (``opsight ctl PID on|off``).

The protocol is two small files per traced process in a private control directory
(``$OPSIGHT_CONTROL_DIR``; else ``$XDG_RUNTIME_DIR/opsight`` where XDG_RUNTIME_DIR is set and
private; else ``/tmp/opsight-<uid>``):

* ``<pid>.state``: written by the traced process: ``on`` or ``off``, what it is doing now;
* ``<pid>.request``: written by ``opsight ctl``: ``on`` or ``off``, what it should do, or
  ``requests N``: trace the next N requests it serves, then off (``live_control``; the
  state then reads ``requests K`` while K are left).

Both sides are the core's (src/session/control.hpp), shared with C++ programs traced
through ``OPSIGHT_OUTPUT``: the directory is created with mode 0700 and refused (one warning,
and the program runs on, uncontrollable) when it is a symlink, someone else's, or open to
group or others; files are never followed through a symlink. A thread of the core in the
traced process looks at the request file every 100 ms (one ``stat``), calls the callable it
was given with the requested state (here ``set_enabled``, which also unwraps or rewraps the
targets) and rewrites the state; ``opsight ctl`` waits for the state to match. Files rather
than a signal: no handler of the program is replaced, and it works while the main thread is
busy in C code.
"""

from __future__ import annotations

import os
import time

from .. import _native

POLL_SECONDS = 0.1


def control_directory() -> str:
    """Where this process publishes its state."""
    return _native.control_directory()


class ControlWatcher:
    """The traced process's side: the core's watcher, calling ``apply(enabled)`` on its own
    thread for each on/off request, and ``apply_requests(N)`` (which answers the state to
    publish) for ``requests N``. One per process: starting one replaces the one running."""

    def __init__(self, apply, apply_requests=None) -> None:
        self._apply = apply  # callable(bool)
        self._apply_requests = apply_requests  # callable(int) -> str, or None

    def start(self, enabled: bool) -> bool:
        """Publishes ``enabled`` and starts watching; False (after one warning on stderr)
        where the control directory is refused: the process runs on, not controllable."""
        return _native.start_control_watcher(self._apply, enabled, self._apply_requests)

    def stop(self) -> None:
        """Ends the watcher's thread and removes this process's control files."""
        _native.stop_control_watcher()


def _state(pid: int) -> str | None:
    return _native.control_state(pid)[1]


def request(pid: int, state: str, timeout_seconds: float = 5.0) -> str:
    """``opsight ctl``: asks process ``pid`` to switch tracing ``on``/``off``, or to trace
    its next N requests (``requests N``), or just reads its state (``status``); returns its
    state; raises RuntimeError if it is not traced or does not answer in time."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        raise RuntimeError(f"no process {pid}") from None
    except PermissionError:
        pass
    state_path, current, problem = _native.control_state(pid)
    if current is None:
        message = (f"process {pid} is not traced by opsight (no {state_path}; start it with "
                   "opsight run, or with OPSIGHT_OUTPUT set: a Python program, or a C++ program "
                   "linked with the opsight library)")
        if problem:
            message += f"; {problem}: not used"
        raise RuntimeError(message)
    budget = state.startswith("requests ")
    if state == "status" or (current == state and not budget):
        return current
    published_before = _modified_ns(state_path)
    error = _native.control_request(pid, state)
    if error is not None:
        raise RuntimeError(f"cannot ask process {pid}: {error}")
    deadline = time.monotonic() + timeout_seconds
    while time.monotonic() < deadline:
        now = _state(pid)
        if budget:
            # Taken when the process republishes: "requests N", or already fewer left, or
            # "off" when a busy server served them all between two looks.
            if _modified_ns(state_path) != published_before and now is not None:
                return now
        elif now == state:
            return state
        time.sleep(POLL_SECONDS / 2)
    if budget:
        raise RuntimeError(f"process {pid} did not take a budget of requests within "
                           f"{timeout_seconds:g} s (only a Python program traced by opsight "
                           "counts requests; a C++ program cannot)")
    raise RuntimeError(f"process {pid} did not switch tracing {state} within {timeout_seconds:g} s")


def request_dump(pid: int, timeout_seconds: float = 30.0) -> str:
    """``opsight ctl PID dump``: asks process ``pid``'s flight recorder to write what its ring
    holds; returns the dump's path. Raises RuntimeError when the process is not traced, has
    no flight recorder, or does not answer in time."""
    request(pid, "status")  # traced at all? (raises with the reason)
    before = _native.control_dumped(pid)
    error = _native.control_request(pid, "dump")
    if error is not None:
        raise RuntimeError(f"cannot ask process {pid}: {error}")
    deadline = time.monotonic() + timeout_seconds
    while time.monotonic() < deadline:
        answer = _native.control_dumped(pid)
        if answer is not None and answer != before:
            text = answer[0]
            if text.startswith("error: "):
                raise RuntimeError(text[len("error: "):])
            return text
        time.sleep(POLL_SECONDS / 2)
    raise RuntimeError(f"process {pid} did not dump within {timeout_seconds:g} s")


def _modified_ns(path: str) -> int | None:
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return None


def traced_processes_and_problems() -> tuple[list[tuple[int, str]], list[str]]:
    """(pid, state) of the live traced processes this user can control, and the control
    directories refused on the way (why, for a warning)."""
    published, problems = _native.control_published_states()
    result = []
    for pid, state in published:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            continue
        except PermissionError:
            pass
        result.append((pid, state))
    return result, problems


def traced_processes() -> list[tuple[int, str]]:
    """(pid, state) of the live traced processes this user can control."""
    return traced_processes_and_problems()[0]
