"""``opsight.torch.compare_backends``: one function timed on several back-ends, graph by graph.

octoml-profile's job, run locally. ``torch.compile`` (TorchDynamo) splits a call of ``fn``
into *segments*: the FX graphs it captures, and the plain Python between them (before the
first graph, at each graph break, after the last graph). Every captured graph is compiled
for every chosen back-end; each call of ``fn`` then runs each graph on every back-end in
turn, times each run, checks that the outputs agree with the captured graph run as is
(``eager``), and hands the eager result back to ``fn``, so the program computes what it
always did. The Python between graphs is timed once per call, by timestamps taken when a
graph is entered and left. A back-end's estimated time per call of ``fn`` is the sum of the
uncompiled segments and of its own graph times::

    from opsight.torch.compare_backends import compare_backends

    result = compare_backends(predict, (x,), backends=["eager", "inductor", "onnxruntime"],
                              repeats=20, warmups=2, prices_per_hour={"inductor": 0.126})
    result.print()            # octoml-profile's table, with totals and cost per 1M requests
    result.to_dict()          # JSON-serialisable
    result.dataframe()        # pandas, one row per segment and back-end

Why one call of ``fn`` runs every back-end (rather than one call per back-end): the
uncompiled segments are the same Python whatever back-end runs the graphs, so they are
measured once and shared, every back-end sees exactly the same inputs (which is what makes
the output check possible), and dynamo captures the graphs once. To keep the comparison
fair, the order in which the back-ends run is rotated from call to call (the first one to
run after Python code meets colder caches), the time spent running the *other* back-ends
and checking outputs lies between a graph's entry and exit timestamps and so is never
counted as uncompiled time, and when a graph writes into one of its inputs (an in-place
operation on a placeholder) each back-end but the one whose result is returned runs on
copies of those inputs (copied outside the timed region). Dynamo's guard checks run
between graphs and are counted as uncompiled time: a program compiled with any back-end
pays them too.

Warm-ups and compilation: the first ``warmups`` calls are discarded. A measured call in which
anything was compiled (dynamo captured a graph, after a guard failure for example, and the
back-ends compiled it) is discarded too and counted (``discarded_runs``). Calls whose graph
sequence differs from the most common one (a data-dependent path) are counted and left out,
so that every segment row means the same code in every run.

A back-end that fails to compile a graph, or raises while running it, is counted in that
graph's ``failures`` with the reason (``errors``); the other back-ends still run, and a
back-end with a graph that never ran has no total. Outputs that differ from eager's by more
than ``rtol``/``atol`` are counted as ``mismatches`` with the largest absolute difference.

Back-ends: ``"eager"`` (the captured ``GraphModule`` run as is), ``"inductor"``
(``torch._inductor.compile_fx``), ``"torchscript"`` (``torch.jit.trace`` of the graph module),
``"onnxruntime"`` (the graph exported with ``torch.onnx.export(dynamo=False)`` and run by an
ONNX Runtime session on the CPU execution provider), any other name ``torch.compile``
knows (``torch._dynamo.list_backends()``, e.g. ``"aot_eager"``), or ``(name, compiler)``
pairs / a ``{name: compiler}`` mapping where ``compiler(graph_module, example_inputs)``
returns a callable, as a ``torch.compile`` back-end does.

Graph breaks and their reasons come from dynamo's own counters
(``torch._dynamo.utils.counters["graph_break"]``) while ``fn`` is captured.
``torch._dynamo.reset()`` is called before and after, so ``fn`` is captured afresh and a later
``torch.compile`` of the same code does not reuse the profiling back-end.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import copy
import functools
import importlib
import importlib.util
import io
import json
import math
import os
import statistics
import sys
import time
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence

__all__ = ["BackendStats", "CompareBackendsResult", "Segment", "compare_backends",
           "BUILTIN_BACKENDS", "command_main"]

BUILTIN_BACKENDS = ("eager", "inductor", "torchscript", "onnxruntime")
DEFAULT_BACKENDS = BUILTIN_BACKENDS

Compiler = Callable[[Any, list], Callable[..., Any]]


# ---- built-in back-ends ---------------------------------------------------------------------

def _compile_eager(graph_module, example_inputs):
    return graph_module


def _compile_inductor(graph_module, example_inputs):
    from torch._inductor.compile_fx import compile_fx

    return compile_fx(graph_module, example_inputs)


def _compile_torchscript(graph_module, example_inputs):
    import torch

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return torch.jit.trace(graph_module, tuple(example_inputs), check_trace=False,
                               strict=False)


def _compile_onnxruntime(graph_module, example_inputs, threads: int | None = None):
    import torch

    try:
        import onnxruntime
    except ImportError as error:
        raise RuntimeError(f"onnxruntime is not installed ({error}); "
                           "pip install onnxruntime") from None
    for index, value in enumerate(example_inputs):
        if not isinstance(value, torch.Tensor):
            raise RuntimeError(f"graph input {index} is a {type(value).__name__}, not a tensor: "
                               "the ONNX export takes tensors only")
    names = [f"input_{index}" for index in range(len(example_inputs))]
    buffer = io.BytesIO()
    with warnings.catch_warnings(), _stdout_to_stderr():
        warnings.simplefilter("ignore")
        # The TorchScript-based exporter: the torch.export-based one (dynamo=True) needs
        # the onnxscript package. On failure it prints the graph on fd 1: sent to stderr.
        torch.onnx.export(graph_module, tuple(example_inputs), buffer, dynamo=False,
                          input_names=names)
    options = onnxruntime.SessionOptions()
    # ONNX Runtime's threads spin after a run by default, taking the cores from the
    # back-end that runs next in the same call: they wait without spinning here.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.add_session_config_entry("session.inter_op.allow_spinning", "0")
    if threads:
        options.intra_op_num_threads = threads
    session = onnxruntime.InferenceSession(buffer.getvalue(), options,
                                           providers=["CPUExecutionProvider"])
    kept = [(names.index(node.name), node.name) for node in session.get_inputs()]

    def run(*arguments):
        feed = {name: arguments[index].detach().cpu().numpy() for index, name in kept}
        return [torch.from_numpy(output) for output in session.run(None, feed)]

    return run


_BUILTIN_COMPILERS: dict[str, Compiler] = {
    "eager": _compile_eager,
    "inductor": _compile_inductor,
    "torchscript": _compile_torchscript,
    "onnxruntime": _compile_onnxruntime,
}


def _resolve_backends(backends, threads: int | None = None) -> list[tuple[str, Compiler]]:
    if isinstance(backends, str):
        backends = [name.strip() for name in backends.split(",") if name.strip()]
    items: Iterable = backends.items() if isinstance(backends, Mapping) else backends
    resolved: list[tuple[str, Compiler]] = []
    for item in items:
        if isinstance(item, str):
            name, compiler = item, _BUILTIN_COMPILERS.get(item)
            if name == "onnxruntime" and threads:
                compiler = functools.partial(_compile_onnxruntime, threads=threads)
            if compiler is None:
                compiler = _dynamo_backend(item)
        elif isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str) \
                and callable(item[1]):
            name, compiler = item
        else:
            raise ValueError(f"compare_backends: a back-end is a name or a (name, compiler) "
                             f"pair, got {item!r}")
        if any(name == seen for seen, _ in resolved):
            raise ValueError(f"compare_backends: back-end {name!r} is given twice")
        resolved.append((name, compiler))
    if not resolved:
        raise ValueError("compare_backends: no back-end given")
    return resolved


def _dynamo_backend(name: str) -> Compiler:
    import torch._dynamo

    known = sorted(set(torch._dynamo.list_backends(exclude_tags=())) - {"inductor", "eager"})
    if name not in known:
        raise ValueError(f"compare_backends: unknown back-end {name!r} (built in: "
                         f"{', '.join(BUILTIN_BACKENDS)}; torch.compile back-ends: "
                         f"{', '.join(known)})")
    return torch._dynamo.lookup_backend(name)


# ---- the result -----------------------------------------------------------------------------

@dataclass
class BackendStats:
    """One back-end's runs of one graph segment (times in milliseconds)."""
    runs: int = 0
    failures: int = 0
    mean_ms: float | None = None
    median_ms: float | None = None
    min_ms: float | None = None
    max_ms: float | None = None
    mismatches: int = 0
    max_abs_diff: float | None = None
    errors: list[str] = field(default_factory=list)


