"""Running models in child processes (:mod:`.child`), forked by a fork server that imported
opsight and torch once (:mod:`.zygote`; a fresh process per model when it cannot start), up
to ``jobs`` at a time, each with a time limit: a model that hangs is killed (its whole
process group) and reported as ``timeout``, one whose process dies as ``crashed`` with the
signal or exit status and the end of its log; the others go on.

Progress (:class:`Progress`): one line per finished model (``[3/7] gpt2 (decoder)  ok  1
graph, 0 breaks  4.1 s``), which reads well in CI logs; on a terminal, a bar under them too
(``[########------------]  3/7  12.4 s  running: t5, whisper``), redrawn as models run.

Thread-safety: :class:`ZooRunner` is used from one thread.
"""

from __future__ import annotations

import json
import os
import signal
import tempfile
import time
from dataclasses import dataclass
from typing import IO, Callable

from .launchers import ForkServerLauncher, ProcessLauncher
from .result import STATUS_CRASHED, STATUS_FAILED, STATUS_TIMEOUT, ModelExplain


@dataclass
class ModelSpec:
    """A model to explain: its TARGET, the name and family it is reported under, its time
    limit in seconds."""
    name: str
    target: str
    family: str = ""
    timeout_s: float = 600.0


@dataclass
class _Running:
    spec: ModelSpec
    process: object  # what the launcher started: a Popen, or a pid of the fork server
    started: float
    result_path: str
    log_path: str
    trace_path: str


def _log_tail(path: str, lines: int = 6) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as file:
            text = file.read()[-4000:]
    except OSError:
        return ""
    return "\n".join(text.strip().splitlines()[-lines:])


class ZooRunner:
    """Explains several models, each in its own process (see the module's documentation).

    ``work_directory`` receives each model's result JSON, log and trace (``NAME.json``,
    ``NAME.log``, ``NAME.opsight``); ``on_done(result, done, total)`` is called as each one
    finishes."""

    def __init__(self, models: list[ModelSpec], *, jobs: int = 1, backend: str = "aot_eager",
                 rtol: float = 1e-4, atol: float = 1e-5, work_directory: str | None = None,
                 record_traces: bool = True, fork_server: bool = True,
                 on_done: Callable[[ModelExplain, int, int], None] | None = None,
                 on_tick: Callable[[list[str], int, int], None] | None = None) -> None:
        self.models = models
        self.jobs = max(1, jobs)
        self.backend = backend
        self.rtol = rtol
        self.atol = atol
        self.work_directory = work_directory or tempfile.mkdtemp(prefix="opsight-explain-")
        self.record_traces = record_traces
        self.on_done = on_done
        self.on_tick = on_tick  # (names running, done, total), every loop turn
        self.fork_server = fork_server
        self._launcher: ProcessLauncher | ForkServerLauncher | None = None
        #: Seconds the fork server took to start (0 without one): opsight's, once per run.
        self.startup_seconds = 0.0
        #: The trace files the children wrote, in model order (for the run store).
        self.trace_files: list[str] = []

    def _environment(self) -> dict[str, str]:
        environment = dict(os.environ)
        # The child records its own steps only: torch's operators and module calls would
        # be traced by a session too, and module tracing replaces nn.Module.__call__.
        environment["OPSIGHT_TORCH"] = "off"
        environment.pop("OPSIGHT_EXPORT", None)
        environment.pop("OPSIGHT_TARGETS", None)
        return environment

    def _make_launcher(self) -> "ProcessLauncher | ForkServerLauncher":
        environment = self._environment()
        if self.fork_server:
            try:
                return ForkServerLauncher(environment,
                                           os.path.join(self.work_directory, "fork-server.log"))
            except (OSError, RuntimeError):
                pass
        return ProcessLauncher(environment)

    def _start(self, index: int, spec: ModelSpec) -> _Running:
        stem = os.path.join(self.work_directory, f"{index:03d}")
        result_path, log_path, trace_path = stem + ".json", stem + ".log", stem + ".opsight"
        argv = ["--target", spec.target, "--name", spec.name, "--family", spec.family,
                "--backend", self.backend, "--rtol", repr(self.rtol), "--atol", repr(self.atol),
                "--result", result_path]
        if self.record_traces:
            argv += ["--trace", trace_path]
        assert self._launcher is not None
        started = time.perf_counter()  # the time limit runs from here
        try:
            process = self._launcher.start(argv, log_path)
        except RuntimeError:  # the fork server is gone: a process per model from now on
            self._launcher.close()
            self._launcher = ProcessLauncher(self._environment())
            process = self._launcher.start(argv, log_path)
        return _Running(spec, process, started, result_path, log_path, trace_path)

    def _finish(self, running: _Running, timed_out: bool) -> ModelExplain:
        spec = running.spec
        elapsed = time.perf_counter() - running.started
        if timed_out:
            result = ModelExplain(model=spec.name, family=spec.family, target=spec.target,
                                  status=STATUS_TIMEOUT, backend=self.backend,
                                  error=f"no result within the time limit of "
                                        f"{spec.timeout_s:g} s (killed)")
        elif os.path.exists(running.result_path):
            try:
                with open(running.result_path, encoding="utf-8") as file:
                    result = ModelExplain.from_dict(json.load(file))
            except (OSError, ValueError, TypeError) as error:
                result = ModelExplain(model=spec.name, family=spec.family, target=spec.target,
                                      status=STATUS_FAILED, backend=self.backend,
                                      error=f"unreadable result {running.result_path}: {error}")
        else:
            code = self._returncode(running)
            how = (f"killed by signal {signal.Signals(-code).name}" if code < 0
                   else f"exit status {code}")
            tail = _log_tail(running.log_path)
            result = ModelExplain(model=spec.name, family=spec.family, target=spec.target,
                                  status=STATUS_CRASHED, backend=self.backend,
                                  error=f"the process ended without a result ({how})"
                                        + (f"; log: {tail}" if tail else ""))
        result.parent_seconds = elapsed
        if os.path.exists(running.trace_path) and not timed_out:
            self.trace_files.append(running.trace_path)
        return result

    def _returncode(self, running: _Running) -> int:
        assert self._launcher is not None
        code = self._launcher.poll(running.process)
        return -signal.SIGKILL if code is None else code

    def _kill(self, running: _Running) -> None:
        assert self._launcher is not None
        self._launcher.kill(running.process)

    def run(self) -> list[ModelExplain]:
        """Every model's result, in the order given."""
        results: list[ModelExplain | None] = [None] * len(self.models)
        waiting = list(enumerate(self.models))
        running: dict[int, _Running] = {}
        done = 0
        self._launcher = self._make_launcher()
        self.startup_seconds = getattr(self._launcher, "startup_seconds", 0.0)
        try:
            while waiting or running:
                while waiting and len(running) < self.jobs:
                    index, spec = waiting.pop(0)
                    running[index] = self._start(index, spec)
                time.sleep(0.01)
                if self.on_tick is not None:
                    self.on_tick([item.spec.name for item in running.values()], done,
                                 len(self.models))
                for index, item in list(running.items()):
                    timed_out = False
                    # Done when its result is there (written last, after its trace: the
                    # process is ending), or when it ended without one.
                    if (self._launcher.poll(item.process) is None
                            and not os.path.exists(item.result_path)):
                        if time.perf_counter() - item.started < item.spec.timeout_s:
                            continue
                        self._kill(item)
                        timed_out = True
                    del running[index]
                    results[index] = self._finish(item, timed_out)
                    done += 1
                    if self.on_done is not None:
                        self.on_done(results[index], done, len(self.models))
        finally:
            for item in running.values():  # interrupted: no child outlives the command
                self._kill(item)
            self._launcher.close()
        return [result for result in results if result is not None]


