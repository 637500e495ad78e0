"""``opsight.onnxruntime``: ONNX Runtime's own node-level profile, on opsight's timeline.

Inside any opsight session (``opsight.profile()``, ``OPSIGHT_OUTPUT``, ``opsight run``),
as soon as the program has imported onnxruntime, ``onnxruntime.InferenceSession`` is
instrumented, as torch is traced, until the session stops (``OPSIGHT_ONNXRUNTIME=off``
leaves it alone). ``instrument()`` (or ``with instrumented():``, or a targets entry naming
``onnxruntime.InferenceSession.run``) does it for the process, session or not. Instrumented,
``onnxruntime.InferenceSession`` is patched so that

* each ``run``, ``run_with_iobinding`` and ``run_with_ort_values`` call records an opsight
  span ``onnxruntime.run <model>`` (category ``session``) on the calling thread;
* each session created while instrumented has ONNX Runtime's profiler switched on
  (``SessionOptions.enable_profiling``, its file in a temporary folder). A user's own
  ``SessionOptions`` object is used as given and put back as it was once the session is
  created (ONNX Runtime copies the options into the session); a user who enabled profiling
  keeps their own prefix and file;
* when the recording stops (``opsight.profile``, ``OPSIGHT_OUTPUT``, ``opsight run``), the
  profile of every instrumented session that ran during it is ended
  (``end_profiling()``), read with opsight's Chrome JSON reader (ORT's categories become
  opsight's: ``Session`` -> ``session``, ``Node`` ``*_kernel_time`` -> ``operator``...), put
  on the recording's clock and merged into the trace: ``model_run``,
  ``SequentialExecutor::Execute`` and each node's ``*_kernel_time`` (with ``op_name``,
  ``provider``, input and output shapes) nest under the ``onnxruntime.run`` span of the call
  that ran them.

Clocks. ORT's events count microseconds from ``get_profiling_start_time_ns()``, a wall-clock
(Unix) time on Linux; opsight's traces are on CLOCK_MONOTONIC. The shift is the session's
profiling start minus (wall - monotonic) measured next to it, then refined: each
``model_run`` must lie inside the monotonic interval its ``run`` call measured, and the
smallest correction that puts every one inside is applied (see :func:`alignments`).

Every recording. ORT switches a session's profiler on only when the session is created
(``SessionOptions.enable_profiling``; its Python API has no ``start_profiling``), keeps the
events in memory and writes them only at ``end_profiling()``, after which the profiler is
off for good. So a session whose profiler is off when it first runs in a recording (its
profile went to an earlier recording, or it was created before ``instrument()``) gets a
fresh native half: opsight creates a new ``InferenceSession`` from the same model, options
(profiling on), providers and provider options, exactly as ORT's own ``set_providers()``
re-creates a session, and swaps it in. That costs one model load (shown as a span
``onnxruntime.enable_profiling <model>``, category ``profiler``, before the run that needed
it) and, while it lasts, the memory of a second copy of the session. It is not done, and a
warning naming the model says why, when something else holds the native session (an
``IOBinding``, a run in flight on another thread, the program itself through ``_sess``:
swapping would leave it on the old one), when CUDA graphs were captured, or when the model
cannot be loaded again (its file is gone); those runs get the ``run`` spans only.
``instrument(recreate_sessions=False)`` switches the re-creation off (a warning then says
which sessions lack node events). ``disabled_optimizers`` given to the first creation are
not known to opsight and not passed again (``set_providers`` loses them too).

Limits: ORT keeps at most a million events per session (then stops recording nodes, with a
warning of its own); a session created while instrumented profiles from its creation, also
between recordings, until a recording in which it ran ends (only the recording's window is
merged).

Nothing here raises into the traced program: a missing or damaged profile is one warning
naming the file, and the opsight spans stay.

Thread-safety: instrument/uninstrument under the GIL; the wrappers run on any thread.
"""

