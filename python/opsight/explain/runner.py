"""Running models in child processes (:mod:`.child`), forked by a fork server that imported
opsight and torch once (:mod:`.zygote`; a fresh process per model when it cannot start), up
to ``jobs`` at a time, each with a time limit: a model that hangs is killed (its whole process group) and reported as
``timeout``, one whose process dies as ``crashed`` with the signal or exit status and the
end of its log; the others go on. Progress is one line per finished model on stderr
(``[3/7] gpt2  ok  2 graphs, 1 break  4.1 s``), a bar-free form that reads well in CI logs.

Thread-safety: :class:`ZooRunner` is used from one thread.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import IO, Callable

from .result import STATUS_CRASHED, STATUS_FAILED, STATUS_TIMEOUT, ModelExplain


@dataclass
class ModelSpec:
    """A model to explain: its TARGET, the name and family it is reported under, its time
    limit in seconds."""
    name: str
    target: str
    family: str = ""
    timeout_s: float = 600.0


class _ProcessLauncher:
    """A process per model, started afresh (``python -m opsight.explain.child``): what the
    fork server falls back to."""

    def __init__(self, environment: dict[str, str]) -> None:
        self._environment = environment

    def start(self, argv: list[str], log_path: str) -> subprocess.Popen:
        with open(log_path, "wb") as log:
            return subprocess.Popen([sys.executable, "-m", "opsight.explain.child", *argv],
                                    stdin=subprocess.DEVNULL, stdout=log,
                                    stderr=subprocess.STDOUT, env=self._environment,
                                    start_new_session=True)

    @staticmethod
    def poll(process: subprocess.Popen) -> int | None:
        return process.poll()

    @staticmethod
    def kill(process: subprocess.Popen) -> None:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        process.wait()

    def close(self) -> None:
        pass


class _ForkServerLauncher:
    """Children forked by the fork server (:mod:`.zygote`), which imported opsight and torch
    once. A reader thread collects its answers; a child is its pid, its end the status the
    server reports. Raises OSError/RuntimeError from the constructor when the server cannot
    start (the runner then starts processes afresh)."""

    def __init__(self, environment: dict[str, str], log_path: str) -> None:
        import threading

        with open(log_path, "wb") as log:
            self._server = subprocess.Popen(
                [sys.executable, "-m", "opsight.explain.zygote"], stdin=subprocess.PIPE,
                stdout=subprocess.PIPE, stderr=log, env=environment)
        self._condition = threading.Condition()
        self._pids: dict[int, int] = {}        # request id -> pid
        self._statuses: dict[int, int] = {}    # pid -> exit status
        self._closed = False
        self._ready = False
        self._next_id = 0
        self._reader = threading.Thread(target=self._read, name="opsight-explain-forks",
                                        daemon=True)
        self._reader.start()
        began = time.perf_counter()
        with self._condition:
            if not self._condition.wait_for(lambda: self._ready or self._closed, 120):
                self.close()
                raise RuntimeError("the fork server was not ready within 120 s")
            if not self._ready:
                raise RuntimeError("the fork server ended before it was ready")
        #: Seconds the server took to start (Python, opsight and torch imported once).
        self.startup_seconds = time.perf_counter() - began

    def _read(self) -> None:
        assert self._server.stdout is not None
        for line in self._server.stdout:
            message = json.loads(line)
            with self._condition:
                if "ready" in message:
                    self._ready = True
                elif "status" in message:
                    self._statuses[message["pid"]] = message["status"]
                else:
                    self._pids[message["id"]] = message["pid"]
                self._condition.notify_all()
        with self._condition:
            self._closed = True
            self._condition.notify_all()

    def start(self, argv: list[str], log_path: str) -> int:
        self._next_id += 1
        request = self._next_id
        assert self._server.stdin is not None
        self._server.stdin.write((json.dumps({"id": request, "argv": argv, "log": log_path})
                                  + "\n").encode())
        self._server.stdin.flush()
        with self._condition:
            if not self._condition.wait_for(lambda: request in self._pids or self._closed, 60):
                raise RuntimeError("the fork server did not answer within 60 s")
            if request not in self._pids:
                raise RuntimeError("the fork server ended")
            return self._pids.pop(request)

    def poll(self, pid: int) -> int | None:
        with self._condition:
            if pid in self._statuses:
                return self._statuses[pid]
            if self._closed:  # the server died with its children unreported
                return -signal.SIGKILL
        return None

    def kill(self, pid: int) -> None:
        for kill in (lambda: os.killpg(pid, signal.SIGKILL), lambda: os.kill(pid, signal.SIGKILL)):
            try:
                kill()
                break
            except (ProcessLookupError, PermissionError):
                continue
        with self._condition:  # reaped and reported by the server
            self._condition.wait_for(lambda: pid in self._statuses or self._closed, 10)

    def close(self) -> None:
        if self._server.stdin is not None:
            try:
                self._server.stdin.close()
            except OSError:
                pass
        try:
            self._server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self._server.kill()
            self._server.wait()


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
                 on_done: Callable[[ModelExplain, int, int], None] | None = None) -> None:
        self.models = models
        self.jobs = max(1, jobs)
        self.backend = backend
        self.rtol = rtol
        self.atol = atol
        self.work_directory = work_directory or tempfile.mkdtemp(prefix="opsight-explain-")
        self.record_traces = record_traces
        self.on_done = on_done
        self.fork_server = fork_server
        self._launcher: _ProcessLauncher | _ForkServerLauncher | None = None
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

    def _make_launcher(self) -> "_ProcessLauncher | _ForkServerLauncher":
        environment = self._environment()
        if self.fork_server:
            try:
                return _ForkServerLauncher(environment,
                                           os.path.join(self.work_directory, "fork-server.log"))
            except (OSError, RuntimeError):
                pass
        return _ProcessLauncher(environment)

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
            self._launcher = _ProcessLauncher(self._environment())
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
