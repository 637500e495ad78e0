"""Scenarios, after MLPerf LoadGen's: how queries are issued and what counts as latency.

- ``single-stream``: one query at a time, the next as soon as the previous one ends; the
  figure of merit is latency (LoadGen reports the 90th percentile).
- ``offline``: queries back to back for throughput (samples per second). LoadGen's offline
  hands every sample over at once; with one worker issuing in order that is the same loop
  as single-stream, so only the headline figure differs: samples/s over the whole run.
- ``server``: queries arrive as a Poisson process at ``qps`` queries per second (arrival
  times drawn up front from a seeded generator). One worker thread issues them in arrival
  order: a query that arrives while the previous one still runs waits, and its latency
  counts from its scheduled arrival, so queueing shows. The run passes when the 99th
  percentile latency stays within ``p99_bound_ms``. (LoadGen's server runs many queries at
  once; one worker is the model of a server with one model instance.)

Every query records ``perf_counter_ns`` at its start and at the end of each phase; nothing
else runs between a query's start and end. When the query is the compute phase alone and
no compilation counter is read, the loop calls the model directly (see
``benchmarks/python/bench_harness.py`` for what the loop costs).
"""

from __future__ import annotations

import random
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from .backends import Prepared

SCENARIOS = ("single-stream", "offline", "server")
_perf_counter_ns = time.perf_counter_ns


@dataclass
class Timings:
    """Raw timestamps of the timed queries (perf_counter_ns, i.e. CLOCK_MONOTONIC)."""

    phase_names: list[str]
    #: Per query ``1 + len(phase_names)`` timestamps: its start, then the end of each phase.
    stamps: list[int]
    #: Server: each query's scheduled arrival; None in the other scenarios.
    arrivals: list[int] | None
    #: Indices of the queries during which a compilation happened.
    flagged: set[int] = field(default_factory=set)
    warmup_iterations: int = 0
    warmup_ns: int = 0
    warmup_compilations: int = 0

    @property
    def width(self) -> int:
        return 1 + len(self.phase_names)

    @property
    def count(self) -> int:
        return len(self.stamps) // self.width

    def start(self, index: int) -> int:
        return self.stamps[index * self.width]

    def end(self, index: int) -> int:
        return self.stamps[index * self.width + self.width - 1]


def parse_duration(text: str | float | int | None, option: str) -> tuple[int | None, float | None]:
    """``"100"`` -> (100 iterations, None); ``"2s"``, ``"500ms"``, ``"1.5m"`` -> (None, seconds)."""
    if text is None:
        return None, None
    if isinstance(text, bool):
        raise ValueError(f"{option}: expected a number of iterations or a duration (2s)")
    if isinstance(text, int):
        if text < 0:
            raise ValueError(f"{option}: {text} is negative")
        return text, None
    if isinstance(text, float):
        raise ValueError(f"{option}: give an iteration count (an integer) or a duration string")
    value = text.strip().lower()
    for suffix, scale in (("ms", 1e-3), ("us", 1e-6), ("s", 1.0), ("m", 60.0)):
        if value.endswith(suffix):
            try:
                seconds = float(value[:-len(suffix)]) * scale
            except ValueError:
                break
            if not seconds >= 0 or seconds == float("inf"):
                break
            return None, seconds
    else:
        try:
            count = int(value)
        except ValueError:
            count = -1
        if count >= 0:
            return count, None
    raise ValueError(f"{option} {text!r}: expected a number of iterations (100) or a duration "
                     "(2s, 500ms, 1m)")


class Progress:
    """A progress bar on stderr, drawn by a thread of its own every 0.1 s once the run has
    lasted a second, so that the timed loop pays nothing for it."""

    def __init__(self, enabled: bool, label: str, count: Callable[[], int],
                 iterations: int | None, seconds: float | None) -> None:
        self.enabled = enabled
        self.label = label
        self.count = count
        self.iterations = iterations
        self.seconds = seconds
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._drawn = False

    def __enter__(self) -> "Progress":
        if self.enabled:
            self._begin = time.monotonic()
            self._thread = threading.Thread(target=self._draw_loop, name="opsight-bench-progress",
                                            daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc_info: Any) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            if self._drawn:
                sys.stderr.write("\r\033[K")
                sys.stderr.flush()

    def _draw_loop(self) -> None:
        if self._stop.wait(1.0):
            return
        while not self._stop.wait(0.1):
            elapsed = time.monotonic() - self._begin
            done = self.count()
            fractions = []
            if self.iterations:
                fractions.append(done / self.iterations)
            if self.seconds:
                fractions.append(elapsed / self.seconds)
            fraction = min(1.0, min(fractions)) if fractions else 0.0
            filled = int(fraction * 30)
            sys.stderr.write(f"\r{self.label} [{'#' * filled}{'.' * (30 - filled)}] "
                             f"{fraction * 100:3.0f}%  {done} queries  {elapsed:.1f} s")
            sys.stderr.flush()
            self._drawn = True