@dataclass
class Segment:
    """A segment of a call of ``fn``: a compiled graph, or the Python between graphs.

    ``kind`` is ``"graph"`` or ``"uncompiled"``; a graph segment has its ``graph_id`` (1, 2...,
    in capture order; one graph can be several segments when ``fn`` calls it more than
    once), ``op_count`` (call nodes of the FX graph) and per back-end ``backends``; an
    uncompiled segment has its own ``runs`` and times, shared by every back-end."""
    index: int
    kind: str
    graph_id: int | None = None
    op_count: int | None = None
    backends: dict[str, BackendStats] = field(default_factory=dict)
    runs: int = 0
    mean_ms: float | None = None
    median_ms: float | None = None
    min_ms: float | None = None
    max_ms: float | None = None


def _round(value: float | None, digits: int = 6) -> float | None:
    return None if value is None else round(value, digits)


@dataclass
class CompareBackendsResult:
    """What :func:`compare_backends` measured; ``print()``/``table()``, ``to_dict()``,
    ``dataframe()``."""
    backends: list[str]
    segments: list[Segment]
    repeats: int
    warmups: int
    graph_count: int
    graph_break_count: int
    graph_break_reasons: list[str]
    discarded_runs: dict[str, int]
    measured_runs: int
    prices_per_hour: dict[str, float]
    rtol: float
    atol: float
    environment: dict[str, Any]

    # ---- derived figures -------------------------------------------------------------------
    @property
    def uncompiled_total_ms(self) -> float | None:
        segments = [segment for segment in self.segments if segment.kind == "uncompiled"]
        if not segments or any(segment.mean_ms is None for segment in segments):
            return None
        return sum(segment.mean_ms for segment in segments)

    def compiled_total_ms(self, backend: str) -> float | None:
        """Sum of the backend's mean graph times; None when one of its graphs never ran."""
        total = 0.0
        for segment in self.segments:
            if segment.kind == "graph":
                mean = segment.backends[backend].mean_ms
                if mean is None:
                    return None
                total += mean
        return total

    def total_ms(self, backend: str) -> float | None:
        """Estimated time of one call of ``fn`` on ``backend``: compiled + uncompiled."""
        compiled, uncompiled = self.compiled_total_ms(backend), self.uncompiled_total_ms
        if compiled is None or uncompiled is None:
            return None
        return compiled + uncompiled

    def cost_per_million(self, backend: str) -> float | None:
        """Price of a million calls of ``fn`` on ``backend`` at its price per hour."""
        price, total = self.prices_per_hour.get(backend), self.total_ms(backend)
        if price is None or total is None:
            return None
        return total / 1000.0 * price / 3600.0 * 1e6

    @property
    def totals_ms(self) -> dict[str, float | None]:
        return {backend: self.total_ms(backend) for backend in self.backends}

    @property
    def failures(self) -> dict[str, int]:
        return {backend: sum(segment.backends[backend].failures for segment in self.segments
                             if segment.kind == "graph") for backend in self.backends}

    @property
    def errors(self) -> dict[str, list[str]]:
        found: dict[str, list[str]] = {}
        for segment in self.segments:
            for backend, stats in segment.backends.items():
                for error in stats.errors:
                    line = f"graph #{segment.graph_id}: {error}"
                    if line not in found.setdefault(backend, []):
                        found[backend].append(line)
        return found

    # ---- presentation ----------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        segments = []
        for segment in self.segments:
            row: dict[str, Any] = {"index": segment.index, "kind": segment.kind}
            if segment.kind == "graph":
                row["graph_id"] = segment.graph_id
                row["op_count"] = segment.op_count
                row["backends"] = {
                    name: {"runs": stats.runs, "failures": stats.failures,
                           "mean_ms": _round(stats.mean_ms), "median_ms": _round(stats.median_ms),
                           "min_ms": _round(stats.min_ms), "max_ms": _round(stats.max_ms),
                           "mismatches": stats.mismatches, "max_abs_diff": stats.max_abs_diff,
                           "errors": list(stats.errors)}
                    for name, stats in segment.backends.items()}
            else:
                row.update(runs=segment.runs, mean_ms=_round(segment.mean_ms),
                           median_ms=_round(segment.median_ms), min_ms=_round(segment.min_ms),
                           max_ms=_round(segment.max_ms))
            segments.append(row)
        return {
            "backends": list(self.backends),
            "repeats": self.repeats,
            "warmups": self.warmups,
            "measured_runs": self.measured_runs,
            "discarded_runs": dict(self.discarded_runs),
            "graph_count": self.graph_count,
            "graph_break_count": self.graph_break_count,
            "graph_break_reasons": list(self.graph_break_reasons),
            "segments": segments,
            "uncompiled_total_ms": _round(self.uncompiled_total_ms),
            "totals": {
                backend: {"compiled_ms": _round(self.compiled_total_ms(backend)),
                          "uncompiled_ms": _round(self.uncompiled_total_ms),
                          "total_ms": _round(self.total_ms(backend)),
                          "failures": self.failures[backend],
                          "price_per_hour": self.prices_per_hour.get(backend),
                          "cost_per_million": _round(self.cost_per_million(backend))}
                for backend in self.backends},
            "prices_per_hour": dict(self.prices_per_hour),
            "errors": self.errors,
            "tolerance": {"rtol": self.rtol, "atol": self.atol},
            "environment": dict(self.environment),
        }

    def dataframe(self):
        """One row per segment and back-end (uncompiled segments: one row, backend None)."""
        import pandas

        rows = []
        for segment in self.segments:
            base = {"segment": segment.index, "kind": segment.kind,
                    "graph_id": segment.graph_id, "op_count": segment.op_count}
            if segment.kind == "graph":
                for name, stats in segment.backends.items():
                    rows.append({**base, "backend": name, "runs": stats.runs,
                                 "mean_ms": stats.mean_ms, "median_ms": stats.median_ms,
                                 "min_ms": stats.min_ms, "max_ms": stats.max_ms,
                                 "failures": stats.failures, "mismatches": stats.mismatches})
            else:
                rows.append({**base, "backend": None, "runs": segment.runs,
                             "mean_ms": segment.mean_ms, "median_ms": segment.median_ms,
                             "min_ms": segment.min_ms, "max_ms": segment.max_ms,
                             "failures": 0, "mismatches": 0})
        return pandas.DataFrame(rows)

    def table(self) -> str:
        """octoml-profile's table: segments, runs, mean and median ms, failures; then the
        totals (from the means), costs, graph break reasons and failures."""
        def ms(value: float | None) -> str:
            return "-" if value is None else f"{value:.3f}"

        name_width = max([len("Segment") + 4] + [len(name) + 5 for name in self.backends]
                         + [len(f"{len(self.segments)}  Graph #{self.graph_count} (00000 ops)")])
        header = (f"{'Segment':<{name_width}}  {'Runs':>6}  {'Mean ms':>9}  {'Median ms':>9}  "
                  f"{'Failures':>8}")
        lines = []
        discarded = ", ".join(f"{count} {why}" for why, count in self.discarded_runs.items()
                              if count) or "none"
        lines.append(f"Runs discarded: {discarded}")
        lines.append(f"Graphs: {self.graph_count}, graph breaks: {self.graph_break_count}")
        lines.append(header)
        lines.append("=" * len(header))
        for segment in self.segments:
            if segment.kind == "uncompiled":
                label = f"{segment.index:<3}Uncompiled"
                lines.append(f"{label:<{name_width}}  {segment.runs:>6}  "
                             f"{ms(segment.mean_ms):>9}  {ms(segment.median_ms):>9}")
            else:
                label = f"{segment.index:<3}Graph #{segment.graph_id} ({segment.op_count} ops)"
                lines.append(label)
                for name, stats in segment.backends.items():
                    note = f"  {stats.mismatches} mismatched" if stats.mismatches else ""
                    lines.append(f"{'     ' + name:<{name_width}}  {stats.runs:>6}  "
                                 f"{ms(stats.mean_ms):>9}  {ms(stats.median_ms):>9}  "
                                 f"{stats.failures:>8}{note}")
            lines.append("")
        if lines[-1] == "":
            lines.pop()
        lines.append("-" * len(header))
        lines.append(f"Total uncompiled code run time: {ms(self.uncompiled_total_ms)} ms")
        with_cost = any(self.cost_per_million(name) is not None for name in self.backends)
        lines.append("Total times (compiled + uncompiled) per back-end, ms"
                     + (", and cost per million calls at the given price per hour:"
                        if with_cost else ":"))
        width = max(len(name) for name in self.backends)
        for name in self.backends:
            line = f"    {name:<{width}}  {ms(self.total_ms(name)):>9}"
            cost = self.cost_per_million(name)
            if cost is not None:
                line += f"  ${cost:,.4f} (at ${self.prices_per_hour[name]}/h)"
            lines.append(line)
        if not self.measured_runs:
            lines.append("No measured runs: every call was a warm-up, compiled something or "
                         "took another path; raise repeats")
        if self.graph_break_reasons:
            lines.append("Graph break reasons:")
            lines.extend(f"    {reason}" for reason in self.graph_break_reasons)
        errors = self.errors
        if errors:
            lines.append("Failures:")
            for name, messages in errors.items():
                lines.extend(f"    {name}: {message}" for message in messages)
        return "\n".join(lines) + "\n"

    def print(self, file=None) -> None:
        (file or sys.stdout).write(self.table())

    def __str__(self) -> str:
        return self.table()