from __future__ import annotations

import bisect
import contextlib
import glob
import os
import sys
import tempfile
import threading
import time
import weakref
from typing import Any, Iterator

from . import _native
from ._capture.wrapping import name_id
from ._session import integrations

__all__ = ["instrument", "uninstrument", "instrumented", "is_instrumented", "alignments",
           "RUN_METHODS"]

#: The InferenceSession methods that get a span.
RUN_METHODS = ("run", "run_with_iobinding", "run_with_ort_values")
#: The span category of the run spans (src/trace/categories.hpp: a phase of a session).
CATEGORY = "session"
# Calls kept per session to align ORT's clock (3 integers each); later calls are not needed.
_MAX_CALLS_KEPT = 10_000

_lock = threading.RLock()
_patches: list[tuple[Any, str, Any, bool]] = []  # (owner, attribute, original, had_it)
_span_name_override: str | None = None
_sessions: list["_SessionRecord"] = []  # sessions whose ORT profile is still to be merged
_last_alignments: list[dict[str, Any]] = []
_directory: str | None = None
_session_count = 0
# Whether the instrumentation is the running session's (OnnxRuntimeIntegration: undone when
# it stops) rather than the program's own (instrument(), instrumented(), a targets entry).
_for_session_only = False
# Counts the recordings started (on_start): a session's first run in a new one checks that
# its profiler is on.
_recording_number = 0
_recreate_sessions = True


def _wall_minus_monotonic() -> int:
    """time.time_ns() - time.monotonic_ns(), from the narrowest of a few bracketed reads."""
    best_width, best = None, 0
    for _ in range(5):
        before = time.monotonic_ns()
        wall = time.time_ns()
        after = time.monotonic_ns()
        if best_width is None or after - before < best_width:
            best_width, best = after - before, wall - (before + after) // 2
    return best


class _SessionRecord:
    """What opsight knows of one InferenceSession: its span names and, when its ORT
    profile is opsight's to merge, where that profile is and the calls that align it."""

    __slots__ = ("session", "label", "model", "name_ids", "prefix", "profiling_start_ns",
                 "wall_minus_monotonic", "owns_file", "ended_path", "calls", "profiling",
                 "recording_number", "restart_lock", "__weakref__")

    def __init__(self, session: Any) -> None:
        self.session = weakref.ref(session)
        self.model = _model_name(session)
        self.label = os.path.splitext(os.path.basename(self.model))[0] or "model"
        self.name_ids: dict[str, int] = {}
        self.prefix: str | None = None  # set when opsight merges this session's profile
        self.profiling_start_ns = 0
        self.wall_minus_monotonic = 0
        self.owns_file = False  # the profile file is opsight's (deleted once merged)
        self.ended_path: str | None = None  # the program called end_profiling() itself
        self.calls: dict[int, list[tuple[int, int]]] = {}  # native tid -> [(begin, end)]
        self.profiling = False  # ORT's profiler is on and its profile is still to be merged
        self.recording_number = _recording_number  # the last recording it was checked in
        self.restart_lock = threading.Lock()

    def profiling_started(self, session: Any, prefix: str, owns_file: bool) -> None:
        """Notes that ``session``'s profiler is on, writing under ``prefix``, and queues its
        profile for the next recording in which it runs."""
        self.prefix = prefix
        self.owns_file = owns_file
        self.ended_path = None
        self.calls = {}
        self.profiling_start_ns = session.get_profiling_start_time_ns()
        self.wall_minus_monotonic = _wall_minus_monotonic()
        self.profiling = True
        with _lock:
            if self not in _sessions:
                _sessions.append(self)

    def name_id_for(self, method: str) -> int:
        identifier = self.name_ids.get(method)
        if identifier is None:
            verb = "run" if method == "run" else method
            name = _span_name_override or f"onnxruntime.{verb} {self.label}"
            identifier = self.name_ids[method] = name_id(name, CATEGORY)
        return identifier

    def note_call(self, begin_ns: int, end_ns: int) -> None:
        tid = _native_thread_id()
        calls = self.calls.get(tid)
        if calls is None:
            calls = self.calls[tid] = []
        if len(calls) < _MAX_CALLS_KEPT:
            calls.append((begin_ns, end_ns))


