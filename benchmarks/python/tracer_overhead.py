"""What tracing one call of a no-op Python function costs: opsight against hiq-python,
VizTracer and cProfile, measured side by side in one process.

Run it in the benchmark environment (it has the other tracers; the project's .venv/ does
not)::

    scripts/setup_bench_env.sh && .venv-bench/bin/python benchmarks/python/tracer_overhead.py

Every variant calls a no-op function (``def f(): pass``, compiled afresh for each batch)
``number`` times in a ``timeit`` loop (garbage collector off, as timeit does), once per
round; the variants run interleaved, in a fresh random order each round, so that a noisy
neighbour or a frequency change hits all of them alike. Per variant the table gives the
median time per call over the rounds, and its overhead: the median over the rounds of
(variant − the plain call measured in the same round), counted two ways:

* **whole session, process CPU** (the headline figure, and the one the ratios to opsight
  use): the CPU time of every thread of the process from the tracer's start to the end of
  its stop, results in memory, divided by the calls. This is what a user pays: opsight
  records on the calling thread but streams from a background writer thread and builds
  its trace at stop; cProfile and VizTracer work inline and post-process at stop
  (``pstats.Stats``; VizTracer's ``load()`` of its buffer, what its ``parse()``/``save()``
  start with). The session's start and stop are spread over the batch's calls; the
  table splits the figure into the process's CPU time while the calls ran (every thread:
  opsight's writer works then) and the rest (start, stop, post-processing).
* **hot path** (the timed calls alone): wall-clock time and the calling thread's CPU time
  (which a busy machine's preemptions do not inflate), and the calling thread's CPU time
  in the fastest batches (fastest variant batch − fastest plain batch: this VM's cores run
  the same loop at two speeds, depending on its neighbours). A tracer that moves work off
  the calling thread looks cheaper here than it is.

Each tracer is switched on just before its batch and off just after it (outside the timed
loop), so only one tracer is active at a time:

* opsight: ``@opsight.trace`` (a native ``TracedFunction``) inside ``opsight.profile()``
  (in memory, a large buffer; the recorded spans and the drops are checked after each
  batch); the same with ``opsight.disable()``; the same with no session at all; a target
  of a targets file (``Instrumenter``) switched on and switched off (``disable()`` puts the
  original function back, so it must cost what the plain call costs); a traced method
  (the binding path); a traced ``async def`` awaited in an asyncio task.
* cProfile: ``Profile.enable()``: every call in the process is counted.
* VizTracer: ``VizTracer.start()`` traces every function call (its model), and
  ``@log_sparse`` with ``VizTracer(log_sparse=True)`` logs only the decorated function
  (its "trace one function" mode, the one comparable to a traced function).
* hiq-python: ``HiQLatency`` with a HiQ table naming the one function, as in its quick
  start (it swaps the module's function for its own wrapper), once with its defaults and
  once with ``HIQ_STATUS_CACHED`` (its documented setting that caches the global on/off
  switch instead of opening a shared-memory segment on every call).

Before the timed rounds, each tracer records a short calibration batch whose recorded
calls are counted (the ``recorded`` column): a tracer that silently recorded nothing
would look cheap. This is a benchmark, not a test: nothing here asserts on a time.

``--json PATH`` also writes the results as JSON; ``--combine A.json B.json ...`` prints
one table of the ranges over several runs (how docs/performance.md was made).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import importlib.metadata
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import time
import timeit
import types
from dataclasses import dataclass, field
from typing import Any, Callable

TARGET_MODULE = "opsight_bench_targets"


def load_target_module() -> types.ModuleType:
    """The module the traced functions live in (targets files and HiQ tables name
    functions by module)."""
    module = types.ModuleType(TARGET_MODULE)
    module.__file__ = f"<{TARGET_MODULE}>"
    sys.modules[TARGET_MODULE] = module
    return module


# Each batch calls a function compiled afresh (a new code object, a new function object,
# at new addresses), put into the target module under the variant's own name: one copy of
# `def f(): pass` was seen to run 30 ns slower than an identical one throughout a process
# (probably for where its code lay), and a fresh copy per batch turns such a bias into
# noise that the medians absorb.
def fresh_function(module: types.ModuleType, name: str, is_async: bool = False) -> Callable:
    source = f"{'async ' if is_async else ''}def {name}(): pass\n"
    exec(compile(source, module.__file__, "exec"), module.__dict__)
    return module.__dict__[name]


def fresh_instance(module: types.ModuleType, name: str, method: str) -> Any:
    """An instance of a fresh class ``name`` with one no-op method ``method``."""
    source = f"class {name}:\n    def {method}(self): pass\n"
    exec(compile(source, module.__file__, "exec"), module.__dict__)
    return module.__dict__[name]()


# ---- variants ---------------------------------------------------------------------------


@dataclass
class Variant:
    """One way of calling a no-op: ``start()`` switches its tracer on and returns what to
    call, ``stop()`` switches it off and returns notes (recorded calls, drops)."""

    key: str
    label: str
    group: str  # the baseline it is compared with: "function", "method" or "async"
    tool: str  # "baseline", "opsight", "cProfile", "VizTracer", "hiq-python"
    start: Callable[[], Any]
    stop: Callable[[int], dict[str, Any]] = lambda number: {}
    statement: str = "f()"  # timed with f (or o) bound to what start() returned
    is_async: bool = False
    notes: dict[str, Any] = field(default_factory=dict)

    def time_batch(self, number: int) -> tuple[float, float, float, float]:
        """Runs ``number`` calls with the tracer on; returns nanoseconds per call: wall-clock
        time and the calling thread's CPU time of the calls (the hot path), and the whole
        process's CPU time from the tracer's start to the end of its stop (every thread: a
        tracer that writes on a background thread, as opsight does, is charged for it
        there, and for its post-processing at stop, as inline tracers are). ``stop`` may
        return a callable under "_after": the benchmark's own checks, run once the process
        clock has stopped, whose notes are added. The fourth figure is the process's CPU
        time during the calls alone (every thread: opsight's writer works meanwhile), so
        that the whole session splits into the calls and the start + stop."""
        process_started = time.process_time_ns()
        subject = self.start()
        try:
            if self.is_async:
                calls_started = time.process_time_ns()
                cpu_started = time.thread_time_ns()
                seconds = run_async_batch(subject, number)
                cpu_ns = time.thread_time_ns() - cpu_started
                calls_ns = time.process_time_ns() - calls_started
            else:
                timer = timeit.Timer(self.statement, globals={"f": subject, "o": subject})
                calls_started = time.process_time_ns()
                cpu_started = time.thread_time_ns()
                seconds = timer.timeit(number)
                cpu_ns = time.thread_time_ns() - cpu_started
                calls_ns = time.process_time_ns() - calls_started
        finally:
            notes = self.stop(number)
        process_ns = time.process_time_ns() - process_started
        after = notes.pop("_after", None)
        if after is not None:
            notes.update(after())
        for name, value in notes.items():  # accumulated over the batches
            if isinstance(value, bool):  # a check: true only if it held in every batch
                self.notes[name] = self.notes.get(name, True) and value
            elif isinstance(value, (int, float)):
                self.notes[name] = self.notes.get(name, 0) + value
            else:
                self.notes[name] = value
        return seconds / number * 1e9, cpu_ns / number, process_ns / number, calls_ns / number


async def _await_many(function: Callable, number: int) -> float:
    clock = time.perf_counter
    started = clock()
    for _ in range(number):
        await function()
    return clock() - started


_event_loop: asyncio.AbstractEventLoop | None = None


def run_async_batch(function: Callable, number: int) -> float:
    """Awaits ``function()`` ``number`` times inside one asyncio task (gc off, as timeit)."""
    global _event_loop
    if _event_loop is None:
        _event_loop = asyncio.new_event_loop()
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _event_loop.run_until_complete(_await_many(function, number))
    finally:
        if gc_was_enabled:
            gc.enable()


def build_variants(module: types.ModuleType, tools: set[str]) -> list[Variant]:
    variants = [
        Variant("plain", "plain call (baseline)", "function", "baseline",
                lambda: fresh_function(module, "noop_plain")),
        Variant("plain_again", "plain call again (A/A control: measurement noise)", "function",
                "baseline", lambda: fresh_function(module, "noop_plain_again")),
        Variant("method_plain", "plain method call (baseline for methods)", "method", "baseline",
                lambda: fresh_instance(module, "PlainThing", "method"), statement="o.method()"),
        Variant("async_plain", "plain `async def`, awaited (baseline for async)", "async",
                "baseline", lambda: fresh_function(module, "anoop_plain", is_async=True),
                is_async=True),
    ]
    if "opsight" in tools:
        variants += opsight_variants(module)
    if "cProfile" in tools:
        variants += cprofile_variants(module)
    if "VizTracer" in tools:
        variants += viztracer_variants(module)
    if "hiq-python" in tools:
        variants += hiq_variants(module)
    return variants


def opsight_variants(module: types.ModuleType) -> list[Variant]:
    import opsight
    from opsight._capture.instrument import Instrumenter
    from opsight.targets import parse_targets

    def traced_instance() -> Any:
        instance = fresh_instance(module, "TracedThing", "method")
        cls = type(instance)
        cls.method = opsight.trace(cls.__dict__["method"])
        return instance

    def targets(function: str) -> Any:
        return parse_targets(f"- module: {TARGET_MODULE}\n  function: {function}\n", format="yaml")

    on_targets, off_targets = targets("noop_target"), targets("noop_target_off")
    state: dict[str, Any] = {}

    def recording(subject: Callable[[], Any]) -> Callable[[], Any]:
        def start() -> Any:
            state["profile"] = opsight.profile(buffer_mb=512).__enter__()
            return subject()
        return start

    def stopped(number: int, expected: int | None = None) -> dict[str, Any]:
        profile = state.pop("profile")
        profile.__exit__(None, None, None)  # the stop builds the trace in memory
        trace = profile.trace

        def after() -> dict[str, Any]:
            info = trace.run_info()
            notes = {"calls": number, "spans": int(info["slices"]),
                     "drops": int(info["events_dropped"])}
            if expected is not None:
                notes["expected_spans"] = expected
            return notes
        return {"_after": after}

    def target_on() -> Any:
        original = fresh_function(module, "noop_target")
        state["instrumenter"] = instrumenter = Instrumenter(on_targets)
        instrumenter.install()
        assert module.noop_target is not original, "the target was not wrapped"
        return module.noop_target

    def target_on_stop(number: int) -> dict[str, Any]:
        state.pop("instrumenter").uninstall()
        return stopped(number)

    def target_off() -> Any:
        state["original"] = fresh_function(module, "noop_target_off")
        state["instrumenter"] = instrumenter = Instrumenter(off_targets)
        instrumenter.install()
        assert module.noop_target_off is not state["original"], "the target was not wrapped"
        instrumenter.disable()  # switched off: the original function is back
        return module.noop_target_off

    def target_off_stop(number: int) -> dict[str, Any]:
        is_original = module.noop_target_off is state.pop("original")
        state.pop("instrumenter").uninstall()
        notes = stopped(number, expected=0)
        notes["is_original_function"] = is_original
        return notes

    def disabled_start() -> Any:
        opsight.disable()
        return opsight.trace(fresh_function(module, "noop_opsight_disabled"))

    def disabled_stop(number: int) -> dict[str, Any]:
        opsight.enable()
        return stopped(number, expected=0)

    return [
        Variant("opsight", "opsight `@trace`, recording (in memory)", "function", "opsight",
                recording(lambda: opsight.trace(fresh_function(module, "noop_opsight"))),
                stopped),
        Variant("opsight_target", "opsight target (targets file), recording", "function",
                "opsight", recording(target_on), target_on_stop),
        Variant("opsight_method", "opsight `@trace` on a method, recording", "method", "opsight",
                recording(traced_instance), stopped, statement="o.method()"),
        Variant("opsight_async", "opsight `@trace` on `async def`, recording", "async",
                "opsight",
                recording(lambda: opsight.trace(
                    fresh_function(module, "anoop_opsight", is_async=True))),
                stopped, is_async=True),
        Variant("opsight_disabled", "opsight `@trace` after `opsight.disable()`, session on",
                "function", "opsight", recording(disabled_start), disabled_stop),
        Variant("opsight_no_session", "opsight `@trace`, no session running", "function",
                "opsight",
                lambda: opsight.trace(fresh_function(module, "noop_opsight_no_session"))),
        Variant("opsight_target_off", "opsight target switched off (`disable()`), session on",
                "function", "opsight", recording(target_off), target_off_stop),
    ]


def cprofile_variants(module: types.ModuleType) -> list[Variant]:
    import cProfile
    import pstats

    state: dict[str, Any] = {}

    def start() -> Any:
        function = fresh_function(module, "noop_cprofile")
        state["profiler"] = profiler = cProfile.Profile()
        profiler.enable()
        return function

    def stop(number: int) -> dict[str, Any]:
        profiler = state.pop("profiler")
        profiler.disable()
        stats = pstats.Stats(profiler).stats  # {(file, line, name): (cc, nc, tt, ct, callers)}

        def after() -> dict[str, Any]:
            calls = sum(entry[1] for key, entry in stats.items() if key[2] == "noop_cprofile")
            return {"calls": number, "recorded_calls": calls}
        return {"_after": after}

    return [Variant("cprofile", "cProfile (every call in the process)", "function", "cProfile",
                    start, stop)]


def viztracer_variants(module: types.ModuleType) -> list[Variant]:
    from viztracer import VizTracer, log_sparse

    # log_sparse binds to the global tracer when it decorates: that is this one.
    sparse_tracer = VizTracer(log_sparse=True, verbose=0)
    full_tracer = VizTracer(verbose=0, register_global=False)

    def notes(tracer: Any, name: str, number: int) -> dict[str, Any]:
        # The results in memory, as a user gets them (parse() and save() start with this);
        # counted, and the buffer cleared, once the process clock has stopped.
        events = tracer.load()

        def after() -> dict[str, Any]:
            result: dict[str, Any] = {"calls": number}
            if number <= 10_000:  # the calibration batch: check what was recorded
                result["recorded_calls"] = sum(
                    1 for event in events if name in str(event.get("name", "")))
            tracer.clear()
            return result
        return {"_after": after}

    def full_start() -> Any:
        function = fresh_function(module, "noop_viztracer")
        full_tracer.start()
        return function

    def full_stop(number: int) -> dict[str, Any]:
        full_tracer.stop()
        return notes(full_tracer, "noop_viztracer", number)

    return [
        Variant("viztracer", "VizTracer, tracing (every function)", "function", "VizTracer",
                full_start, full_stop),
        Variant("viztracer_sparse", "VizTracer `@log_sparse` (one function)", "function",
                "VizTracer",
                lambda: log_sparse(fresh_function(module, "noop_viztracer_sparse")),
                lambda number: notes(sparse_tracer, "noop_viztracer_sparse", number)),
    ]


def hiq_variants(module: types.ModuleType) -> list[Variant]:
    import hiq
    import hiq.hiq_utils

    fresh_function(module, "noop_hiq")
    # The quick start's table, with our module: [module, class, function, tag]. HiQ wraps
    # the function at once; each batch switches it off, puts a fresh copy in, and on again.
    tracer = hiq.HiQLatency([[TARGET_MODULE, "", "noop_hiq", "noop_hiq"]])
    tracer.disable_hiq()
    state: dict[str, Any] = {}

    def starter(cached: bool) -> Callable[[], Any]:
        def start() -> Any:
            original = fresh_function(module, "noop_hiq")
            hiq.hiq_utils.HIQ_STATUS_CACHED = cached
            tracer.reset()
            tracer.enable_hiq()
            state["counter"] = tracer.check_oh_counter
            state["overhead_us"] = tracer.overhead_us
            assert module.noop_hiq is not original, "HiQ did not wrap the function"
            return module.noop_hiq
        return start

    def stop(number: int) -> dict[str, Any]:
        # HiQ's wrapper runs three self-timed steps per call (pre, post, update_overhead).
        recorded = (tracer.check_oh_counter - state["counter"]) // 3
        self_reported_ns = (tracer.overhead_us - state["overhead_us"]) * 1000.0
        tracer.disable_hiq()
        tracer.reset()
        hiq.hiq_utils.HIQ_STATUS_CACHED = False
        return {"calls": number, "recorded_calls": recorded, "self_reported_ns": self_reported_ns}

    return [
        Variant("hiq", "hiq-python `HiQLatency` (its defaults)", "function", "hiq-python",
                starter(False), stop),
        Variant("hiq_cached", "hiq-python `HiQLatency`, `HIQ_STATUS_CACHED=1`", "function",
                "hiq-python", starter(True), stop),
    ]


# ---- measuring --------------------------------------------------------------------------


def calibrate(variant: Variant, max_number: int, batch_seconds: float) -> int:
    """Calls per batch: ``max_number``, fewer for a tracer slow enough that a batch would
    take longer than ``batch_seconds``. The calibration batch also counts what was recorded."""
    variant.time_batch(200)  # warm up
    variant.notes.clear()
    per_call_ns = variant.time_batch(2000)[0]
    variant.notes = {"calibration": dict(variant.notes)}
    number = int(batch_seconds * 1e9 / max(per_call_ns, 1.0))
    return max(1000, min(max_number, number))


def measure(variants: list[Variant], rounds: int, max_number: int, batch_seconds: float,
            seed: int, progress: bool) -> dict[str, Any]:
    numbers = {variant.key: calibrate(variant, max_number, batch_seconds) for variant in variants}
    times: dict[str, list[float]] = {variant.key: [] for variant in variants}
    cpu_times: dict[str, list[float]] = {variant.key: [] for variant in variants}
    process_times: dict[str, list[float]] = {variant.key: [] for variant in variants}
    calls_process_times: dict[str, list[float]] = {variant.key: [] for variant in variants}
    order = list(variants)
    shuffle = random.Random(seed)
    for round_index in range(rounds):
        shuffle.shuffle(order)
        for variant in order:
            wall_ns, cpu_ns, process_ns, calls_ns = variant.time_batch(numbers[variant.key])
            times[variant.key].append(wall_ns)
            cpu_times[variant.key].append(cpu_ns)
            process_times[variant.key].append(process_ns)
            calls_process_times[variant.key].append(calls_ns)
        if progress:
            print(f"round {round_index + 1}/{rounds} done", file=sys.stderr)
    baselines = {"function": "plain", "method": "method_plain", "async": "async_plain"}
    results = []
    for variant in variants:
        samples = times[variant.key]
        baseline = times[baselines[variant.group]]
        differences = [value - base for value, base in zip(samples, baseline)]
        cpu_samples = cpu_times[variant.key]
        cpu_differences = [value - base
                           for value, base in zip(cpu_samples, cpu_times[baselines[variant.group]])]
        process_differences = [
            value - base for value, base in zip(process_times[variant.key],
                                                process_times[baselines[variant.group]])]
        calls_differences = [
            value - base for value, base in zip(calls_process_times[variant.key],
                                                calls_process_times[baselines[variant.group]])]
        row = {
            "key": variant.key,
            "label": variant.label,
            "tool": variant.tool,
            "group": variant.group,
            "calls_per_batch": numbers[variant.key],
            "batches": rounds,
            "median_ns": statistics.median(samples),
            "min_ns": min(samples),
            "max_ns": max(samples),
            "overhead_ns": statistics.median(differences),
            "samples_ns": samples,
            "cpu_median_ns": statistics.median(cpu_samples),
            "cpu_overhead_ns": statistics.median(cpu_differences),
            "cpu_samples_ns": cpu_samples,
            "process_cpu_overhead_ns": statistics.median(process_differences),
            # Of the whole session: the calls (every thread, while they ran), and the rest
            # (start, stop and post-processing) as the difference of the two medians.
            "calls_process_cpu_overhead_ns": statistics.median(calls_differences),
            # The fastest batch against the baseline's fastest: the overhead when nothing
            # else slowed the core down (this VM's speed varies with its neighbours).
            "best_overhead_ns": min(samples) - min(baseline),
            "best_cpu_overhead_ns": min(cpu_samples) - min(cpu_times[baselines[variant.group]]),
            "notes": variant.notes,
        }
        results.append(row)
    reference = next((row for row in results if row["key"] == "opsight"), None)
    for row in results:
        if reference is None or row["tool"] == "baseline":
            continue
        if reference["overhead_ns"] > 0:
            row["overhead_over_opsight"] = row["overhead_ns"] / reference["overhead_ns"]
        if reference["cpu_overhead_ns"] > 0:
            row["cpu_overhead_over_opsight"] = row["cpu_overhead_ns"] / reference["cpu_overhead_ns"]
        if reference["process_cpu_overhead_ns"] > 0:
            row["process_cpu_overhead_over_opsight"] = (row["process_cpu_overhead_ns"]
                                                        / reference["process_cpu_overhead_ns"])
    return {
        "results": results,
        "opsight_overhead_ns": reference["overhead_ns"] if reference else None,
        "opsight_cpu_overhead_ns": reference["cpu_overhead_ns"] if reference else None,
        "opsight_process_cpu_overhead_ns":
            reference["process_cpu_overhead_ns"] if reference else None,
    }


# ---- reporting --------------------------------------------------------------------------


def environment() -> dict[str, Any]:
    def version(name: str) -> str | None:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            return None

    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as file:
            for line in file:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        commit = subprocess.run(["git", "describe", "--always", "--dirty"], capture_output=True,
                                text=True, cwd=os.path.dirname(os.path.abspath(__file__)),
                                timeout=10).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        commit = None
    return {
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "cpu": cpu,
        "cpus": os.cpu_count(),
        "load_average": os.getloadavg() if hasattr(os, "getloadavg") else None,
        "git": commit,
        "versions": {name: version(name)
                     for name in ("opsight", "hiq-python", "py-itree", "viztracer")},
        "date": time.strftime("%Y-%m-%d %H:%M:%S %z"),
    }


def format_recorded(notes: dict[str, Any]) -> str:
    calibration = notes.get("calibration", {})
    parts = []
    if "spans" in notes:
        expected = notes.get("expected_spans", notes.get("calls"))
        parts.append(f"{notes['spans']}/{expected} spans, {notes.get('drops', 0)} dropped")
    elif "recorded_calls" in calibration:
        parts.append(f"{calibration['recorded_calls']}/{calibration['calls']} calls")
    if notes.get("is_original_function") is True:
        parts.append("the original function")
    elif notes.get("is_original_function") is False:
        parts.append("NOT the original function")
    if "self_reported_ns" in notes and notes.get("calls"):
        parts.append(f"HiQ's own overhead figure: "
                     f"{notes['self_reported_ns'] / notes['calls'] / 1000:.1f} µs/call")
    return "; ".join(parts)


BASELINE_KEYS = ("plain", "method_plain", "async_plain")


def _ratio_text(row: dict[str, Any], key: str, digits: int = 1) -> str:
    if row["key"] == "opsight":
        return "1"
    value = row.get(key)
    if value is None or row["tool"] in ("baseline", "opsight"):
        return ""
    return f"{value:.{0 if value >= 100 else digits}f}×"


def _microseconds_or_ns(value: float, signed: bool = False) -> str:
    sign = "+" if signed else ""
    if abs(value) >= 10_000:
        return f"{value / 1000:{sign}.1f} µs"
    return f"{value:{sign}.1f} ns"


# Which figure is which, in both tables: "whole session" is process CPU (every thread) from
# the tracer's start to the end of its stop, results in memory; "hot path" is the timed
# calls alone, on the calling thread.
TABLE_NOTE = ("whole session: the process's CPU time (every thread) from the tracer's start "
              "to the end of its stop, results in memory, per call, over the plain call's "
              "(split into the process's CPU time while the calls ran and the rest: start, "
              "stop, post-processing); "
              "hot path: the timed calls alone (wall time, and the calling thread's CPU "
              "time), over the plain call's. Ratios: a tracer's overhead over opsight "
              "`@trace`'s, the same figure in the same run.")


def markdown(run: dict[str, Any]) -> str:
    lines = [
        "| variant | per call, wall (median) | **whole session: overhead, process CPU** | "
        "**× opsight, whole session** | of which: the calls (all threads) / start + stop | "
        "hot path: overhead, wall | hot path: overhead, "
        "thread CPU | hot path: fastest batches (thread CPU) | × opsight, hot path "
        "(wall / thread CPU) | recorded |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in run["results"]:
        baseline = row["key"] in BASELINE_KEYS
        overhead = "" if baseline else _microseconds_or_ns(row["overhead_ns"], signed=True)
        cpu_overhead = "" if baseline else _microseconds_or_ns(row["cpu_overhead_ns"], signed=True)
        process = "" if baseline else _microseconds_or_ns(row["process_cpu_overhead_ns"],
                                                          signed=True)
        best = "" if baseline else _microseconds_or_ns(row["best_cpu_overhead_ns"], signed=True)
        split = ""
        if not baseline and "calls_process_cpu_overhead_ns" in row:
            calls = row["calls_process_cpu_overhead_ns"]
            split = (f"{_microseconds_or_ns(calls, signed=True)} / "
                     f"{_microseconds_or_ns(row['process_cpu_overhead_ns'] - calls, signed=True)}")
        process_ratio = _ratio_text(row, "process_cpu_overhead_over_opsight")
        ratio = _ratio_text(row, "overhead_over_opsight")
        cpu_ratio = _ratio_text(row, "cpu_overhead_over_opsight")
        ratios = f"{ratio} / {cpu_ratio}" if ratio else ""
        lines.append(f"| {row['label']} | {_microseconds_or_ns(row['median_ns'])} | {process} | "
                     f"{process_ratio} | {split} | {overhead} | {cpu_overhead} | {best} | "
                     f"{ratios} | {format_recorded(row['notes'])} |")
    env = run["environment"]
    settings = run["settings"]
    lines += [
        "",
        TABLE_NOTE,
        "",
        f"{env['cpu']}, {env['cpus']} CPUs, Python {env['python']}, load average "
        f"{', '.join(f'{value:.2f}' for value in env['load_average'] or [])} before, "
        f"{', '.join(f'{value:.2f}' for value in run.get('load_average_after') or [])} after; "
        f"{', '.join(f'{name} {value}' for name, value in env['versions'].items())}; "
        f"{settings['rounds']} interleaved rounds of up to {settings['number']} calls per batch "
        f"(fewer for slow tracers: at most {settings['batch_seconds']} s a batch).",
    ]
    overhead = run.get("opsight_overhead_ns")
    if overhead is not None:
        verdict = "met" if overhead <= 150 else "NOT met"
        best = next(row for row in run["results"] if row["key"] == "opsight")["best_cpu_overhead_ns"]
        process = next(row for row in run["results"]
                       if row["key"] == "opsight")["process_cpu_overhead_ns"]
        lines.append(f"opsight `@trace`, whole session: {process:.1f} ns of process CPU per call "
                     "from start to stop (its background writer, start and stop included); hot "
                     f"path: {overhead:.1f} ns wall, {run['opsight_cpu_overhead_ns']:.1f} ns "
                     f"thread CPU, {best:.1f} ns in the fastest batches (issue 3's target for "
                     f"the traced call, ≤ 150 ns on the hot path: {verdict}).")
    return "\n".join(lines)


def combine(paths: list[str]) -> str:
    """One table of ranges (lowest to highest of the runs' medians) over several JSON runs."""
    runs = []
    for path in paths:
        with open(path) as file:
            runs.append(json.load(file))
    keys = [row["key"] for row in runs[0]["results"]]

    def span(values: list[float], unit: str = " ns", digits: int = 0, signed: bool = False) -> str:
        low, high = min(values), max(values)
        if unit == " ns" and min(abs(low), abs(high)) >= 10_000:
            low, high, unit, digits = low / 1000, high / 1000, " µs", 1
        if unit == "×" and low >= 100:
            digits = 0
        form = f"{{:{'+' if signed else ''}.{digits}f}}"
        if form.format(low) == form.format(high):
            return form.format(low) + unit
        return f"{form.format(low)} to {form.format(high)}{unit}"

    lines = [
        f"| variant | per call, wall (median; range of {len(runs)} runs) | "
        "**whole session: overhead, process CPU** | **× opsight, whole session** | "
        "of which: the calls (all threads) / start + stop | "
        "hot path: overhead, wall | hot path: overhead, thread CPU | "
        "hot path: fastest batches (thread CPU) | × opsight, hot path, wall | "
        "× opsight, hot path, thread CPU |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for key in keys:
        rows = [next(row for row in run["results"] if row["key"] == key) for run in runs]
        first = rows[0]
        overhead = cpu_overhead = best = process = split = ""
        if key not in BASELINE_KEYS:
            calls_values = [row.get("calls_process_cpu_overhead_ns") for row in rows]
            if None not in calls_values and None not in [row.get("process_cpu_overhead_ns")
                                                         for row in rows]:
                split = (span(calls_values, signed=True) + " / " +
                         span([row["process_cpu_overhead_ns"] - row["calls_process_cpu_overhead_ns"]
                               for row in rows], signed=True))
            process_values = [row.get("process_cpu_overhead_ns") for row in rows]
            process = ("—" if None in process_values  # runs from before it was measured
                       else span(process_values, signed=True))
            digits = 1 if key in ("plain_again", "opsight_target_off") else 0
            overhead = span([row["overhead_ns"] for row in rows], digits=digits, signed=True)
            cpu_overhead = span([row["cpu_overhead_ns"] for row in rows], digits=digits, signed=True)
            best = span([row["best_cpu_overhead_ns"] for row in rows], digits=digits, signed=True)
        ratios = []
        for name in ("process_cpu_overhead_over_opsight", "overhead_over_opsight",
                     "cpu_overhead_over_opsight"):
            values = [row.get(name) for row in rows]
            if key == "opsight":
                ratios.append("1")
            elif first["tool"] not in ("baseline", "opsight") and None not in values:
                ratios.append(span(values, unit="×", digits=1))
            else:
                ratios.append("")
        lines.append(f"| {first['label']} | {span([row['median_ns'] for row in rows])} | "
                     f"{process} | {ratios[0]} | {split} | {overhead} | {cpu_overhead} | {best} | "
                     f"{ratios[1]} | {ratios[2]} |")
    lines += ["", TABLE_NOTE]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=25, help="interleaved rounds (default 25)")
    parser.add_argument("--number", type=int, default=100_000,
                        help="calls per batch for the fast variants (default 100000)")
    parser.add_argument("--batch-seconds", type=float, default=0.2,
                        help="at most this long a batch: slow tracers get fewer calls (default 0.2)")
    parser.add_argument("--tools", default="opsight,cProfile,VizTracer,hiq-python",
                        help="comma-separated tracers to compare (default: all)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the per-round order")
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    parser.add_argument("--combine", nargs="+", metavar="JSON",
                        help="print one table of ranges over earlier --json runs, and exit")
    parser.add_argument("--quiet", action="store_true", help="no progress on stderr")
    arguments = parser.parse_args()
    if arguments.combine:
        print(combine(arguments.combine))
        return 0

    tools = {tool.strip() for tool in arguments.tools.split(",") if tool.strip()}
    environment_before = environment()
    module = load_target_module()
    try:
        variants = build_variants(module, tools)
    except ImportError as error:
        print(f"tracer_overhead: {error}; run it in the benchmark environment: "
              "scripts/setup_bench_env.sh && .venv-bench/bin/python "
              "benchmarks/python/tracer_overhead.py", file=sys.stderr)
        return 2
    run = measure(variants, arguments.rounds, arguments.number, arguments.batch_seconds,
                  arguments.seed, progress=not arguments.quiet)
    run["environment"] = environment_before
    run["load_average_after"] = os.getloadavg() if hasattr(os, "getloadavg") else None
    run["settings"] = {"rounds": arguments.rounds, "number": arguments.number,
                       "batch_seconds": arguments.batch_seconds, "seed": arguments.seed,
                       "tools": sorted(tools)}
    print(markdown(run))
    if arguments.json:
        with open(arguments.json, "w") as file:
            json.dump(run, file, indent=1, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