def warm_up(prepared: Prepared, iterations: int | None, seconds: float | None,
            timings: Timings) -> None:
    begin = _perf_counter_ns()
    deadline = begin + int(seconds * 1e9) if seconds is not None else None
    compilations = prepared.compilations
    before = compilations() if compilations else 0
    done = 0
    while (iterations is not None and done < iterations) or (
            deadline is not None and _perf_counter_ns() < deadline):
        prepared.query()
        done += 1
    timings.warmup_iterations = done
    timings.warmup_ns = _perf_counter_ns() - begin
    timings.warmup_compilations = (compilations() - before) if compilations else 0


def _keep_going(count: int, now: int, iterations: int | None, deadline: int | None) -> bool:
    if iterations is not None and count < iterations:
        return True
    return deadline is not None and now < deadline


def run_back_to_back(prepared: Prepared, iterations: int | None, seconds: float | None,
                     progress: bool, label: str) -> Timings:
    """single-stream and offline: each query starts when the previous one ended."""
    names = [name for name, _ in prepared.phases]
    stamps: list[int] = []
    timings = Timings(names, stamps, None)
    width = 1 + len(names)
    with Progress(progress, label, lambda: len(stamps) // width, iterations, seconds):
        if prepared.direct_call is not None and prepared.compilations is None:
            _direct_loop(prepared.direct_call, stamps, iterations, seconds)
        else:
            _phase_loop(prepared, timings, iterations, seconds)
    return timings


def _direct_loop(direct_call: tuple[Callable[..., Any], tuple], stamps: list[int],
                 iterations: int | None, seconds: float | None) -> None:
    function, arguments = direct_call
    clock = _perf_counter_ns
    append = stamps.append
    if seconds is None:
        # Unpacking an argument tuple costs tens of ns: the common arities call directly.
        if len(arguments) == 0:
            for _ in range(iterations or 0):
                start = clock()
                function()
                end = clock()
                append(start)
                append(end)
        elif len(arguments) == 1:
            argument, = arguments
            for _ in range(iterations or 0):
                start = clock()
                function(argument)
                end = clock()
                append(start)
                append(end)
        else:
            for _ in range(iterations or 0):
                start = clock()
                function(*arguments)
                end = clock()
                append(start)
                append(end)
        return
    deadline = clock() + int(seconds * 1e9)
    minimum = iterations or 0
    count = 0
    while True:
        start = clock()
        function(*arguments)
        end = clock()
        append(start)
        append(end)
        count += 1
        if end >= deadline and count >= minimum:
            return


def _phase_loop(prepared: Prepared, timings: Timings, iterations: int | None,
                seconds: float | None) -> None:
    phases = [function for _, function in prepared.phases]
    query_input = prepared.query_input
    compilations = prepared.compilations
    flagged = timings.flagged
    clock = _perf_counter_ns
    append = timings.stamps.append
    deadline = clock() + int(seconds * 1e9) if seconds is not None else None
    count = 0
    while _keep_going(count, clock(), iterations, deadline):
        before = compilations() if compilations else 0
        value = query_input
        append(clock())
        for phase in phases:
            value = phase(value)
            append(clock())
        if compilations and compilations() != before:
            flagged.add(count)
        count += 1


def _wait_until(moment: int) -> None:
    """Sleeps until 100 µs before ``moment``, then spins. (A longer spin is worse on a busy
    machine: a spinning thread uses up its time slice and waits for the CPU for
    milliseconds, where a thread woken from sleep is scheduled at once.)"""
    remaining = moment - _perf_counter_ns()
    if remaining > 200_000:
        time.sleep((remaining - 100_000) / 1e9)
    while _perf_counter_ns() < moment:
        pass


def run_server(prepared: Prepared, qps: float, iterations: int | None, seconds: float | None,
               progress: bool, label: str, seed: int = 0) -> Timings:
    """Poisson arrivals at ``qps``; one worker issues the queries in arrival order."""
    names = [name for name, _ in prepared.phases]
    arrivals: list[int] = []
    timings = Timings(names, [], arrivals)
    phases = [function for _, function in prepared.phases]
    query_input = prepared.query_input
    compilations = prepared.compilations
    generator = random.Random(seed)
    clock = _perf_counter_ns
    append = timings.stamps.append
    width = 1 + len(names)
    horizon = int(seconds * 1e9) if seconds is not None else None
    with Progress(progress, label, lambda: len(timings.stamps) // width, iterations, seconds):
        origin = clock() + 1_000_000
        offset = 0.0
        count = 0
        while True:
            offset += generator.expovariate(qps)
            arrival = origin + int(offset * 1e9)
            if not _keep_going(count, arrival - origin, iterations, horizon):
                break
            if clock() < arrival:
                _wait_until(arrival)
            before = compilations() if compilations else 0
            arrivals.append(arrival)
            value = query_input
            append(clock())
            for phase in phases:
                value = phase(value)
                append(clock())
            if compilations and compilations() != before:
                timings.flagged.add(count)
            count += 1
    return timings