# threading.get_native_id() is a system call (about 1 µs on a VM): once per thread.
_thread_ids = threading.local()


def _native_thread_id() -> int:
    try:
        return _thread_ids.value
    except AttributeError:
        value = _thread_ids.value = threading.get_native_id()
        return value


def _forget_thread_ids_in_child() -> None:
    global _thread_ids
    _thread_ids = threading.local()


os.register_at_fork(after_in_child=_forget_thread_ids_in_child)


def _model_name(session: Any) -> str:
    path = getattr(session, "_model_path", None)
    if isinstance(path, (str, os.PathLike)):
        return os.fspath(path)
    try:
        return session.get_modelmeta().graph_name or "model"
    except Exception:  # noqa: BLE001 - a name is a nicety
        return "model"


def _record_of(session: Any) -> _SessionRecord:
    record = session.__dict__.get("_opsight_onnxruntime")
    if record is None:  # created before instrument()
        record = session.__dict__["_opsight_onnxruntime"] = _SessionRecord(session)
        record.recording_number = -1  # checked at its first run in a recording
        try:  # the program switched ORT's profiler on itself: its profile is merged
            options = session.get_session_options()
            if options.enable_profiling and session.get_profiling_start_time_ns():
                record.profiling_started(session, options.profile_file_prefix, False)
        except Exception:  # noqa: BLE001 - then it is re-created if it runs in a recording
            pass
    return record


def _new_prefix() -> str:
    global _session_count
    with _lock:
        _session_count += 1
        return os.path.join(_profile_directory(), f"session{_session_count}")


def _profile_directory() -> str:
    global _directory
    if _directory is None or not os.path.isdir(_directory):
        _directory = tempfile.mkdtemp(prefix="opsight-onnxruntime-")
    return _directory


# ---- the wrappers ----------------------------------------------------------------------------
def _wrap_init(original: Any) -> Any:
    def __init__(self, path_or_bytes, sess_options=None, providers=None, provider_options=None,
                 **kwargs):
        import onnxruntime

        options = sess_options
        restore: tuple[bool, str] | None = None
        prefix = None
        try:
            if options is None:
                options = onnxruntime.SessionOptions()
            if not options.enable_profiling:
                prefix = _new_prefix()
                if options is sess_options:  # the user's object: put back once created
                    restore = (options.enable_profiling, options.profile_file_prefix)
                options.enable_profiling = True
                options.profile_file_prefix = prefix
        except Exception as error:  # noqa: BLE001 - never break session creation
            _warn(f"ONNX Runtime profiling not enabled: {type(error).__name__}: {error}")
            options, prefix, restore = sess_options, None, None
        try:
            original(self, path_or_bytes, options, providers, provider_options, **kwargs)
        finally:
            if restore is not None:
                options.enable_profiling, options.profile_file_prefix = restore
        try:
            record = _record_of(self)
            users_own = prefix is None and sess_options is not None and sess_options.enable_profiling
            if prefix is not None or users_own:
                record.profiling_started(self, prefix or sess_options.profile_file_prefix,
                                         prefix is not None)
        except Exception as error:  # noqa: BLE001
            _warn(f"ONNX Runtime session not registered: {type(error).__name__}: {error}")

    __init__.__wrapped__ = original  # type: ignore[attr-defined]
    return __init__