# ---- measuring ------------------------------------------------------------------------------

def _first_line(text: str, limit: int = 300) -> str:
    line = str(text).strip().splitlines()[0] if str(text).strip() else ""
    return line if len(line) <= limit else line[:limit - 3] + "..."


def _error_text(error: BaseException) -> str:
    return f"{type(error).__name__}: {_first_line(str(error))}"


def _count_ops(graph_module) -> int:
    return sum(1 for node in graph_module.graph.nodes
               if node.op in ("call_function", "call_method", "call_module"))


def _mutated_inputs(graph_module) -> list[int]:
    """Positions of the placeholders an in-place operation writes into."""
    from torch.fx import Node

    placeholders = [node for node in graph_module.graph.nodes if node.op == "placeholder"]
    positions = {node: index for index, node in enumerate(placeholders)}
    mutated = set()
    for node in graph_module.graph.nodes:
        if node.op not in ("call_function", "call_method") or not node.args:
            continue
        target = node.target if isinstance(node.target, str) else \
            getattr(node.target, "__name__", "")
        written = []
        if target.endswith("_") and not target.endswith("__"):
            written.append(node.args[0])
        out = node.kwargs.get("out")
        written.extend(out if isinstance(out, (tuple, list)) else [out])
        for value in written:
            if isinstance(value, Node) and value in positions:
                mutated.add(positions[value])
    return sorted(mutated)


