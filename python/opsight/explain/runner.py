"""Running models in child processes (:mod:`.child`), up to ``jobs`` at a time, each with a
time limit: a model that hangs is killed (its whole process group) and reported as
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


@dataclass
class _Running:
    spec: ModelSpec
    process: subprocess.Popen
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
                 record_traces: bool = True,
                 on_done: Callable[[ModelExplain, int, int], None] | None = None) -> None:
        self.models = models
        self.jobs = max(1, jobs)
        self.backend = backend
        self.rtol = rtol
        self.atol = atol
        self.work_directory = work_directory or tempfile.mkdtemp(prefix="opsight-explain-")
        self.record_traces = record_traces
        self.on_done = on_done
        #: The trace files the children wrote, in model order (for the run store).
        self.trace_files: list[str] = []

    def _start(self, index: int, spec: ModelSpec) -> _Running:
        stem = os.path.join(self.work_directory, f"{index:03d}")
        result_path, log_path, trace_path = stem + ".json", stem + ".log", stem + ".opsight"
        command = [sys.executable, "-m", "opsight.explain.child", "--target", spec.target,
                   "--name", spec.name, "--family", spec.family, "--backend", self.backend,
                   "--rtol", repr(self.rtol), "--atol", repr(self.atol),
                   "--result", result_path]
        if self.record_traces:
            command += ["--trace", trace_path]
        environment = dict(os.environ)
        # The child records its own steps only: torch's operators and module calls would
        # be traced by a session too, and module tracing replaces nn.Module.__call__.
        environment["OPSIGHT_TORCH"] = "off"
        environment.pop("OPSIGHT_EXPORT", None)
        environment.pop("OPSIGHT_TARGETS", None)
        with open(log_path, "wb") as log:
            process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log,
                                       stderr=subprocess.STDOUT, env=environment,
                                       start_new_session=True)
        return _Running(spec, process, time.perf_counter(), result_path, log_path, trace_path)

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
            code = running.process.returncode
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

    @staticmethod
    def _kill(process: subprocess.Popen) -> None:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        process.wait()

    def run(self) -> list[ModelExplain]:
        """Every model's result, in the order given."""
        results: list[ModelExplain | None] = [None] * len(self.models)
        waiting = list(enumerate(self.models))
        running: dict[int, _Running] = {}
        done = 0
        try:
            while waiting or running:
                while waiting and len(running) < self.jobs:
                    index, spec = waiting.pop(0)
                    running[index] = self._start(index, spec)
                time.sleep(0.02)
                for index, item in list(running.items()):
                    timed_out = False
                    if item.process.poll() is None:
                        if time.perf_counter() - item.started < item.spec.timeout_s:
                            continue
                        self._kill(item.process)
                        timed_out = True
                    del running[index]
                    results[index] = self._finish(item, timed_out)
                    done += 1
                    if self.on_done is not None:
                        self.on_done(results[index], done, len(self.models))
        finally:
            for item in running.values():  # interrupted: no child outlives the command
                self._kill(item.process)
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