def _wrap_run(method: str, original: Any) -> Any:
    tracing_enabled, begin, monotonic_ns = _native.tracing_enabled, _native.begin, time.monotonic_ns

    def run(self, *args, **kwargs):
        record = self.__dict__.get("_opsight_onnxruntime") or _record_of(self)
        identifier = record.name_ids.get(method) or record.name_id_for(method)
        if not tracing_enabled():
            return original(self, *args, **kwargs)
        if record.recording_number != _recording_number:
            _first_run_in_recording(self, record)
        if not begin(identifier):
            return original(self, *args, **kwargs)
        try:
            begin_ns = monotonic_ns()  # inside the span: the interval model_run must fit in
            try:
                return original(self, *args, **kwargs)
            finally:
                record.note_call(begin_ns, monotonic_ns())
        except BaseException as error:
            kind = type(error)
            module = getattr(kind, "__module__", "builtins")
            _native.add_arg("exception.type",
                            kind.__qualname__ if module == "builtins" else f"{module}.{kind.__qualname__}")
            _native.add_arg("exception.message", str(error)[:4096])
            raise
        finally:
            _native.end()

    run.__name__ = run.__qualname__ = method
    run.__doc__ = getattr(original, "__doc__", None)
    run.__wrapped__ = original  # type: ignore[attr-defined]
    return run


def _wrap_end_profiling(original: Any) -> Any:
    def end_profiling(self):
        path = original(self)
        record = self.__dict__.get("_opsight_onnxruntime")
        if record is not None and path and record.profiling:
            record.ended_path = path  # merged at the end all the same, but the program's now
            record.owns_file = False
        return path

    end_profiling.__wrapped__ = original  # type: ignore[attr-defined]
    return end_profiling


def _first_run_in_recording(session: Any, record: _SessionRecord) -> None:
    """The session runs for the first time in this recording: if its profiler is off,
    re-create its native half with the profiler on (or warn why not)."""
    with record.restart_lock:  # a second thread waits: it must not run on the old session
        if record.recording_number == _recording_number:
            return
        try:
            _switch_profiling_on(session, record)
        finally:  # only now: another thread checking meanwhile waits for the lock above
            record.recording_number = _recording_number


def _switch_profiling_on(session: Any, record: _SessionRecord) -> None:
    """Re-creates ``session`` with ORT's profiler on unless it is on; a warning if not."""
    if record.profiling:
        return
    if not _recreate_sessions:
        _warn(f"session of {record.model}: no ONNX Runtime node events in this recording: "
              "its profiler is off (ORT switches it on only when a session is created) and "
              "re-creating sessions is switched off (instrument(recreate_sessions=False))")
        return
    identifier = name_id(f"onnxruntime.enable_profiling {record.label}", "profiler")
    began = _native.begin(identifier)
    try:
        reason = _recreate_with_profiling(session, record)
    except Exception as error:  # noqa: BLE001 - the old session stays as it was
        reason = f"{type(error).__name__}: {error}"
    finally:
        if began:
            _native.end()
    if reason is not None:
        _warn(f"session of {record.model}: no ONNX Runtime node events in this recording: "
              "its profiler is off (ORT switches it on only when a session is created, and "
              f"an ended profile cannot be restarted) and it was not re-created: {reason}")