def _leaves(value) -> list:
    import torch.utils._pytree as pytree

    return pytree.tree_leaves(value)


def _difference(reference, candidate, rtol: float, atol: float) -> tuple[bool, float | None]:
    """(agree, largest absolute difference) of two outputs, compared leaf by leaf."""
    import torch

    expected, got = _leaves(reference), _leaves(candidate)
    if len(expected) != len(got):
        return False, None
    largest = 0.0
    agree = True
    for left, right in zip(expected, got):
        if isinstance(left, torch.Tensor) or isinstance(right, torch.Tensor):
            left, right = torch.as_tensor(left), torch.as_tensor(right)
            if left.shape != right.shape:
                return False, None
            if left.numel() == 0:
                continue
            left, right = left.detach().cpu(), right.detach().cpu()
            if left.is_floating_point() or right.is_floating_point() or left.is_complex():
                left, right = left.to(torch.float64), right.to(torch.float64)
                if not torch.allclose(left, right, rtol=rtol, atol=atol, equal_nan=True):
                    agree = False
                finite = torch.isfinite(left) & torch.isfinite(right)
                if bool(finite.any()):
                    largest = max(largest, float((left - right).abs()[finite].max()))
            elif not torch.equal(left, right.to(left.dtype)):
                agree = False
                largest = max(largest, float((left.to(torch.float64)
                                              - right.to(torch.float64)).abs().max()))
        elif left != right:
            agree = False
    return agree, largest


