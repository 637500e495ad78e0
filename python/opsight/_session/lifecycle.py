"""One recording session's life, the same for every way of starting one:
``opsight.profile()`` (:mod:`.profile`), ``OPSIGHT_OUTPUT`` at interpreter start-up and
``opsight run``, which sets it for the program it starts (:mod:`.startup`).

:meth:`Recording.start` starts the native session, applies the session-wide metrics,
publishes the session in :mod:`.state` and tells the integrations (:mod:`.integrations`);
:meth:`Recording.stop` tells them first, stops the native session (the file is written, or
the recording kept in memory), restores the metrics, then appends what the integrations
add (ONNX Runtime's profile) to the trace, or to the file when one was written.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

import opsight._native as _native
from .._capture.metrics import parse_metrics, push_session_metrics, restore_session_metrics
from . import gpu, integrations, state
from .flight_recorder import RingOptions


class RecordingError(RuntimeError):
    """A session could not start or stop; the message says why (path, permission...)."""


class Recording:
    """One running recording session. Thread-safety: start and stop under the GIL, from
    one thread; any thread records into it."""

    def __init__(self, native_session: Any, output: str | None, previous_metrics: Any) -> None:
        self.native_session = native_session
        #: The file the session writes, or None for a recording kept in memory.
        self.output = output
        #: Where the native session streams: ``output`` itself, or for a Perfetto file
        #: (written, never read back) a native file beside it, converted at stop.
        self.stream_path = _stream_path(output)
        #: CLOCK_MONOTONIC at the start: the window integrations merge their traces into.
        self.begin_ns = time.monotonic_ns()
        self._previous_metrics = previous_metrics
        self.stopped = False

    @classmethod
    def start(cls, output: str | os.PathLike | None, *, buffer_mb: int = 64,
              flush_interval_ms: int = 100, sample_ms: int = 0,
              metrics: list[str] | tuple[str, ...] | None = None,
              sample_rate: float = 1.0, sample_root: str = "",
              cuda: bool | None = None, ring: RingOptions | None = None,
              sample_operators_only: bool = False) -> "Recording":
        """Starts recording into ``output`` (``.opsight``, ``.json`` or ``.pftrace``), or into memory
        when None; ``sample_rate`` below 1 records that share of the units that begin at
        ``sample_root`` (:mod:`.sampling`); ``cuda`` traces the GPU (:mod:`.gpu`: None
        decides by ``OPSIGHT_CUDA``, else from when torch initialises CUDA); ``ring`` keeps
        only the most recent events until a dump (:mod:`.flight_recorder`). Raises :class:`RecordingError` when the session cannot start and
        ``ValueError`` for an unknown metric name; nothing is left running then."""
        if state.session is not None:
            raise RecordingError("a recording session is already running in this process")
        if metrics:
            parse_metrics(metrics)  # an unknown name fails here, before anything starts
        path = os.fspath(output) if output is not None else None
        gpu_mode = gpu.cuda_mode(cuda)
        trace_gpu = gpu_mode == gpu.ON
        session = _native.Session(_stream_path(path) or "", buffer_mb, flush_interval_ms,
                                  sample_ms, sample_rate, sample_root, trace_gpu,
                                  gpu.cupti_path() if trace_gpu else "",
                                  sample_operators_only=sample_operators_only,
                                  **(ring or RingOptions()).native_arguments())
        if not session.ok:
            raise RecordingError(session.error)
        if trace_gpu and session.gpu_status:
            print(f"opsight: {session.gpu_status}", file=sys.stderr)
        gpu.waiting_session = session if gpu_mode == gpu.WHEN_CUDA_STARTS else None
        previous_metrics = push_session_metrics(metrics) if metrics else None
        recording = cls(session, path, previous_metrics)
        state.session = session
        integrations.started()
        return recording

    def stop(self, *, keep_trace: bool, drops_hint: str = "") -> Any:
        """Stops the session. With ``keep_trace`` returns the recorded trace (an
        ``opsight._native.Trace``, the integrations' traces appended; the file, if any, is
        rewritten with them); without, only the file is completed (rewritten only when an
        integration adds something) and None is returned. Raises :class:`RecordingError`
        when the native session fails to finish its file."""
        if self.stopped:
            raise RecordingError("the recording was already stopped")
        self.stopped = True
        session = self.native_session
        if state.session is session:
            integrations.stopping()
            state.session = None
        if gpu.waiting_session is session:
            gpu.waiting_session = None
        end_ns = time.monotonic_ns()
        if self._previous_metrics is not None:
            restore_session_metrics(self._previous_metrics)
        ok = session.stop()
        if session.events_dropped:
            hint = f" ({drops_hint})" if drops_hint else ""
            print(f"opsight: {session.events_dropped} events dropped{hint}", file=sys.stderr)
        if not ok:
            raise RecordingError(session.error)
        added = integrations.finished_traces(self.begin_ns, end_ns)
        if self.output is not None and self.stream_path != self.output:
            trace = _native.read_trace(self.stream_path)
            for other, shift_ns in added:
                trace.append(other, shift_ns)
            trace.write(self.output)
            os.remove(self.stream_path)
            return trace if keep_trace else None
        if not keep_trace:
            if added and self.output:
                _merge_into_file(self.output, added)
            return None
        if self.output is None:
            trace = _native.trace_from_native_bytes(session.take_native_bytes(), "profile")
        else:
            trace = _native.read_trace(self.output)
        for other, shift_ns in added:
            trace.append(other, shift_ns)
        if added and self.output is not None:
            trace.write(self.output)
        return trace


def _stream_path(output: str | None) -> str | None:
    """Where the native session writes for ``output``: the file itself (``.opsight``; a
    ``.json`` the core converts at stop), or a native file beside a Perfetto file, which
    :meth:`Recording.stop` converts once the integrations' events are added (the native
    file keeps what a .pftrace does not: span ids, unfinished flags, overhead)."""
    if output is not None and _native.trace_format_of_path(output) == "perfetto":
        return output + ".opsight.tmp"
    return output


def _merge_into_file(path: str, added: list[tuple[Any, int]]) -> None:
    """Appends the integrations' traces to the file a session wrote; a failure is a
    warning (the file keeps the session's own spans)."""
    try:
        trace = _native.read_trace(path)
        for other, shift_ns in added:
            trace.append(other, shift_ns)
        trace.write(path)
    except (OSError, RuntimeError, ValueError) as error:
        print(f"opsight: warning: {path}: could not add the integrations' events: {error}",
              file=sys.stderr)