def _recreate_with_profiling(session: Any, record: _SessionRecord) -> str | None:
    """Creates a new InferenceSession from ``session``'s model, options, providers and
    provider options with ORT's profiler on, and moves its native half into ``session``
    (what ORT's own ``set_providers`` does). Returns why it did not, or None."""
    import onnxruntime

    state = session.__dict__
    if state.get("_captured_graph_bindings"):
        return "it holds captured CUDA graphs"
    old = state.get("_sess")
    if old is None or not ("_model_path" in state and "_model_bytes" in state):
        return f"this ONNX Runtime ({onnxruntime.__version__}) keeps its session differently"
    providers = session.get_providers()
    provider_options = session.get_provider_options()
    options = state.get("_sess_options_initial")
    used = options if options is not None else onnxruntime.SessionOptions()
    saved = (used.enable_profiling, used.profile_file_prefix)
    prefix = _new_prefix()
    used.enable_profiling, used.profile_file_prefix = True, prefix
    session_class = type(session)
    initialize = getattr(session_class.__init__, "__wrapped__", session_class.__init__)
    fresh = session_class.__new__(session_class)
    try:
        initialize(fresh, state["_model_path"] or state["_model_bytes"], used,
                   [(name, dict(provider_options.get(name, {}))) for name in providers],
                   read_config_from_model=int(bool(state.get("_read_config_from_model"))),
                   enable_fallback=int(bool(state.get("_enable_fallback", True))))
    finally:
        used.enable_profiling, used.profile_file_prefix = saved
    if fresh.get_providers() != providers:
        return f"the new session got providers {fresh.get_providers()} instead of {providers}"
    # A fresh session's native half is held by its own attributes only; one more holder on
    # the old one (an IOBinding, a run in flight, the program) would keep using it.
    holders = sys.getrefcount(old) - 1  # less this function's own `old`
    if holders > sys.getrefcount(fresh._sess):
        return ("something else holds its native session (an IOBinding, or a run in flight "
                "on another thread)")
    moved = {key: value for key, value in fresh.__dict__.items() if key != "_opsight_onnxruntime"}
    moved["_sess_options_initial"] = options  # the program's own object (or None), as before
    state.update(moved)  # one step under the GIL: a run sees the old half or the new one
    record.profiling_started(session, prefix, True)
    return None


# ---- switching ---------------------------------------------------------------------------------
def instrument(span_name: str | None = None, *, recreate_sessions: bool = True) -> None:
    """Patches ``onnxruntime.InferenceSession`` (see the module's documentation); calling it
    again does nothing. ``span_name`` replaces the run spans' names (a targets entry's tag).
    ``recreate_sessions=False``: a session whose profiler is off when it runs in a recording
    is not re-created (its runs get spans only, and a warning says so)."""
    global _span_name_override, _recreate_sessions, _for_session_only
    import onnxruntime

    session_class = onnxruntime.InferenceSession
    with _lock:
        _for_session_only = False  # the program's own: it stays after the session
        _recreate_sessions = recreate_sessions
        if span_name is not None:
            _span_name_override = span_name
        if _patches:
            return
        wrappers = {"__init__": _wrap_init, "end_profiling": _wrap_end_profiling}
        wrappers.update({method: (lambda original, method=method: _wrap_run(method, original))
                         for method in RUN_METHODS})
        for attribute, make in wrappers.items():
            original = getattr(session_class, attribute, None)
            if original is None:
                continue
            had_it = attribute in vars(session_class)
            setattr(session_class, attribute, make(original))
            _patches.append((session_class, attribute, original, had_it))


def uninstrument() -> None:
    """Puts InferenceSession back as it was; calling it again does nothing. Sessions created
    while instrumented still have their profile merged when the recording stops."""
    global _span_name_override, _recreate_sessions, _for_session_only
    with _lock:
        _for_session_only = False
        while _patches:
            owner, attribute, original, had_it = _patches.pop()
            if had_it:
                setattr(owner, attribute, original)
            else:
                delattr(owner, attribute)
        _span_name_override = None
        _recreate_sessions = True


def is_instrumented() -> bool:
    return bool(_patches)


@contextlib.contextmanager
def instrumented(span_name: str | None = None) -> Iterator[None]:
    """``with opsight.onnxruntime.instrumented():``: instruments for the block, and
    uninstruments at its end unless it was instrumented before."""
    global _for_session_only
    was, session_only = is_instrumented(), _for_session_only
    instrument(span_name)
    try:
        yield
    finally:
        if not was:
            uninstrument()
        elif session_only:  # the session's instrumentation again, undone when it stops
            _for_session_only = True