@dataclass
class _Graph:
    graph_id: int
    graph_module: Any
    op_count: int
    mutated: list[int]
    compiled: dict[str, Callable[..., Any]]
    compile_errors: dict[str, str]


@dataclass
class _GraphCall:
    graph_id: int
    entered_ns: int
    left_ns: int
    times_ns: dict[str, int | None]          # None: failed
    errors: dict[str, str]
    mismatched: dict[str, float | None]      # back-end -> largest difference


class _Recorder:
    """The torch.compile back-end: captures each graph, compiles it for every back-end and
    runs all of them at each call."""

    def __init__(self, backends: list[tuple[str, Compiler]], rtol: float, atol: float,
                 synchronize: Callable[[], None]):
        self.backends = backends
        self.rtol, self.atol = rtol, atol
        self.synchronize = synchronize
        self.graphs: list[_Graph] = []
        self.compiled_during_call = False
        self.calls: list[_GraphCall] = []
        self.rotation = 0

    def __call__(self, graph_module, example_inputs):
        self.compiled_during_call = True
        graph = _Graph(len(self.graphs) + 1, graph_module, _count_ops(graph_module),
                       _mutated_inputs(graph_module), {}, {})
        self.graphs.append(graph)
        for name, compiler in self.backends:
            try:
                module = graph_module if name == "eager" else _copy_module(graph_module)
                # Compilers that trace by running (TorchScript, ONNX) get copies of the
                # inputs the graph writes into: the program's own tensors change once a call.
                compiled = compiler(module, _copy_inputs(example_inputs, graph.mutated))
            except Exception as error:  # noqa: BLE001 - a failure of this back-end only
                graph.compile_errors[name] = f"compilation failed: {_error_text(error)}"
                continue
            try:
                # Lazy work a back-end does on its first runs (TorchScript's profiling
                # executor optimises after two) belongs to compilation, not to the runs.
                if name != "eager":
                    for _ in range(_PRIMING_RUNS):
                        compiled(*_copy_inputs(example_inputs, graph.mutated))
            except Exception as error:  # noqa: BLE001
                graph.compile_errors[name] = f"first run failed: {_error_text(error)}"
                continue
            graph.compiled[name] = compiled

        def run_graph(*arguments):
            return self.run(graph, arguments)

        return run_graph

    def run(self, graph: _Graph, arguments):
        entered = time.perf_counter_ns()
        names = [name for name, _ in self.backends]
        shift = self.rotation % len(names)
        self.rotation += 1
        order = names[shift:] + names[:shift]
        # The result handed back to fn is eager's, computed on the real inputs, last, so
        # that the other back-ends read inputs nothing has written into yet.
        if "eager" in graph.compiled:
            order.remove("eager")
            order.append("eager")
        times: dict[str, int | None] = {}
        errors: dict[str, str] = {}
        outputs: dict[str, Any] = {}
        for name in order:
            compiled = graph.compiled.get(name)
            if compiled is None:
                times[name] = None
                errors[name] = graph.compile_errors.get(name, "not compiled")
                continue
            call_arguments = arguments
            if graph.mutated and name != "eager":
                call_arguments = _copy_inputs(arguments, graph.mutated)
            try:
                self.synchronize()
                started = time.perf_counter_ns()
                output = compiled(*call_arguments)
                self.synchronize()
                times[name] = time.perf_counter_ns() - started
                outputs[name] = output
            except Exception as error:  # noqa: BLE001 - a failure of this back-end only
                times[name] = None
                errors[name] = f"run failed: {_error_text(error)}"
        if "eager" in outputs:
            reference = outputs["eager"]
        else:  # eager not chosen (or failed): the graph as captured gives the result
            reference = graph.graph_module(*arguments)
        mismatched: dict[str, float | None] = {}
        for name, output in outputs.items():
            if name == "eager":
                continue
            try:
                agree, largest = _difference(reference, output, self.rtol, self.atol)
            except Exception as error:  # noqa: BLE001
                agree, largest = False, None
                errors.setdefault(name, f"output check failed: {_error_text(error)}")
            if not agree:
                mismatched[name] = largest
        left = time.perf_counter_ns()
        self.calls.append(_GraphCall(graph.graph_id, entered, left, times, errors, mismatched))
        return reference


_PRIMING_RUNS = 2


def _copy_inputs(arguments, positions: list[int]) -> list:
    """The arguments with those at ``positions`` (written into by the graph) copied."""
    import torch

    copied = list(arguments)
    for index in positions:
        if isinstance(copied[index], torch.Tensor):
            copied[index] = copied[index].clone()
    return copied


def _copy_module(graph_module):
    try:
        return copy.deepcopy(graph_module)
    except Exception:  # noqa: BLE001 - some modules cannot be copied: share the original
        return graph_module


