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
import sys


def _is_opsight_command() -> bool:
    """The opsight CLI itself (``opsight ...``, ``python -m opsight ...``) is not traced."""
    argv = getattr(sys, "orig_argv", None) or sys.argv
    if argv and os.path.basename(argv[0]) == "opsight":
        return True
    for index, argument in enumerate(argv[:-1]):
        if argument == "-m" and argv[index + 1] in ("opsight", "opsight.cli"):
            return True
    return False


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
        self.session = None
        self.watcher = None
        self.finished = False
        self.finishing = False  # finish() is writing the file
        self.pending_signal = None  # a SIGTERM that came meanwhile

    def start_session(self) -> bool:
        from . import _native, _session_state

        path = output_path_for_this_process(os.environ["OPSIGHT_OUTPUT"])
        buffer_mb = 64
        if "OPSIGHT_BUFFER_MB" in os.environ:
            try:
                buffer_mb = int(os.environ["OPSIGHT_BUFFER_MB"])
                if not 1 <= buffer_mb <= 1 << 20:
                    raise ValueError
            except ValueError:
                print(f"opsight: ignoring OPSIGHT_BUFFER_MB={os.environ['OPSIGHT_BUFFER_MB']} "
                      "(not an integer from 1 to 1048576)", file=sys.stderr)
                buffer_mb = 64
        session = _native.Session(path, buffer_mb)
        if not session.ok:
            print(f"opsight: OPSIGHT_OUTPUT: {session.error}", file=sys.stderr)
            return False
        self.session = session
        _session_state.session = session
        self.finished = False
        return True

    def install_targets(self) -> None:
        from . import _session_state
        from ._instrument import Instrumenter
        from .targets import TargetsError, load_targets

        path = os.environ.get("OPSIGHT_TARGETS")
        if not path:
            return
        try:
            targets = load_targets(path)
        except (TargetsError, OSError) as error:
            print(f"opsight: OPSIGHT_TARGETS: {error} (nothing traced from it)", file=sys.stderr)
            return
        aliases = [alias for alias in os.environ.get("OPSIGHT_MAIN_ALIASES", "").split(",") if alias]
        instrumenter = Instrumenter(targets, main_aliases=aliases)
        instrumenter.install()
        _session_state.instrumenter = instrumenter
        if _is_spawned_multiprocessing_child():
            self._wrap_main_when_prepared(instrumenter)

    @staticmethod
    def _wrap_main_when_prepared(instrumenter) -> None:
        """A spawned multiprocessing child runs the parent's main script again, as
        ``__mp_main__``, with runpy rather than an import (so the import hook never sees
        it), inside ``multiprocessing.spawn.prepare``; the functions it unpickles by
        reference (``__main__.task``) come from there. A script runs through
        opsight._script instead (its targets wrapped as they are defined, as in the
        parent); a module (``-m``) has its targets wrapped once it is prepared."""
        import multiprocessing.spawn as spawn

        prepare = spawn.prepare

        def prepare_then_wrap(data):
            path = data.get("init_main_from_path")
            if path is not None and "init_main_from_name" not in data:
                from ._script import run_script_in_spawned_child

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
        from . import _native
        from ._control import ControlWatcher
        from ._instrument import set_enabled

        self.watcher = ControlWatcher(set_enabled)
        self.watcher.start(_native.tracing_enabled())

    def finish(self) -> None:
        """At exit: unresolved targets, then the session's file."""
        from . import _session_state

        if self.finished:
            return
        self.finished = True
        self.finishing = True
        try:
            self._finish()
        finally:
            self.finishing = False
            if self.pending_signal is not None:  # see finish_on_termination
                _die_of(self.pending_signal)

    def _finish(self) -> None:
        from . import _session_state

        if self.watcher is not None:
            self.watcher.stop()
        instrumenter = _session_state.instrumenter
        if instrumenter is not None:
            self._report_unresolved(instrumenter)
        session, self.session = self.session, None
        if session is None:
            return
        if _session_state.session is session:
            _session_state.session = None
        if not session.stop():
            print(f"opsight: {session.error}", file=sys.stderr)
        elif session.events_dropped:
            print(f"opsight: {session.events_dropped} events dropped (raise OPSIGHT_BUFFER_MB)",
                  file=sys.stderr)

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
        from . import _session_state

        self.session = None
        _session_state.session = None
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
        """Pools end their workers with SIGTERM: write the file, then die of the signal as
        the program would have (only where SIGTERM still has its default action)."""
        import signal
        import threading

        if threading.current_thread() is not threading.main_thread():
            return
        if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
            return

        def finish_then_die(number, frame):
            if self.finishing:
                # The worker was already leaving (a pool sends SIGTERM to workers that have
                # not exited yet) and this handler interrupted finish(): dying now would cut
                # the file it is writing. finish() dies of the signal when it is done.
                self.pending_signal = number
                return
            signal.signal(number, signal.SIG_IGN)  # a second SIGTERM must not cut the write
            try:
                self.finish()
            finally:
                _die_of(number)

        signal.signal(signal.SIGTERM, finish_then_die)


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