def apply_target(module: Any, target: Any) -> bool:
    """A targets entry naming ``InferenceSession`` (or a pattern matching it) and a run
    method, in module ``onnxruntime``: instruments, with the entry's tag as span name.
    Returns whether the entry was taken (otherwise it is wrapped as any other target)."""
    import fnmatch

    if target.class_name is None or not fnmatch.fnmatchcase("InferenceSession", target.class_name):
        return False
    if not any(fnmatch.fnmatchcase(method, target.function) for method in RUN_METHODS):
        return False
    if getattr(module, "InferenceSession", None) is None:
        return False
    instrument(target.tag)
    return True


def onnxruntime_mode() -> str:
    """OPSIGHT_ONNXRUNTIME, normalised: on (the default) or off."""
    return integrations.mode_from_environment("OPSIGHT_ONNXRUNTIME")


class OnnxRuntimeIntegration(integrations.Integration):
    """ONNX Runtime in every recording session (``opsight._session.integrations``): once
    the program has imported onnxruntime, InferenceSession is instrumented until the
    session stops, unless ``OPSIGHT_ONNXRUNTIME=off`` or the program instrumented it itself;
    a targets entry naming ``InferenceSession.run`` instruments it instead of wrapping
    ``run``; the profiles of the instrumented sessions that ran are merged when the
    recording stops."""

    name = "opsight.onnxruntime"

    def __init__(self) -> None:
        self._watch = integrations.ImportWatch(
            self, "onnxruntime", "_activate",
            ready=lambda module: getattr(module, "InferenceSession", None) is not None)

    def on_start(self) -> None:
        global _recording_number
        _recording_number += 1
        if onnxruntime_mode() != "off":
            self._watch.start()

    def on_stop(self) -> None:
        self._watch.stop()
        if _for_session_only:
            uninstrument()  # the sessions that ran still have their profiles merged

    def finished_traces(self, begin_ns: int, end_ns: int) -> list[tuple[Any, int]]:
        return _finish(begin_ns, end_ns)

    def wrap_target(self, module: Any, target: Any) -> bool:
        return module.__name__.split(".")[0] == "onnxruntime" and apply_target(module, target)

    def _activate(self) -> None:
        global _for_session_only
        if is_instrumented():
            return  # the program's own instrumentation, kept as it is
        instrument()
        _for_session_only = True


# ---- merging at the end of a recording ---------------------------------------------------------
_warned: set[str] = set()


def _warn(message: str) -> None:
    if message not in _warned:
        _warned.add(message)
        print(f"opsight.onnxruntime: warning: {message}", file=sys.stderr)


def alignments() -> list[dict[str, Any]]:
    """How the profiles merged by the last recording were aligned, one dict per session:
    ``file``, ``model``, ``model_runs`` (ORT's ``model_run`` events in the recording's
    window), ``matched`` (those
    matched to a recorded ``run`` call), ``contained`` (matched ones inside their call's
    interval after alignment), ``correction_ns`` (the refinement added to the clock-derived
    shift), ``shift_ns`` (the whole shift) and ``clock_drift_ns`` (change of wall minus
    monotonic between session creation and the merge)."""
    return [dict(entry) for entry in _last_alignments]


def _finish(begin_ns: int, end_ns: int) -> list[tuple[Any, int]]:
    """The integration's finished traces: the profiles of the sessions that ran during the
    recording, each with its shift onto CLOCK_MONOTONIC."""
    with _lock:
        due = [record for record in _sessions if record.calls and record.profiling]
        for record in due:
            record.profiling = False  # ended below: a later recording re-creates the session
            _sessions.remove(record)
    _last_alignments.clear()
    traces = []
    for record in due:
        try:
            merged = _profile_of(record, begin_ns, end_ns)
        except Exception as error:  # noqa: BLE001 - never fail the recording
            _warn(f"profile of {record.model} not merged: {type(error).__name__}: {error}")
            continue
        finally:
            record.calls = {}
            record.ended_path = None
        if merged is not None:
            traces.append(merged)
    return traces


