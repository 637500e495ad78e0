"""Tracing an unchanged Python program from the environment.

``OPSIGHT_OUTPUT=trace.json python app.py``: the package installs ``opsight_startup.pth``,
which imports this module at interpreter start-up when ``OPSIGHT_OUTPUT`` is set. It then

* starts a recording session into ``OPSIGHT_OUTPUT`` (``%p`` becomes the pid; a child
  process of a traced process writes ``<stem>.<pid><ext>``, never its parent's file);
* installs the targets of ``OPSIGHT_TARGETS`` (a targets file) if set;
* stops the session and writes the file at exit; reports targets that never resolved;
* follows ``os.fork()`` (multiprocessing's fork start method included): the child starts
  its own session into its own file;
* publishes its state for ``opsight ctl`` (see ``_control``);
* in multiprocessing's child processes, which a pool ends with SIGTERM (no atexit), writes
  the file before dying of the signal, if the program left SIGTERM's default action.

``opsight run`` sets these variables for the program it starts (and ``OPSIGHT_RUN_DIR``,
where unresolved targets are written for it to report). Nothing here may break the
program: every problem is one line on stderr and the program runs on, untraced if need be.
"""

from __future__ import annotations

import atexit
import json
import os
import re
import sys
import threading


def _is_opsight_command() -> bool:
    """The opsight CLI itself (``opsight ...``, ``python -m opsight ...``) is not traced."""
    argv = getattr(sys, "orig_argv", None) or sys.argv
    if argv and os.path.basename(argv[0]) == "opsight":
        return True
    for index, argument in enumerate(argv[:-1]):
        if argument == "-m" and argv[index + 1] in ("opsight", "opsight.cli", "opsight._cli"):
            return True
    return False


def _environment_integer(name: str, default: int, lowest: int, highest: int) -> int:
    """The integer in environment variable ``name``, or ``default`` (with a warning if the
    variable holds anything but an integer from ``lowest`` to ``highest``)."""
    text = os.environ.get(name)
    if not text:
        return default
    try:
        value = int(text)
        if lowest <= value <= highest:
            return value
    except ValueError:
        pass
    print(f"opsight: ignoring {name}={text} (not an integer from {lowest} to {highest})",
          file=sys.stderr)
    return default


def output_path_for_this_process(path: str) -> str:
    """``OPSIGHT_OUTPUT`` for this process (the rules of the C++ library's env activation)."""
    pid = str(os.getpid())
    if "%p" in path:
        return path.replace("%p", pid)
    owner = os.environ.get("OPSIGHT_OUTPUT_OWNER")
    if owner is not None and owner != pid:
        directory, name = os.path.split(path)
        stem, extension = os.path.splitext(name)
        return os.path.join(directory, f"{stem}.{pid}{extension}")
    return path


def _is_multiprocessing_helper() -> bool:
    """multiprocessing's resource tracker, a helper process of the standard library that the
    program did not ask for: it runs no code of the program and outlives it a moment, so a
    trace of it would be empty, and cut short when ``opsight run`` reads it."""
    argv = getattr(sys, "orig_argv", None) or sys.argv
    return any(argument.startswith("from multiprocessing.resource_tracker import")
               for argument in argv)


def _is_spawned_multiprocessing_child() -> bool:
    return "--multiprocessing-fork" in (getattr(sys, "orig_argv", None) or sys.argv)