def _stats(samples_ns: list[int]) -> tuple[float | None, ...]:
    if not samples_ns:
        return None, None, None, None
    values = [sample / 1e6 for sample in samples_ns]
    return statistics.fmean(values), statistics.median(values), min(values), max(values)


@dataclass
class _Invocation:
    started_ns: int
    ended_ns: int
    calls: list[_GraphCall]


def _graph_break_reasons(before: dict[str, int], after: dict[str, int]) -> tuple[int, list[str]]:
    count, reasons = 0, []
    for reason, total in after.items():
        new = total - before.get(reason, 0)
        if new > 0:
            count += new
            line = _first_line(reason)
            reasons.append(line if new == 1 else f"{line} (x{new})")
    return count, reasons


def compare_backends(
    fn: Callable[..., Any],
    example_inputs: Sequence[Any] = (),
    backends: Sequence[str | tuple[str, Compiler]] | Mapping[str, Compiler] | str
    = DEFAULT_BACKENDS,
    *,
    repeats: int = 10,
    warmups: int = 1,
    prices_per_hour: Mapping[str, float] | None = None,
    rtol: float = 1e-3,
    atol: float = 1e-5,
    no_grad: bool = True,
    threads: int | None = None,
) -> CompareBackendsResult:
    """Times ``fn(*example_inputs)`` with each graph dynamo captures run on each back-end.

    ``repeats`` measured calls follow ``warmups`` discarded ones; calls in which something
    was compiled are discarded too. ``prices_per_hour`` maps back-end names to a price
    (e.g. the hourly price of the instance it would run on) for the cost per million calls.
    Outputs are compared with eager's within ``rtol``/``atol``. ``no_grad`` runs ``fn``
    under ``torch.no_grad()`` (inference). ``threads`` sets torch's intra-op threads for the
    run (restored afterwards) and ONNX Runtime's, so that back-ends compare on equal cores
    (default: each back-end's own default). See the module's documentation for the method.
    """
    import torch
    import torch._dynamo
    from torch._dynamo.utils import counters

    if not callable(fn):
        raise TypeError(f"compare_backends: fn must be callable, got {type(fn).__name__}")
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise ValueError(f"compare_backends: repeats must be an integer >= 1, got {repeats!r}")
    if isinstance(warmups, bool) or not isinstance(warmups, int) or warmups < 0:
        raise ValueError(f"compare_backends: warmups must be an integer >= 0, got {warmups!r}")
    if not isinstance(example_inputs, (tuple, list)):
        example_inputs = (example_inputs,)
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int)
                                or threads < 1):
        raise ValueError(f"compare_backends: threads must be an integer >= 1, got {threads!r}")
    resolved = _resolve_backends(backends, threads)
    names = [name for name, _ in resolved]
    prices: dict[str, float] = {}
    for name, price in (prices_per_hour or {}).items():
        if name not in names:
            raise ValueError(f"compare_backends: a price is given for {name!r}, which is not "
                             f"one of the back-ends ({', '.join(names)})")
        if isinstance(price, bool) or not isinstance(price, (int, float)) \
                or not math.isfinite(price) or price < 0:
            raise ValueError(f"compare_backends: the price of {name!r} must be a number "
                             f">= 0, got {price!r}")
        prices[name] = float(price)

    uses_cuda = any(isinstance(value, torch.Tensor) and value.is_cuda
                    for value in _leaves(list(example_inputs)))
    synchronize = torch.cuda.synchronize if uses_cuda else (lambda: None)
    recorder = _Recorder(resolved, rtol, atol, synchronize)

    torch._dynamo.reset()
    previous_threads = torch.get_num_threads()
    if threads:
        torch.set_num_threads(threads)
    breaks_before = dict(counters["graph_break"])
    compiled_fn = torch.compile(fn, backend=recorder, dynamic=False)
    invocations: list[tuple[str, _Invocation]] = []
    try:
        for number in range(warmups + repeats):
            recorder.compiled_during_call = False
            recorder.calls = []
            with torch.no_grad() if no_grad else _nothing():
                synchronize()
                started = time.perf_counter_ns()
                compiled_fn(*example_inputs)
                synchronize()
                ended = time.perf_counter_ns()
            invocation = _Invocation(started, ended, recorder.calls)
            if number < warmups:
                kind = "warm-up"
            elif recorder.compiled_during_call:
                kind = "compilation"
            else:
                kind = "measured"
            invocations.append((kind, invocation))
    finally:
        breaks_after = dict(counters["graph_break"])
        torch._dynamo.reset()
        environment = _environment(names)
        environment["threads"] = threads  # None: each back-end's default
        torch.set_num_threads(previous_threads)

    break_count, break_reasons = _graph_break_reasons(breaks_before, breaks_after)
    discarded = {"warm-up": 0, "compilation": 0, "other path": 0}
    paths = collections.Counter(tuple(call.graph_id for call in invocation.calls)
                                for kind, invocation in invocations if kind == "measured")
    main_path = paths.most_common(1)[0][0] if paths else None
    measured: list[_Invocation] = []
    for kind, invocation in invocations:
        if kind != "measured":
            discarded[kind] += 1
        elif tuple(call.graph_id for call in invocation.calls) != main_path:
            discarded["other path"] += 1
        else:
            measured.append(invocation)
    if main_path is None:  # nothing measured: show the last call's shape with no runs
        main_path = tuple(call.graph_id for call in invocations[-1][1].calls)

    graphs = {graph.graph_id: graph for graph in recorder.graphs}
    segments: list[Segment] = []
    for position in range(len(main_path) + 1):
        gaps = []
        for invocation in measured:
            start = invocation.started_ns if position == 0 \
                else invocation.calls[position - 1].left_ns
            end = invocation.ended_ns if position == len(main_path) \
                else invocation.calls[position].entered_ns
            gaps.append(end - start)
        mean, median, low, high = _stats(gaps)
        segments.append(Segment(len(segments), "uncompiled", runs=len(gaps), mean_ms=mean,
                                median_ms=median, min_ms=low, max_ms=high))
        if position == len(main_path):
            break
        graph = graphs[main_path[position]]
        segment = Segment(len(segments), "graph", graph_id=graph.graph_id,
                          op_count=graph.op_count)
        for name in names:
            samples, stats = [], BackendStats()
            for invocation in measured:
                call = invocation.calls[position]
                elapsed = call.times_ns.get(name)
                if elapsed is None:
                    stats.failures += 1
                else:
                    samples.append(elapsed)
                error = call.errors.get(name)
                if error and error not in stats.errors:
                    stats.errors.append(error)
                if name in call.mismatched:
                    stats.mismatches += 1
                    difference = call.mismatched[name]
                    if difference is not None:
                        stats.max_abs_diff = max(stats.max_abs_diff or 0.0, difference)
            if not measured and name in graph.compile_errors:
                stats.errors.append(graph.compile_errors[name])
            stats.runs = len(samples)
            stats.mean_ms, stats.median_ms, stats.min_ms, stats.max_ms = _stats(samples)
            segment.backends[name] = stats
        segments.append(segment)

    return CompareBackendsResult(
        backends=names, segments=segments, repeats=repeats, warmups=warmups,
        graph_count=len(recorder.graphs), graph_break_count=break_count,
        graph_break_reasons=break_reasons, discarded_runs=discarded,
        measured_runs=len(measured), prices_per_hour=prices, rtol=rtol, atol=atol,
        environment=environment)


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        return False


