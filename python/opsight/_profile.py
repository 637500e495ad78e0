"""``opsight.profile``: record a block of a program and report it, in a few lines.

A :class:`Profile` starts a recording session when it is entered and stops it when it is
left; its spans come from ``@opsight.trace``, ``opsight.span``, targets and C++ macros.
Afterwards it answers with the same reports as ``opsight report`` (summary, tree, table,
merged tree, breakdown, operators, critical path: see :class:`TraceAnalyses`), as data
(``summary()``, ``dataframe()``, ``breakdown()``...) or as files (``save``,
``export_chrome_trace``).

One recording session runs per process. When one is already running (``OPSIGHT_OUTPUT``
or ``opsight run``), a profile does not start another: it records a span named by its
label into the running session, and its reports raise an error saying where the data is.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import IO, Any, Callable

from . import _native, _session_state
from ._metrics import parse_metrics, set_session_metrics
from ._analysis import TraceAnalyses
from ._span import Span


class Profile(TraceAnalyses):
    """A recording session as a context manager; see the module's documentation.

    Thread-safety: enter, leave, pause and resume from one thread; any thread records.
    """

    def __init__(
        self,
        output: str | os.PathLike | None = None,
        *,
        buffer_mb: int = 64,
        flush_interval_ms: int = 100,
        label: str = "opsight.profile",
        store: bool | str | os.PathLike = False,
        name: str | None = None,
        tags: dict[str, str] | None = None,
        metrics: list[str] | tuple[str, ...] | None = None,
        sample_ms: int = 0,
    ) -> None:
        self.output = os.fspath(output) if output is not None else None
        # Run store (docs/store.md): True saves the trace as a run in the default store when
        # the profile stops, a path saves it in that store; `name` and `tags` label the run.
        self.store = store
        self.name = name
        self.tags = dict(tags or {})
        #: The stored run ({"id", "uuid", "store", ...}) once saved; None otherwise.
        self.saved_run: dict[str, Any] | None = None
        self.buffer_mb = buffer_mb
        self.flush_interval_ms = flush_interval_ms
        # Metrics every traced function and span measures while this profile records, and
        # the background sampler's interval (0: off); docs/metrics.md.
        self.metric_names = tuple(metrics or ())
        parse_metrics(self.metric_names)  # an unknown name fails here, before anything starts
        if not isinstance(sample_ms, int) or sample_ms < 0:
            raise ValueError(f"opsight.profile: sample_ms must be an integer >= 0, got {sample_ms!r}")
        self.sample_ms = sample_ms
        self._previous_metrics: Any = None
        self.label = label
        self._session: Any = None
        self._trace: Any = None
        self._begin_ns = 0
        self._outer_span: Span | None = None

    # ---- recording ----------------------------------------------------------------------
    def start(self) -> "Profile":
        if self._session is not None or self._outer_span is not None:
            raise RuntimeError("opsight.profile: already started")
        if _session_state.session is not None:
            self._outer_span = Span(self.label, category="record")
            self._outer_span.__enter__()
            self._apply_metrics()
            return self
        session = _native.Session(self.output or "", self.buffer_mb, self.flush_interval_ms,
                                  self.sample_ms)
        if not session.ok:
            raise RuntimeError(f"opsight.profile: {session.error}")
        self._apply_metrics()
        self._session = session
        _session_state.session = session
        self._begin_ns = time.monotonic_ns()
        _session_state.session_started()
        return self

    def _apply_metrics(self) -> None:
        """Makes every traced call measure this profile's metrics until it stops."""
        if self.metric_names:
            self._previous_metrics = _native.session_metrics()
            set_session_metrics(self.metric_names)

    def _restore_metrics(self) -> None:
        if self._previous_metrics is not None:
            _native.set_session_metrics(*self._previous_metrics)
            self._previous_metrics = None

    def stop(self) -> None:
        if self._outer_span is not None:
            self._restore_metrics()
            self._outer_span.__exit__(None, None, None)
            return
        if self._session is None or self._trace is not None:
            return
        session, self._session = self._session, None
        if _session_state.session is session:
            _session_state.session_stopping()
            _session_state.session = None
        end_ns = time.monotonic_ns()
        self._restore_metrics()
        ok = session.stop()
        if session.events_dropped:
            print(
                f"opsight: {session.events_dropped} events dropped (raise buffer_mb)",
                file=sys.stderr,
            )
        if not ok:
            raise RuntimeError(f"opsight.profile: {session.error}")
        if self.output is None:
            self._trace = _native.trace_from_native_bytes(session.take_native_bytes(), "profile")
        else:
            self._trace = _native.read_trace(self.output)
        if merge_finished_traces(self._trace, self._begin_ns, end_ns) and self.output is not None:
            self._trace.write(self.output)
        if self.store:
            try:
                self._save_to_store()
            except Exception as error:  # noqa: BLE001 - saving is a warning, never a failure
                print(f"opsight.profile: warning: the run was not saved in the run store: "
                      f"{type(error).__name__}: {error}", file=sys.stderr)

    def _save_to_store(self) -> None:
        """Saves the trace as a run (``opsight save``); a failure is a warning on stderr.
        A profile inside an already running session (``opsight run``) has no trace of its
        own to save: that session's run holds its spans."""
        import shlex
        import tempfile

        from ._store import save_run

        script = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else ""
        name = self.name or (self.label if self.label != "opsight.profile" else script or self.label)
        command = shlex.join(getattr(sys, "orig_argv", None) or [sys.executable, *sys.argv])
        store = None if self.store is True else os.fspath(self.store)
        with tempfile.TemporaryDirectory(prefix="opsight-profile-") as directory:
            path = os.path.join(directory, "profile.opsight")
            try:
                self._trace.write(path)
            except (RuntimeError, OSError) as error:
                print(f"opsight.profile: warning: the run was not saved in the run store: {error}",
                      file=sys.stderr)
                return
            self.saved_run = save_run([path], name=name, tags=self.tags, command=command,
                                      store=store, prefix="opsight.profile")

    def __enter__(self) -> "Profile":
        return self.start()

    def __exit__(self, *exc_info: Any) -> None:
        self.stop()

    def pause(self) -> None:
        """Stops recording new spans until :meth:`resume` (open spans still end)."""
        if self._session is not None:
            self._session.pause()

    def resume(self) -> None:
        if self._session is not None:
            self._session.resume()

    def record(self, label: str, **attributes: Any) -> Span:
        """A labelled section: ``with prof.record("warm up"):``."""
        return Span(label, category="record", **attributes)

    # ---- results ------------------------------------------------------------------------
    @property
    def trace(self) -> Any:
        """The recorded trace (``opsight._native.Trace``), once the profile has stopped."""
        if self._outer_span is not None:
            where = os.environ.get("OPSIGHT_OUTPUT", "the running session's output")
            raise RuntimeError(
                "opsight.profile: this profile recorded into the session that was already "
                f"running; its spans are in {where} (labelled {self.label!r})"
            )
        if self._trace is None:
            raise RuntimeError("opsight.profile: the results exist once the profile has stopped")
        return self._trace

    def summary(self, sort: str = "total") -> list[dict[str, Any]]:
        """Per span name: count, total, self, min, mean, percentiles, max (ns), as in
        ``opsight report --summary --format json``."""
        return json.loads(self.trace.render("summary", "json", sort))

    def report(self, view: str = "summary", format: str = "text", *, sort: str = "total",
               limit: int = 0, max_roots: int = 20, max_depth: int = 0) -> str:
        """The text of ``opsight report --<view> --format <format>``."""
        return self.trace.render(view, format, sort, limit, max_roots, max_depth=max_depth)

    def print_summary(self, *, sort: str = "total", limit: int = 0, file: IO[str] | None = None) -> None:
        print(self.report("summary", sort=sort, limit=limit), end="", file=file or sys.stdout)

    def print_tree(self, *, max_roots: int = 20, max_depth: int = 0,
                   file: IO[str] | None = None) -> None:
        """The call tree of the first ``max_roots`` roots (0: all), ``max_depth`` levels
        under each (0: all; deeper spans are folded into a "+N nested" count)."""
        print(self.report("tree", max_roots=max_roots, max_depth=max_depth), end="",
              file=file or sys.stdout)

    def print_table(self, *, sort: str = "total", limit: int = 0, file: IO[str] | None = None) -> None:
        print(self.report("table", sort=sort, limit=limit), end="", file=file or sys.stdout)

    def dataframe(self) -> Any:
        """One row per span: trace_id, span_id, parent_span_id, name, category, thread, pid,
        tid, start, end, dur (ns), depth, unfinished, then one column per attribute."""
        return spans_dataframe(self.trace)

    def save(self, path: str | os.PathLike) -> None:
        """Writes the trace: ``.opsight`` (native) or ``.json`` (Chrome trace), by extension."""
        self.trace.write(os.fspath(path))

    def export_chrome_trace(self, path: str | os.PathLike) -> None:
        """Writes a Chrome trace (JSON) for Perfetto UI or chrome://tracing."""
        path = os.fspath(path)
        if not path.endswith(".json"):
            raise ValueError(f"export_chrome_trace: {path!r} must end in .json")
        self.trace.write(path)