class _Activation:
    def __init__(self) -> None:
        self.recording = None  # the running lifecycle.Recording
        self.watcher = None
        self.finished = False
        self.finish_lock = threading.Lock()  # one finish() at a time (exit path, SIGTERM)
        self.main_in_finish = False  # the main thread is inside finish()
        self.starting = False  # inside start_session(): the native session may exist already
        self.pending_signal = None  # a SIGTERM that interrupted either of them
        self.termination_handler = None  # see finish_on_termination
        self.termination_pipe = None

    def start_session(self) -> bool:
        """Starts the session. A SIGTERM that comes meanwhile (a pool ending a worker that
        is still starting) waits until the session is known, so that finish() writes the
        file whole before the process dies of it: between the native session's start and
        the line that keeps it, finish() would find no session and leave its file cut."""
        self.starting = True
        try:
            return self._start_session()
        finally:
            self.starting = False
            if self.pending_signal is not None:
                self.finish()  # dies of the signal once the file is written

    def _start_session(self) -> bool:
        from .lifecycle import Recording, RecordingError

        path = output_path_for_this_process(os.environ["OPSIGHT_OUTPUT"])
        from .export import target_problem, targets_from_environment

        # OPSIGHT_EXPORT is checked now, not when the program ends: an unchanged program is
        # not stopped for it, but it hears at once that nothing will reach that target.
        problem = target_problem(targets_from_environment())
        if problem:
            print(f"opsight: OPSIGHT_EXPORT: {problem} (this target will fail at exit)",
                  file=sys.stderr)
        # This process records here: a libopsight.so the CUDA driver loads later as its
        # injection library (CUDA_INJECTION64_PATH, inherited from `opsight run`) leaves it be.
        os.environ["OPSIGHT_SESSION_PID"] = str(os.getpid())
        from . import preset

        preset.apply_from_environment(os.environ)  # OPSIGHT_PRESET: its defaults
        buffer_mb = _environment_integer("OPSIGHT_BUFFER_MB", 64, 1, 1 << 20)
        sample_ms = _environment_integer("OPSIGHT_SAMPLE_MS", 0, 0, 3_600_000)
        metrics = [name for name in re.split(r"[,;\s]+", os.environ.get("OPSIGHT_METRICS", ""))
                   if name]
        from .sampling import from_environment

        from .flight_recorder import from_environment as ring_from_environment

        from .sampling import scope_from_environment

        sample_rate, sample_root = from_environment()
        operators_only = scope_from_environment()
        ring = ring_from_environment()
        try:
            recording = Recording.start(path, buffer_mb=buffer_mb, sample_ms=sample_ms,
                                        metrics=metrics, sample_rate=sample_rate,
                                        sample_root=sample_root, ring=ring,
                                        sample_operators_only=operators_only)
        except ValueError as error:  # an unknown metric: record without the metrics
            print(f"opsight: ignoring OPSIGHT_METRICS: {error}", file=sys.stderr)
            try:
                recording = Recording.start(path, buffer_mb=buffer_mb, sample_ms=sample_ms,
                                            sample_rate=sample_rate, sample_root=sample_root,
                                            ring=ring, sample_operators_only=operators_only)
            except RecordingError as start_error:
                print(f"opsight: OPSIGHT_OUTPUT: {start_error}", file=sys.stderr)
                return False
        except RecordingError as error:
            print(f"opsight: OPSIGHT_OUTPUT: {error}", file=sys.stderr)
            return False
        self.recording = recording
        self.finished = False
        return True

    def install_targets(self) -> None:
        from .._capture import instrument
        from ..targets import TargetsError, load_targets

        path = os.environ.get("OPSIGHT_TARGETS")
        if not path:
            return
        try:
            targets = load_targets(path)
        except (TargetsError, OSError) as error:
            print(f"opsight: OPSIGHT_TARGETS: {error} (nothing traced from it)", file=sys.stderr)
            return
        aliases = [alias for alias in os.environ.get("OPSIGHT_MAIN_ALIASES", "").split(",") if alias]
        instrumenter = instrument.Instrumenter(targets, main_aliases=aliases)
        instrumenter.install()
        instrument.installed = instrumenter
        if _is_spawned_multiprocessing_child():
            self._wrap_main_when_prepared(instrumenter)

    @staticmethod
    def _wrap_main_when_prepared(instrumenter) -> None:
        """A spawned multiprocessing child runs the parent's main script again, as
        ``__mp_main__``, with runpy rather than an import (so the import hook never sees
        it), inside ``multiprocessing.spawn.prepare``; the functions it unpickles by
        reference (``__main__.task``) come from there. A script runs through
        opsight._capture.script instead (its targets wrapped as they are defined, as in the
        parent); a module (``-m``) has its targets wrapped once it is prepared."""
        import multiprocessing.spawn as spawn

        prepare = spawn.prepare

        def prepare_then_wrap(data):
            path = data.get("init_main_from_path")
            if path is not None and "init_main_from_name" not in data:
                from .._capture.script import run_script_in_spawned_child

                prepare({key: value for key, value in data.items()
                         if key != "init_main_from_path"})
                run_script_in_spawned_child(path, spawn)
                return
            prepare(data)
            main = sys.modules.get("__main__")
            if main is not None and main.__name__ == "__mp_main__":
                instrumenter.apply_to_module(main, "__main__")

        spawn.prepare = prepare_then_wrap

    def start_control(self) -> None:
        import opsight._native as _native
        from .control import ControlWatcher
        from .live_control import live_control

        self.watcher = ControlWatcher(live_control.apply_switch, live_control.apply_request_budget)
        self.watcher.start(_native.tracing_enabled())

    def finish(self) -> None:
        """At exit: unresolved targets, then the session's file. Once, from whichever thread
        comes first (the exit path, or SIGTERM's, see finish_on_termination); another one
        waits until the file is written."""
        on_main_thread = threading.current_thread() is threading.main_thread()
        if on_main_thread:
            self.main_in_finish = True
        try:
            with self.finish_lock:
                if self.finished:
                    return
                if self.starting:
                    return  # the SIGTERM watcher, early: start_session() finishes when done
                self.finished = True
                self._finish()
        finally:
            if on_main_thread:
                self.main_in_finish = False
                if self.pending_signal is not None:  # see finish_on_termination
                    _die_of(self.pending_signal)

    def _finish(self) -> None:
        from .._capture import instrument
        from .lifecycle import RecordingError

        if self.watcher is not None:
            self.watcher.stop()
        instrumenter = instrument.installed
        if instrumenter is not None:
            self._report_unresolved(instrumenter)
        recording, self.recording = self.recording, None
        if recording is None:
            return
        from .export import export_trace, targets_from_environment

        targets = targets_from_environment()  # OPSIGHT_EXPORT (docs/export.md)
        targets += [target for target in self._targets_file_exports() if target not in targets]
        try:
            trace = recording.stop(keep_trace=bool(targets), drops_hint="raise OPSIGHT_BUFFER_MB")
        except RecordingError as error:
            print(f"opsight: {error}", file=sys.stderr)
            return
        if targets and trace is not None:
            # Bounded: a process ending (SIGTERM included) never waits long on a server
            # (OPSIGHT_EXPORT_TIMEOUT seconds, default 10).
            export_trace(trace, targets, prefix="opsight", timeout_s=_export_timeout())

    @staticmethod
    def _targets_file_exports() -> list[str]:
        """OPSIGHT_TARGETS's export: section, for a program run unchanged. Not under
        ``opsight run``, which exports the merged run itself (its processes must not)."""
        path = os.environ.get("OPSIGHT_TARGETS")
        if not path or os.environ.get("OPSIGHT_RUN_DIR"):
            return []
        from ..targets import TargetsError, load_export_targets

        try:
            return load_export_targets(path)
        except (TargetsError, OSError) as error:
            print(f"opsight: OPSIGHT_TARGETS: export: {error} (nothing exported from it)",
                  file=sys.stderr)
            return []

    @staticmethod
    def _report_unresolved(instrumenter) -> None:
        unresolved = instrumenter.unresolved()
        run_directory = os.environ.get("OPSIGHT_RUN_DIR")
        if run_directory:  # opsight run reports them, over all processes of the run
            resolved = [state.target.source for state in instrumenter._states if state.matches]
            record = {
                "pid": os.getpid(),
                "resolved": resolved,
                "unresolved": [{"source": target.source, "reason": reason}
                               for target, reason in unresolved],
            }
            try:
                with open(os.path.join(run_directory, f"targets.{os.getpid()}.json"), "w") as file:
                    json.dump(record, file)
            except OSError:
                pass
            return
        if os.environ.get("OPSIGHT_OUTPUT_OWNER", str(os.getpid())) != str(os.getpid()):
            return  # reported once, by the process the user started
        for target, reason in unresolved:
            print(f"opsight: target never resolved: {target.source}: {reason}", file=sys.stderr)

    def after_fork_in_child(self) -> None:
        """A forked child records into its own file (the recorder stopped at fork)."""
        from . import state as _session_state

        self.recording = None
        _session_state.session = None
        self.finish_lock = threading.Lock()  # another thread may have held it at the fork
        self.main_in_finish = False
        self.starting = False
        self.pending_signal = None
        if "multiprocessing" in sys.modules:
            # before the session starts: a SIGTERM in between would leave a cut file
            self.finish_on_termination()
        if not self.start_session():
            return
        if self.watcher is not None:
            self.start_control()
        if "multiprocessing" in sys.modules:  # its children leave with os._exit, no atexit
            import multiprocessing.util

            # A multiprocessing child clears the finalizers it inherited after this hook
            # runs, then runs its after-fork callbacks: register the finalizer from there.
            multiprocessing.util.register_after_fork(self, _Activation._finish_at_exit)

    def _finish_at_exit(self) -> None:
        import multiprocessing.util

        multiprocessing.util.Finalize(None, self.finish, exitpriority=0)

    def finish_on_termination(self) -> None:
        """Pools end their workers with SIGTERM (no atexit): write the file, then die of the
        signal as the program would have (only where SIGTERM still has its default action).

        A Python signal handler alone is not enough: it runs on the main thread between
        bytecodes, and a worker that got the signal just before blocking on its task queue's
        semaphore would never run it, and never die, and the pool's parent would wait for it
        forever. So the handler is paired with a wake-up file descriptor
        (signal.set_wakeup_fd: written by the C-level handler the moment the signal comes,
        on any thread) watched by a thread that writes the file itself and then makes the
        main thread die of the signal (or, if even that cannot reach it, ends the process).
        Where the program has a wake-up descriptor of its own, nothing is installed: its
        workers then die as they would untraced, cutting their file short."""
        import signal

        if threading.current_thread() is not threading.main_thread():
            return
        current = signal.getsignal(signal.SIGTERM)
        if current is not signal.SIG_DFL and current is not self.termination_handler:
            return  # the program's own handler
        if self.termination_pipe is not None:  # inherited through fork: the parent's pipe
            for descriptor in self.termination_pipe:
                try:
                    os.close(descriptor)
                except OSError:
                    pass
            self.termination_pipe = None
            signal.set_wakeup_fd(-1)
        read_end, write_end = os.pipe()
        os.set_blocking(write_end, False)
        previous = signal.set_wakeup_fd(write_end, warn_on_full_buffer=False)
        if previous != -1:  # the program watches signals itself: leave it be
            signal.set_wakeup_fd(previous)
            os.close(read_end)
            os.close(write_end)
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            return
        self.termination_pipe = (read_end, write_end)

        def finish_then_die(number, frame):
            if self.main_in_finish or self.starting:
                # The worker was already leaving (a pool sends SIGTERM to workers that have
                # not exited yet) and this handler interrupted finish(), or it is still
                # starting: dying now would cut the file. finish(), or start_session()
                # once the session is kept, dies of the signal when the file is written.
                self.pending_signal = number
                return
            signal.signal(number, signal.SIG_IGN)  # a second SIGTERM must not cut the write
            try:
                self.finish()
            finally:
                _die_of(number)

        self.termination_handler = finish_then_die
        signal.signal(signal.SIGTERM, finish_then_die)
        main_thread = threading.main_thread().ident
        threading.Thread(target=self._watch_termination, args=(read_end, main_thread),
                         name="opsight-sigterm", daemon=True).start()

    def _watch_termination(self, read_end: int, main_thread: int) -> None:
        import signal
        import time

        while True:
            try:
                received = os.read(read_end, 64)
            except OSError:
                return
            if not received:
                return
            if signal.SIGTERM not in received:
                continue
            if signal.getsignal(signal.SIGTERM) is not self.termination_handler:
                # The program installed its own handler since: SIGTERM is its business.
                # It runs that handler as it would untraced; atexit still writes the file.
                continue
            self.finish()  # at once, or after the main thread's own finish()
            for _ in range(30):  # its handler dies of the signal (a wait it blocks in
                try:  # returns EINTR); sent again in case it came just before that wait
                    signal.pthread_kill(main_thread, signal.SIGTERM)
                except (OSError, ValueError):
                    break
                time.sleep(0.1)
            os._exit(128 + signal.SIGTERM)  # it could not be reached: end the process