def _environment(names: list[str]) -> dict[str, Any]:
    import platform

    import torch

    environment: dict[str, Any] = {"python": platform.python_version(),
                                   "torch": torch.__version__,
                                   "torch_threads": torch.get_num_threads(),
                                   "cpu_count": os.cpu_count(),
                                   "machine": platform.machine()}
    if "onnxruntime" in names:
        try:
            import onnxruntime

            environment["onnxruntime"] = onnxruntime.__version__
        except ImportError:
            environment["onnxruntime"] = None
    return environment


# ---- opsight compare-backends ---------------------------------------------------------------

USAGE_ERROR = 64  # as every opsight command (cli.py)


class _UsageError(Exception):
    pass


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="opsight compare-backends",
        description="Time a function on several back-ends, graph by graph (torch.compile "
                    "graphs and the Python between them), with totals and cost per million "
                    "calls. MODULE:FUNCTION names a callable that returns (fn, example_inputs).",
        epilog="Example: opsight compare-backends mymodels:make_predict --backends "
               "eager,inductor,onnxruntime --repeats 20 --price inductor=0.126 --format json")
    parser.add_argument("factory", metavar="MODULE:FUNCTION",
                        help="a module (importable, or a .py file) and a callable in it "
                             "returning (fn, example_inputs)")
    parser.add_argument("--backends", default=",".join(DEFAULT_BACKENDS),
                        help="comma-separated back-ends (default: %(default)s; also any "
                             "torch.compile back-end name)")
    parser.add_argument("--repeats", type=int, default=10, help="measured calls (default: 10)")
    parser.add_argument("--warmups", type=int, default=1,
                        help="discarded calls first (default: 1)")
    parser.add_argument("--price", action="append", default=[], metavar="BACKEND=USD_PER_HOUR",
                        help="price per hour of a back-end, for the cost per million calls "
                             "(repeatable)")
    parser.add_argument("--threads", type=int,
                        help="intra-op threads of torch and ONNX Runtime (default: theirs)")
    parser.add_argument("--rtol", type=float, default=1e-3,
                        help="relative tolerance of the output check")
    parser.add_argument("--atol", type=float, default=1e-5,
                        help="absolute tolerance of the output check")
    parser.add_argument("--format", choices=("text", "json"), default="text")
    return parser