# ---- finishers ---------------------------------------------------------------------------
# Integrations that add events of their own to a recording when it stops (ONNX Runtime's
# node-level profile: opsight.onnxruntime). A finisher is called, after the session has
# stopped, with the recording's window (begin_ns, end_ns: CLOCK_MONOTONIC ns, the clock of
# opsight's traces) and returns [(trace, shift_ns)]: traces to append to the recording,
# each with the shift that puts its timestamps on that clock. A finisher that raises is
# reported as a warning; the recording keeps its own spans.
Finisher = Callable[[int, int], "list[tuple[Any, int]]"]
_finishers: list[Finisher] = []


def add_finisher(finisher: Finisher) -> None:
    """Registers ``finisher`` (once); see above."""
    if finisher not in _finishers:
        _finishers.append(finisher)


def remove_finisher(finisher: Finisher) -> None:
    if finisher in _finishers:
        _finishers.remove(finisher)


def _finished_traces(begin_ns: int, end_ns: int) -> list[tuple[Any, int]]:
    traces: list[tuple[Any, int]] = []
    for finisher in list(_finishers):
        try:
            traces += finisher(begin_ns, end_ns)
        except Exception as error:  # noqa: BLE001 - an integration never fails the recording
            print(f"opsight: warning: {getattr(finisher, '__qualname__', finisher)} failed: "
                  f"{type(error).__name__}: {error}", file=sys.stderr)
    return traces


