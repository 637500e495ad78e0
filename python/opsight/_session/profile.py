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

import os
import sys
from typing import Any

from . import state as _session_state
from .lifecycle import Recording, RecordingError
from .._capture.metrics import parse_metrics, push_session_metrics, restore_session_metrics
from .._results import TraceAnalyses
from .._capture.span import Span
from .export import export_trace, parse_targets, target_problem, targets_from_environment
from .sampling import from_environment as sampling_from_environment
from .flight_recorder import RingOptions
from .flight_recorder import from_environment as ring_from_environment
from .sampling import parse_sample_rate, parse_sample_root, parse_sample_scope
from .sampling import scope_from_environment


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
        export: str | list[str] | tuple[str, ...] | None = None,
        sample: float | str | None = None,
        sample_root: str | None = None,
        sample_scope: str | None = None,
        cuda: bool | None = None,
        ring: str | None = None,
        dump_on_slow: str = "",
        dump_prefix: str | os.PathLike | None = None,
        dump_on_exception: bool = True,
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
        # Sampling by unit (_session/sampling.py): the share of the units (root spans, or
        # spans named sample_root) recorded; None records every one (OPSIGHT_SAMPLE when
        # given and this is None).
        if sample is None:
            self.sample_rate, self.sample_root = sampling_from_environment()
            if sample_root is not None:
                self.sample_root = parse_sample_root(sample_root, "opsight.profile: sample_root")
        else:
            self.sample_rate = parse_sample_rate(sample, "opsight.profile: sample")
            self.sample_root = parse_sample_root(sample_root, "opsight.profile: sample_root")
        # "operators": a unit sampled out keeps its spans, only its torch operators are left
        # out (OPSIGHT_SAMPLE_SCOPE when None).
        self.sample_operators_only = (scope_from_environment() if sample_scope is None else
                                      parse_sample_scope(sample_scope,
                                                         "opsight.profile: sample_scope"))
        # Where the trace goes when the profile stops (docs/export.md): "otlp=URL",
        # "zipkin=URL", "pushgateway=URL", ... (OPSIGHT_EXPORT when not given).
        self.export_targets = parse_targets(export) if export is not None else targets_from_environment()
        if export is not None:  # checked now, not when the profile stops
            problem = target_problem(self.export_targets)
            if problem:
                raise ValueError(f"opsight.profile: export: {problem}")
        #: One report per export target ({"target", "sent", "dropped", "error", ...}).
        self.export_reports: list[dict[str, Any]] = []
        self._previous_metrics: Any = None
        # GPU tracing (docs/gpu.md): True/False, or None to decide at start (OPSIGHT_CUDA,
        # else on when torch has initialised CUDA); checked here so a bad value fails early.
        if cuda is not None and not isinstance(cuda, bool):
            raise ValueError(f"opsight.profile: cuda must be True, False or None, got {cuda!r}")
        self.cuda = cuda
        # Flight recorder (docs/production.md): keep only the last `ring` ("60s", "256MiB")
        # in memory until a dump; None: OPSIGHT_RING when set, else off.
        if ring is None:
            self.ring = ring_from_environment()
        elif not isinstance(ring, str):
            raise ValueError(f"opsight.profile: ring must be a string like '60s', got {ring!r}")
        else:
            self.ring = RingOptions(ring=ring,
                                    dump_prefix=os.fspath(dump_prefix) if dump_prefix else "",
                                    dump_on_slow=dump_on_slow,
                                    dump_on_exception=bool(dump_on_exception))
        self.label = label
        self._recording: Recording | None = None
        self._trace: Any = None
        self._outer_span: Span | None = None

    # ---- recording ----------------------------------------------------------------------
    def start(self) -> "Profile":
        if self._recording is not None or self._outer_span is not None:
            raise RuntimeError("opsight.profile: already started")
        if _session_state.session is not None:
            self._outer_span = Span(self.label, category="record")
            self._outer_span.__enter__()
            self._apply_metrics()
            return self
        try:
            self._recording = Recording.start(
                self.output, buffer_mb=self.buffer_mb, flush_interval_ms=self.flush_interval_ms,
                sample_ms=self.sample_ms, metrics=self.metric_names,
                sample_rate=self.sample_rate, sample_root=self.sample_root, cuda=self.cuda,
                ring=self.ring, sample_operators_only=self.sample_operators_only)
        except (RecordingError, ValueError) as error:
            raise RuntimeError(f"opsight.profile: {error}") from None
        return self

    def _apply_metrics(self) -> None:
        """Makes every traced call measure this profile's metrics until it stops."""
        if self.metric_names:
            self._previous_metrics = push_session_metrics(self.metric_names)

    def _restore_metrics(self) -> None:
        if self._previous_metrics is not None:
            restore_session_metrics(self._previous_metrics)
            self._previous_metrics = None

    def stop(self) -> None:
        if self._outer_span is not None:
            self._restore_metrics()
            self._outer_span.__exit__(None, None, None)
            return
        if self._recording is None or self._trace is not None:
            return
        recording, self._recording = self._recording, None
        try:
            self._trace = recording.stop(keep_trace=True, drops_hint="raise buffer_mb")
        except RecordingError as error:
            raise RuntimeError(f"opsight.profile: {error}") from None
        if self.export_targets:
            self.export_reports = export_trace(self._trace, self.export_targets,
                                               prefix="opsight.profile")
        if self.store:
            try:
                self._save_to_store()
            except Exception as error:  # noqa: BLE001 - saving is a warning, never a failure
                print(f"opsight.profile: warning: the run was not saved in the run store: "
                      f"{type(error).__name__}: {error}", file=sys.stderr)

    def _save_to_store(self) -> None:
        """Saves the trace as a run of the store; a failure is a warning on stderr. A
        profile inside an already running session (``opsight run``) has no trace of its own
        to save: that session's run holds its spans."""
        import shlex

        from .._store import save_run

        script = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else ""
        name = self.name or (self.label if self.label != "opsight.profile" else script or self.label)
        command = shlex.join(getattr(sys, "orig_argv", None) or [sys.executable, *sys.argv])
        store = None if self.store is True else os.fspath(self.store)
        self.saved_run = save_run(trace=self._trace, name=name, tags=self.tags, command=command,
                                  store=store, prefix="opsight.profile")

    def __enter__(self) -> "Profile":
        return self.start()

    def __exit__(self, *exc_info: Any) -> None:
        self.stop()

    def pause(self) -> None:
        """Stops recording new spans until :meth:`resume` (open spans still end)."""
        if self._recording is not None:
            self._recording.native_session.pause()

    def resume(self) -> None:
        if self._recording is not None:
            self._recording.native_session.resume()

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


def profile(output: str | os.PathLike | None = None, **options: Any) -> Profile:
    """``with opsight.profile() as prof:`` records the block; see :class:`Profile`."""
    return Profile(output, **options)
