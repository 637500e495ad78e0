"""Metrics beyond latency for Python spans: names, the Python heap, socket byte counting.

A span asks for metrics by name (``latency``, ``cpu``, ``memory``, ``heap``, ``disk``,
``network``, ``gpu``). ``cpu``, ``memory``, ``disk``, ``network`` and ``gpu`` are read by
the core (``opsight::start_metrics``); ``heap`` is Python's own allocator as tracemalloc
sees it, measured here; ``network`` needs the bytes counted, which this module does by
wrapping the Python socket methods (the kernel keeps no per-process socket counters).
docs/metrics.md says what each measures, how exactly and at what cost.
"""

from __future__ import annotations

import difflib
import socket
import sys
import threading
from typing import Any, Iterable

import opsight._native as _native

# Every metric a span can ask for, in the order they are documented.
METRIC_NAMES = ("latency", "cpu", "memory", "heap", "disk", "network", "gpu")


def metric_problem(name: Any) -> str | None:
    """Why ``name`` is not a metric name, or None if it is one."""
    if not isinstance(name, str):
        return f"expected a metric name (a string), got {type(name).__name__}"
    if name in METRIC_NAMES:
        return None
    close = difflib.get_close_matches(name, METRIC_NAMES, n=1)
    hint = f" (did you mean '{close[0]}'?)" if close else ""
    return f"unknown metric '{name}'{hint}; expected one of {', '.join(METRIC_NAMES)}"


def parse_metrics(names: Iterable[str] | str | None) -> tuple[int, bool]:
    """``["cpu", "heap"]`` -> (the core's group bits, whether the heap is measured).

    Raises ValueError naming an unknown metric. Asking for ``network`` starts counting
    socket bytes; asking for ``heap`` starts tracemalloc (see :func:`_start_heap_tracing`).
    """
    if names is None:
        return 0, False
    if isinstance(names, str):
        names = [names]
    groups = 0
    heap = False
    for name in names:
        problem = metric_problem(name)
        if problem:
            raise ValueError(f"opsight: {problem}")
        if name == "heap":
            heap = True
        elif name != "latency":
            groups |= _native.metric_group_from_name(name)
    if groups & _native.metric_group_from_name("network"):
        count_socket_bytes()
    if heap:
        _start_heap_tracing()
    return groups, heap


def set_session_metrics(names: Iterable[str] | str | None) -> None:
    """Makes every traced function and span measure ``names`` too (until reset with None)."""
    groups, heap = parse_metrics(names)
    _native.set_session_metrics(groups, heap)


def push_session_metrics(names: Iterable[str] | str) -> Any:
    """:func:`set_session_metrics`, returning what was in force for
    :func:`restore_session_metrics`."""
    previous = _native.session_metrics()
    set_session_metrics(names)
    return previous


def restore_session_metrics(previous: Any) -> None:
    _native.set_session_metrics(*previous)


class SpanMetrics:
    """The readings one span took at its start; :meth:`finish` adds the metrics to it."""

    __slots__ = ("_native_start", "_heap_token")

    def __init__(self, groups: int, heap: bool) -> None:
        session_groups, session_heap = _native.session_metrics()
        groups |= session_groups
        self._heap_token = _heap_start() if (heap or session_heap) else None
        self._native_start = _native.start_metrics(groups) if groups else None

    def finish(self) -> None:
        if self._native_start is not None:
            _native.finish_metrics(self._native_start)
        if self._heap_token is not None:
            _heap_finish(self._heap_token)


def wants_metrics(groups: int, heap: bool) -> bool:
    """Whether a span with these metrics (plus the session's) measures anything."""
    session_groups, session_heap = _native.session_metrics()
    return bool(groups or heap or session_groups or session_heap)


# --- The Python heap (tracemalloc) -------------------------------------------------------
#
# tracemalloc keeps one peak for the whole interpreter, which can be reset. As with the
# core's RSS peak, a span resets it at its start, and every reset and every end first folds
# the peak reached so far into all open heap spans, so nested and concurrent spans keep
# exact peaks.

_heap_lock = threading.Lock()
_open_heap_peaks: dict[int, int] = {}  # token -> the peak of traced memory seen so far
_next_heap_token = 0
_heap_started_by_opsight = False


def _start_heap_tracing() -> None:
    global _heap_started_by_opsight
    import tracemalloc

    if not tracemalloc.is_tracing():
        tracemalloc.start()
        _heap_started_by_opsight = True
        print("opsight: the heap metric started tracemalloc, which slows Python "
              "allocations down (docs/metrics.md)", file=sys.stderr)
    _native.set_heap_hooks(_heap_start, _heap_finish)


def _fold(peak: int) -> None:
    for token, seen in _open_heap_peaks.items():
        if peak > seen:
            _open_heap_peaks[token] = peak


