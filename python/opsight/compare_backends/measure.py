"""``compare_backends()`` itself: the recording torch.compile back-end that runs every
graph on every back-end at each call, the output check, and the statistics per segment."""

from __future__ import annotations

import collections
import copy
import math
import os
import statistics
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from ..models import canonical_backend, compare_outputs, error_text, first_line, leaves
from .backends import DEFAULT_BACKENDS, Compiler, resolve_backends
from .result import BackendStats, CompareBackendsResult, Segment


# ---- measuring ------------------------------------------------------------------------------

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
                graph.compile_errors[name] = f"compilation failed: {error_text(error)}"
                continue
            try:
                # Lazy work a back-end does on its first runs (TorchScript's profiling
                # executor optimises after two) belongs to compilation, not to the runs.
                if name != "eager":
                    for _ in range(_PRIMING_RUNS):
                        compiled(*_copy_inputs(example_inputs, graph.mutated))
            except Exception as error:  # noqa: BLE001
                graph.compile_errors[name] = f"first run failed: {error_text(error)}"
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
                errors[name] = f"run failed: {error_text(error)}"
        if "eager" in outputs:
            reference = outputs["eager"]
        else:  # eager not chosen (or failed): the graph as captured gives the result
            reference = graph.graph_module(*arguments)
        mismatched: dict[str, float | None] = {}
        for name, output in outputs.items():
            if name == "eager":
                continue
            try:
                agree, largest = compare_outputs(reference, output, self.rtol, self.atol)
            except Exception as error:  # noqa: BLE001
                agree, largest = False, None
                errors.setdefault(name, f"output check failed: {error_text(error)}")
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
            line = first_line(reason)
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
    resolved = resolve_backends(backends, threads)
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
                    for value in leaves(list(example_inputs)))
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

    if any(canonical_backend(name) == "ort-cpu" for name in names):
        try:
            import onnxruntime

            environment["onnxruntime"] = onnxruntime.__version__
        except ImportError:
            environment["onnxruntime"] = None
    return environment