def _load_factory(spec: str) -> Callable[[], Any]:
    module_name, colon, attribute = spec.rpartition(":")
    if not colon or not module_name or not attribute:
        raise _UsageError(f"{spec!r}: expected MODULE:FUNCTION (e.g. mymodels:make_predict)")
    try:
        if module_name.endswith(".py") or os.sep in module_name:
            path = os.path.abspath(module_name)
            if not os.path.isfile(path):
                raise _UsageError(f"{spec!r}: no file {module_name!r}")
            name = os.path.splitext(os.path.basename(path))[0]
            specification = importlib.util.spec_from_file_location(name, path)
            module = importlib.util.module_from_spec(specification)
            sys.modules[name] = module
            sys.path.insert(0, os.path.dirname(path))
            specification.loader.exec_module(module)
        else:
            if "" not in sys.path and os.getcwd() not in sys.path:
                sys.path.insert(0, os.getcwd())
            module = importlib.import_module(module_name)
    except _UsageError:
        raise
    except ImportError as error:
        raise _UsageError(f"{spec!r}: cannot import module {module_name!r}: {error}") from None
    except Exception as error:  # noqa: BLE001 - the module's own code failed
        raise _UsageError(f"{spec!r}: importing {module_name!r} raised "
                          f"{_error_text(error)}") from None
    target: Any = module
    for part in attribute.split("."):
        if not hasattr(target, part):
            raise _UsageError(f"{spec!r}: module {module_name!r} has no attribute "
                              f"{attribute!r}")
        target = getattr(target, part)
    if not callable(target):
        raise _UsageError(f"{spec!r}: {attribute!r} is not callable")
    return target


def _parse_prices(items: list[str], names: list[str]) -> dict[str, float]:
    prices = {}
    for item in items:
        name, equals, value = item.partition("=")
        if not equals or not name:
            raise _UsageError(f"--price {item!r}: expected BACKEND=USD_PER_HOUR")
        if name not in names:
            raise _UsageError(f"--price {item!r}: {name!r} is not one of --backends "
                              f"({', '.join(names)})")
        try:
            price = float(value)
        except ValueError:
            raise _UsageError(f"--price {item!r}: {value!r} is not a number") from None
        if not math.isfinite(price) or price < 0:
            raise _UsageError(f"--price {item!r}: the price must be a number >= 0")
        prices[name] = price
    return prices


@contextlib.contextmanager
def _stdout_to_stderr():
    sys.stdout.flush()
    try:
        saved = os.dup(1)
        os.dup2(2, 1)
    except OSError:  # no file descriptors to move (an embedding host): Python's only
        saved = None
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        sys.stdout.flush()
        if saved is not None:
            os.dup2(saved, 1)
            os.close(saved)


def command_main(arguments: list[str]) -> int:
    """``opsight compare-backends``: exit 0 ok, 1 the function or a capture failed,
    64 bad usage (the message names what is wrong)."""
    parser = _parser()
    try:
        options = parser.parse_args(arguments)
    except SystemExit as exit_:  # argparse: --help (0) or bad usage, message printed
        return 0 if not exit_.code else USAGE_ERROR
    prefix = "opsight compare-backends"
    try:
        if options.repeats < 1:
            raise _UsageError(f"--repeats {options.repeats}: must be >= 1")
        if options.warmups < 0:
            raise _UsageError(f"--warmups {options.warmups}: must be >= 0")
        if options.threads is not None and options.threads < 1:
            raise _UsageError(f"--threads {options.threads}: must be >= 1")
        names = [name.strip() for name in options.backends.split(",") if name.strip()]
        if not names:
            raise _UsageError("--backends: no back-end given")
        if len(set(names)) != len(names):
            raise _UsageError(f"--backends {options.backends!r}: a back-end is given twice")
        prices = _parse_prices(options.price, names)
        try:
            import torch  # noqa: F401
        except ImportError:
            print(f"{prefix}: torch is not installed (pip install torch)", file=sys.stderr)
            return 1
        try:
            _resolve_backends(names)
        except ValueError as error:
            raise _UsageError(f"--backends: {str(error).removeprefix('compare_backends: ')}") \
                from None
        factory = _load_factory(options.factory)
    except _UsageError as error:
        parser.print_usage(sys.stderr)
        print(f"{prefix}: error: {error}", file=sys.stderr)
        return USAGE_ERROR
    # What the program and torch print (the ONNX exporter prints failed graphs on fd 1)
    # goes to stderr: stdout carries the report alone, so that --format json parses.
    with _stdout_to_stderr():
        try:
            made = factory()
        except Exception as error:  # noqa: BLE001
            print(f"{prefix}: {options.factory} raised {_error_text(error)}", file=sys.stderr)
            return 1
        if not (isinstance(made, (tuple, list)) and len(made) == 2 and callable(made[0])):
            parser.print_usage(sys.stderr)
            print(f"{prefix}: error: {options.factory} must return (fn, example_inputs), got "
                  f"{type(made).__name__}", file=sys.stderr)
            return USAGE_ERROR
        fn, example_inputs = made
        try:
            result = compare_backends(fn, example_inputs, names, repeats=options.repeats,
                                      warmups=options.warmups, prices_per_hour=prices,
                                      rtol=options.rtol, atol=options.atol,
                                      threads=options.threads)
        except Exception as error:  # noqa: BLE001 - fn itself (or dynamo) failed
            print(f"{prefix}: running the function failed: {_error_text(error)}",
                  file=sys.stderr)
            return 1
    if options.format == "json":
        json.dump(result.to_dict(), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        result.print()
    return 0


if __name__ == "__main__":
    sys.exit(command_main(sys.argv[1:]))
