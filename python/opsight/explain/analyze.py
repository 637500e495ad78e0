"""Explaining one model in this process: :func:`explain_model` runs ``torch._dynamo.explain``
(graphs, breaks and their reasons), then ``torch.compile`` with a back-end once (its compile
time), compares the compiled outputs with eager ones, and samples the resident memory
meanwhile (the compile's peak). ``opsight explain`` runs it in a child process per model
(:mod:`.child`); Python code may call it directly.

Break sites: dynamo reports each break with the user's stack (the frames it traced, outside
in); the innermost frame outside torch's own package is where the user's code broke. Reasons
are grouped by their first line with object addresses removed, per source line, and counted.
"""

from __future__ import annotations

import os
import re
import threading
import time
from typing import Any

from ..models import compare_outputs, error_text, first_line, split_inputs
from .result import STATUS_FAILED, BreakSite, ModelExplain

_ADDRESS = re.compile(r"0x[0-9a-fA-F]{6,}")
_TORCH_DIRECTORY = None  # set on first use: the installed torch package's directory


def normalize_reason(reason: str) -> str:
    """The first line of a dynamo reason, object addresses replaced by ``0x…`` so that the
    same cause is the same text in every run."""
    return _ADDRESS.sub("0x…", first_line(reason, 400))


def _torch_directory() -> str:
    global _TORCH_DIRECTORY
    if _TORCH_DIRECTORY is None:
        import torch

        _TORCH_DIRECTORY = os.path.dirname(os.path.abspath(torch.__file__)) + os.sep
    return _TORCH_DIRECTORY


def break_sites(break_reasons: list[Any]) -> list[BreakSite]:
    """dynamo's break reasons -> sites grouped by (reason, file, line), most frequent first."""
    torch_directory = _torch_directory()
    grouped: dict[tuple[str, str, int], BreakSite] = {}
    for entry in break_reasons:
        frames = list(getattr(entry, "user_stack", None) or [])
        user = [frame for frame in frames
                if not os.path.abspath(frame.filename).startswith(torch_directory)]
        innermost = (user or frames or [None])[-1]
        reason_text = str(getattr(entry, "reason", entry))
        reason = normalize_reason(reason_text)
        file = innermost.filename if innermost is not None else ""
        line = int(innermost.lineno or 0) if innermost is not None else 0
        key = (reason, file, line)
        site = grouped.get(key)
        if site is not None:
            site.count += 1
            continue
        detail_lines = [item.strip() for item in reason_text.strip().splitlines()[1:3]]
        grouped[key] = BreakSite(
            reason=reason, file=file, line=line,
            function=innermost.name if innermost is not None else "",
            detail=" ".join(item for item in detail_lines if item)[:400],
            stack=[f"{frame.filename}:{frame.lineno} in {frame.name}" for frame in user[-6:]])
    return sorted(grouped.values(), key=lambda site: (-site.count, site.file, site.line))


class _ResidentPeak:
    """Samples this process's resident memory every few milliseconds on a thread while
    open; ``peak_above_start`` is the highest sample minus the first. (``ru_maxrss`` is the
    process's lifetime peak and would hide a compile that stays below an earlier one.)"""

    def __init__(self, interval_s: float = 0.005) -> None:
        self._interval_s = interval_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._page = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
        self.start_bytes = 0
        self.peak_bytes = 0

    def _read(self) -> int:
        try:
            with open("/proc/self/statm", "rb") as statm:
                return int(statm.read().split()[1]) * self._page
        except (OSError, ValueError, IndexError):
            return 0

    def _sample(self) -> None:
        while not self._stop.wait(self._interval_s):
            self.peak_bytes = max(self.peak_bytes, self._read())

    def __enter__(self) -> "_ResidentPeak":
        self.start_bytes = self.peak_bytes = self._read()
        self._thread = threading.Thread(target=self._sample, name="opsight-explain-memory",
                                        daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.peak_bytes = max(self.peak_bytes, self._read())

    @property
    def peak_above_start(self) -> int | None:
        return max(0, self.peak_bytes - self.start_bytes) if self.start_bytes else None


def explain_model(model: Any, example_inputs: Any, *, name: str = "model", family: str = "",
                  backend: str = "aot_eager", rtol: float = 1e-4, atol: float = 1e-5,
                  stage: Any = None) -> ModelExplain:
    """Explains ``model`` (an ``nn.Module`` or a function) called on ``example_inputs``.

    An ``nn.Module`` is put in eval mode (inference: no dropout) and run under
    ``torch.no_grad()``. ``backend`` is the ``torch.compile`` back-end timed and compared
    with eager (``aot_eager``: AOTAutograd's decompositions, cheap; ``inductor``: real code
    generation, slow to compile). ``stage(name)`` returns a context manager around each step
    (the child process records them as spans). Never raises for the model's own failures:
    the result says ``failed`` and why."""
    import contextlib

    import torch
    import torch._dynamo

    def step(label: str):
        return stage(label) if stage is not None else contextlib.nullcontext()

    result = ModelExplain(model=name, family=family, backend=backend)
    if isinstance(model, torch.nn.Module):
        model.eval()
    args, kwargs = split_inputs(example_inputs)
    try:
        with torch.no_grad(), _ResidentPeak() as memory:
            with step("eager"):
                expected = model(*args, **kwargs)
            torch._dynamo.reset()
            with step("dynamo.explain"):
                began = time.perf_counter()
                explained = torch._dynamo.explain(model)(*args, **kwargs)
                result.explain_seconds = time.perf_counter() - began
            result.graphs = int(explained.graph_count)
            result.graph_breaks = int(explained.graph_break_count)
            result.ops = int(explained.op_count)
            result.ops_per_graph = [len(ops) for ops in explained.ops_per_graph]
            result.breaks = break_sites(list(explained.break_reasons))
            torch._dynamo.reset()
            with step(f"compile.{backend}"):
                compiled = torch.compile(model, backend=backend)
                began = time.perf_counter()
                got = compiled(*args, **kwargs)
                result.compile_seconds = time.perf_counter() - began
        result.compile_peak_bytes = memory.peak_above_start
        result.outputs_match, result.max_abs_difference = compare_outputs(expected, got, rtol,
                                                                          atol)
    except Exception as error:  # noqa: BLE001 - the model's or dynamo's failure is the result
        result.status = STATUS_FAILED
        result.error = error_text(error)
    finally:
        torch._dynamo.reset()
    return result