def _end_profiling(record: _SessionRecord) -> str | None:
    if record.ended_path:
        return record.ended_path
    session = record.session()
    if session is not None:
        path = session.end_profiling()
        if path:
            return path
    # Destroyed sessions wrote their file themselves; the prefix is unique to the session.
    if record.owns_file and record.prefix:
        found = sorted(glob.glob(glob.escape(record.prefix) + "_*.json"))
        if found:
            return found[-1]
    return None


def _profile_of(record: _SessionRecord, begin_ns: int, end_ns: int) -> tuple[Any, int] | None:
    path = _end_profiling(record)
    if path is None:
        _warn(f"no ONNX Runtime profile file for {record.model} (prefix {record.prefix})")
        return None
    try:
        try:
            profile = _native.read_trace(path)
        except (ValueError, RuntimeError, OSError) as error:
            _warn(f"{path}: ONNX Runtime profile not read ({error}); the opsight spans stay")
            return None
        if profile.damage:
            _warn(f"{path}: ONNX Runtime profile read in part: {profile.damage}")
        drift = _wall_minus_monotonic() - record.wall_minus_monotonic
        wall_minus_monotonic = record.wall_minus_monotonic + drift // 2
        base = record.profiling_start_ns - wall_minus_monotonic
        model_runs = [(tid, start, end) for tid, start, end in profile.slice_times("model_run")
                      if begin_ns <= start + base <= end_ns]
        correction, stats = _alignment(model_runs, record.calls, base)
        shift = base + correction
        profile.keep_time_window(begin_ns - shift, end_ns - shift)
        _last_alignments.append({"file": path, "model": record.model, **stats,
                                 "correction_ns": correction, "shift_ns": shift,
                                 "clock_drift_ns": drift})
        return profile, shift
    finally:
        if record.owns_file:
            with contextlib.suppress(OSError):
                os.remove(path)
            with contextlib.suppress(OSError):
                os.rmdir(os.path.dirname(path))  # only once empty


def _alignment(model_runs: list[tuple[int, int, int]], calls: dict[int, list[tuple[int, int]]],
               base: int) -> tuple[int, dict[str, int]]:
    """The correction to add to ``base`` so that each ``model_run`` (tid, start, end in
    ORT's time) lies inside the monotonic interval of the ``run`` call that caused it: the
    call of the same thread it overlaps most under ``base``. Every match allows corrections
    in [call begin - run start, call end - run end]; where all allow a common one, the one
    nearest 0 is taken, else the median of each match's nearest."""
    begins = {tid: [begin for begin, _ in intervals] for tid, intervals in calls.items()}
    allowed: list[tuple[int, int]] = []
    for tid, start, end in model_runs:
        intervals = calls.get(tid)
        if not intervals:
            continue
        start_mono, end_mono = start + base, end + base
        index = bisect.bisect_right(begins[tid], start_mono) - 1
        best = None
        for candidate in (index - 1, index, index + 1):
            if 0 <= candidate < len(intervals):
                call_begin, call_end = intervals[candidate]
                # the call it overlaps most (a negative overlap is a gap)
                overlap = min(call_end, end_mono) - max(call_begin, start_mono)
                if best is None or overlap > best[0]:
                    best = (overlap, call_begin, call_end)
        if best is not None and best[2] - best[1] >= end_mono - start_mono:
            allowed.append((best[1] - start_mono, best[2] - end_mono))
    correction = 0
    if allowed:
        low = max(low for low, _ in allowed)
        high = min(high for _, high in allowed)
        if low <= high:
            correction = min(max(0, low), high)
        else:
            nearest = sorted(min(max(0, low), high) for low, high in allowed)
            correction = nearest[len(nearest) // 2]
    contained = sum(1 for low, high in allowed if low <= correction <= high)
    return correction, {"model_runs": len(model_runs), "matched": len(allowed),
                        "contained": contained}