def _die_of(number: int) -> None:
    """Ends the process by signal ``number`` with its default action, as it would have."""
    import signal

    signal.signal(number, signal.SIG_DFL)
    os.kill(os.getpid(), number)


_activation = _Activation()


def activate() -> None:
    if (_is_opsight_command() or not os.environ.get("OPSIGHT_OUTPUT")
            or _is_multiprocessing_helper()):
        return
    os.environ.setdefault("OPSIGHT_OUTPUT_OWNER", str(os.getpid()))
    try:
        if _is_spawned_multiprocessing_child():  # a pool may end it with SIGTERM at any time,
            _activation.finish_on_termination()  # even before its session starts
        if not _activation.start_session():
            return
        _activation.install_targets()
        _activation.start_control()
    except Exception as error:  # never break the program being traced
        print(f"opsight: start-up failed: {type(error).__name__}: {error}", file=sys.stderr)
        return
    atexit.register(_activation.finish)
    os.register_at_fork(after_in_child=_activation.after_fork_in_child)


activate()


def _export_timeout() -> float:
    """OPSIGHT_EXPORT_TIMEOUT: how long, in seconds, a process may spend exporting at exit
    (default 10; a bad value is a warning and keeps 10)."""
    text = os.environ.get("OPSIGHT_EXPORT_TIMEOUT", "").strip()
    if not text:
        return 10.0
    try:
        seconds = float(text)
        if not 0 < seconds <= 86400:
            raise ValueError
    except ValueError:
        print(f"opsight: ignoring OPSIGHT_EXPORT_TIMEOUT={text!r} (seconds, 0 < s <= 86400): "
              "10 s", file=sys.stderr)
        return 10.0
    return seconds