class Progress:
    """What the zoo shows while it runs (see the module's documentation) on ``file``; the
    bar only when ``file`` is a terminal. ``done`` and ``tick`` are the runner's callbacks."""

    def __init__(self, file: IO[str], *, bar: bool | None = None, width: int = 20) -> None:
        self.file = file
        self.bar = file.isatty() if bar is None else bar
        self.width = width
        self._began = time.perf_counter()
        self._drawn = 0.0
        self._bar_shown = False

    def _clear_bar(self) -> None:
        if self._bar_shown:
            self.file.write("\r\033[K")
            self._bar_shown = False

    def done(self, result: ModelExplain, done: int, total: int) -> None:
        self._clear_bar()
        progress_line(result, done, total, self.file)

    def tick(self, running: list[str], done: int, total: int) -> None:
        now = time.perf_counter()
        if not self.bar or now - self._drawn < 0.2:
            return
        self._drawn = now
        filled = self.width * done // max(1, total)
        names = ", ".join(running)
        line = (f"[{'#' * filled}{'-' * (self.width - filled)}]  {done}/{total}  "
                f"{now - self._began:.1f} s" + (f"  running: {names}" if names else ""))
        self.file.write("\r\033[K" + line[:150])
        self.file.flush()
        self._bar_shown = True

    def close(self) -> None:
        self._clear_bar()
        self.file.flush()


def progress_line(result: ModelExplain, done: int, total: int, file: IO[str]) -> None:
    """``[3/7] gpt2 (decoder)  ok  1 graph, 0 breaks  4.1 s`` on ``file``."""
    width = len(str(total))
    seconds = f"{result.parent_seconds:.1f} s" if result.parent_seconds is not None else ""
    if result.status == "ok":
        what = (f"{result.graphs} graph{'' if result.graphs == 1 else 's'}, "
                f"{result.graph_breaks} break{'' if result.graph_breaks == 1 else 's'}")
    else:
        what = result.error.splitlines()[0][:120] if result.error else ""
    family = f" ({result.family})" if result.family else ""
    print(f"[{done:>{width}}/{total}] {result.model}{family}  {result.status}  {what}  {seconds}",
          file=file, flush=True)