def _heap_start() -> Any:
    import tracemalloc

    global _next_heap_token
    began = _native.metric_ticks()
    if not tracemalloc.is_tracing():
        return None
    with _heap_lock:
        current, peak = tracemalloc.get_traced_memory()
        _fold(peak)
        tracemalloc.reset_peak()
        _next_heap_token += 1
        token = _next_heap_token
        _open_heap_peaks[token] = current
    _native.account_metric_cost("heap", 1, _native.metric_ticks() - began)
    return (token, current)


def _heap_finish(started: Any) -> None:
    import tracemalloc

    if started is None:
        return
    began = _native.metric_ticks()
    token, start_bytes = started
    current, peak = tracemalloc.get_traced_memory()
    with _heap_lock:
        _fold(peak)
        span_peak = max(_open_heap_peaks.pop(token, current), current)
    _native.add_arg("metric.heap_delta_bytes", current - start_bytes)
    _native.add_arg("metric.heap_peak_bytes", span_peak - start_bytes)
    _native.account_metric_cost("heap", 1, _native.metric_ticks() - began)


# --- Socket bytes ------------------------------------------------------------------------
#
# Every send and receive method of socket.socket (and ssl.SSLSocket, whose methods
# override them) is wrapped to count the bytes it moved on the calling thread. This sees
# all I/O done through Python sockets (asyncio, http.client, requests, urllib3, ...); it
# does not see sockets that native code drives itself (gRPC's C core, NCCL, libcurl).

_SEND_METHODS = ("send", "sendto", "sendmsg")
_RECEIVE_METHODS = ("recv", "recvfrom", "recvmsg")
_RECEIVE_INTO_METHODS = ("recv_into", "recvfrom_into", "recvmsg_into")
_counting_lock = threading.Lock()
_counted_classes: list[type] = []


def _byte_count(data: Any) -> int:
    try:
        return memoryview(data).nbytes
    except TypeError:
        return len(data)


def _counted_here(sock: Any, encrypted_only: bool) -> bool:
    # An SSLSocket that is not (yet) encrypted passes its I/O on to socket.socket's
    # methods, which count it already.
    return not encrypted_only or getattr(sock, "_sslobj", None) is not None


# A wrapped method that another wrapped method calls is not counted again: SSLSocket.sendall
# loops over SSLSocket.send, and both are wrapped. Only the outermost call on a thread counts.
_inside_counted_call = threading.local()


def _counting(original: Any, encrypted_only: bool, count: Any) -> Any:
    """``original`` wrapped so that ``count(self, args, result)`` (sent, received) is added
    to the calling thread's network bytes once per outermost call."""

    def counted(self, *args, **kwargs):
        # An SSLSocket not (yet) encrypted hands its I/O to socket.socket's methods, which
        # count it: the outer call must not claim it.
        if getattr(_inside_counted_call, "active", False) or \
                not _counted_here(self, encrypted_only):
            return original(self, *args, **kwargs)
        _inside_counted_call.active = True
        try:
            result = original(self, *args, **kwargs)
        finally:
            _inside_counted_call.active = False
        sent, received = count(args, kwargs, result)
        if sent > 0 or received > 0:
            _native.count_network_bytes(sent, received)
        return result

    return counted


def _sent_count(args: tuple, kwargs: dict, result: Any) -> tuple[int, int]:
    return (result if isinstance(result, int) else 0), 0


def _sendall_count(args: tuple, kwargs: dict, result: Any) -> tuple[int, int]:
    data = args[0] if args else kwargs.get("data", b"")
    return _byte_count(data), 0


def _received_count(args: tuple, kwargs: dict, result: Any) -> tuple[int, int]:
    data = result[0] if isinstance(result, tuple) else result
    return 0, (len(data) if data else 0)


def _received_into_count(args: tuple, kwargs: dict, result: Any) -> tuple[int, int]:
    count = result[0] if isinstance(result, tuple) else result
    return 0, (count if isinstance(count, int) else 0)


def count_socket_bytes() -> None:
    """Starts counting the bytes of every Python socket (once; stays for the process)."""
    import ssl

    with _counting_lock:
        for cls in (socket.socket, ssl.SSLSocket):
            if cls in _counted_classes:
                continue
            for name, count in (
                *((method, _sent_count) for method in _SEND_METHODS),
                ("sendall", _sendall_count),
                *((method, _received_count) for method in _RECEIVE_METHODS),
                *((method, _received_into_count) for method in _RECEIVE_INTO_METHODS),
            ):
                encrypted_only = cls is not socket.socket
                # SSLSocket's own methods only: those it inherits are counted already.
                original = getattr(cls, name, None) if not encrypted_only else cls.__dict__.get(name)
                if original is None:
                    continue
                wrapper = _counting(original, encrypted_only, count)
                wrapper.__name__ = name
                wrapper.__qualname__ = f"{cls.__name__}.{name}"
                wrapper.__doc__ = getattr(original, "__doc__", None)
                wrapper._opsight_counts_bytes = True
                setattr(cls, name, wrapper)
            _counted_classes.append(cls)


def counting_socket_bytes() -> bool:
    """Whether socket bytes are being counted."""
    return socket.socket in _counted_classes