def merge_finished_traces(trace: Any, begin_ns: int, end_ns: int) -> bool:
    """Appends the finishers' traces to ``trace``; returns whether there were any."""
    traces = _finished_traces(begin_ns, end_ns)
    for other, shift_ns in traces:
        trace.append(other, shift_ns)
    return bool(traces)


def merge_finished_traces_into_file(path: str, begin_ns: int, end_ns: int) -> None:
    """The same for a session that wrote its file (``OPSIGHT_OUTPUT``, ``opsight run``): the
    file is read, merged and written again only when a finisher has something."""
    traces = _finished_traces(begin_ns, end_ns)
    if not traces:
        return
    try:
        trace = _native.read_trace(path)
        for other, shift_ns in traces:
            trace.append(other, shift_ns)
        trace.write(path)
    except (OSError, RuntimeError, ValueError) as error:
        print(f"opsight: warning: {path}: could not add the integrations' events: {error}",
              file=sys.stderr)


def spans_dataframe(trace: Any) -> Any:
    """A pandas DataFrame of a trace's spans (see :meth:`Profile.dataframe`)."""
    try:
        import pandas
    except ImportError as error:  # pragma: no cover - depends on the environment
        raise ImportError("opsight: dataframe() needs pandas (pip install pandas)") from error
    columns = trace.slice_columns(metric_columns=True)  # metrics: float columns, NaN if absent
    attributes = columns.pop("attributes")
    trace_id = columns.pop("trace_id")
    frame = pandas.DataFrame(columns)
    frame.insert(0, "trace_id", trace_id)
    for key, values in attributes.items():
        frame[key if key not in frame.columns else f"attribute.{key}"] = values
    return frame


def profile(output: str | os.PathLike | None = None, **options: Any) -> Profile:
    """``with opsight.profile() as prof:`` records the block; see :class:`Profile`."""
    return Profile(output, **options)
