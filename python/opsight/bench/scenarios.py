"""Scenarios, after MLPerf LoadGen's: how queries are issued and what counts as latency.

- ``single-stream``: one query at a time, the next as soon as the previous one ends; the
  figure of merit is latency (LoadGen reports the 90th percentile).
- ``offline``: every sample is issued at once, as LoadGen's offline scenario does: the
  samples (``iterations x batch_size``) are split into batches of ``batch_size``, one
  query each, all queued at the start, and ``workers`` threads (1 by default) take them
  in order until none is left. The figure of merit is throughput: samples per second
  from the first query's start to the last one's end. With ``duration`` the number of
  batches is sized up front from the warm-up's rate (LoadGen sizes its one offline query
  from the expected throughput the same way).
- ``server``: queries arrive as a Poisson process at ``qps`` queries per second (arrival
  times drawn up front from a seeded generator) and wait in one FIFO queue; ``workers``
  threads (1 by default: a server with one model instance) take them in arrival order. A
  query that arrives while every worker is busy waits, and its latency counts from its
  scheduled arrival, so queueing shows. The run passes when the 99th percentile latency
  stays within ``p99_bound_ms``.

Every query records ``perf_counter_ns`` at its start and at the end of each phase into a
Python list; nothing else runs between a query's start and end. When the query is the
compute phase alone and no compilation counter is read, the loop calls the model directly
(see ``benchmarks/python/bench_harness.py`` for what the loop costs). The queries become
spans of a trace only after the run (:mod:`.recording`).

Several workers are threads of this process: they run in parallel only where the model
releases the GIL (PyTorch and ONNX Runtime operators do), and each enters the back-end's
run context (``torch.inference_mode``) itself.
"""

from __future__ import annotations

import itertools
import math
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

    def begin(self, index: int) -> int:
        """Where the query's latency starts: its scheduled arrival (server), else its start."""
        return self.arrivals[index] if self.arrivals is not None else self.start(index)


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


def _run_workers(workers: int, work: Callable[[], None], run_context: Callable[[], Any]) -> None:
    """Runs ``work`` in ``workers`` threads (each in ``run_context()``); re-raises the first
    exception one of them raised."""
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            with run_context():
                work()
        except BaseException as error:  # noqa: BLE001 - handed to the calling thread
            errors.append(error)

    threads = [threading.Thread(target=worker, name=f"opsight-bench-worker-{number + 1}")
               for number in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]


def _queue_worker(prepared: Prepared, timings: Timings, count: int, next_index: Callable[[], int],
                  taken: list[int], wait: bool) -> Callable[[], None]:
    """What one worker does: take the next query of the queue (an index), wait for its
    arrival (server), run its phases, record the stamps in the query's slots."""
    phases = [function for _, function in prepared.phases]
    query_input = prepared.query_input
    compilations = prepared.compilations
    flagged = timings.flagged
    stamps = timings.stamps
    arrivals = timings.arrivals
    width = timings.width
    clock = _perf_counter_ns

    def work() -> None:
        while True:
            index = next_index()
            if index >= count:
                return
            taken[0] = index + 1
            if wait and arrivals is not None and clock() < arrivals[index]:
                _wait_until(arrivals[index])
            before = compilations() if compilations else 0
            slot = index * width
            value = query_input
            stamps[slot] = clock()
            for position, phase in enumerate(phases, start=1):
                value = phase(value)
                stamps[slot + position] = clock()
            if compilations and compilations() != before:
                flagged.add(index)
    return work


def offline_query_count(iterations: int | None, seconds: float | None,
                        warmup_iterations: int, warmup_ns: int,
                        probe: Callable[[], int]) -> int:
    """How many batches the offline scenario issues: ``iterations``, or with ``seconds``
    enough for that long at the warm-up's rate (``probe()`` times one query when there
    was no warm-up), whichever is more."""
    count = iterations or 0
    if seconds is not None:
        per_query = warmup_ns / warmup_iterations if warmup_iterations else probe()
        count = max(count, math.ceil(seconds * 1e9 / max(per_query, 1)))
    return max(count, 1)


def run_offline(prepared: Prepared, count: int, workers: int, progress: bool,
                label: str) -> Timings:
    """offline: ``count`` queries (batches) issued at once; ``workers`` threads drain them."""
    if workers == 1:
        return run_back_to_back(prepared, count, None, progress, label)
    names = [name for name, _ in prepared.phases]
    timings = Timings(names, [0] * (count * (1 + len(names))), None)
    taken = [0]
    next_index = itertools.count().__next__
    with Progress(progress, label, lambda: taken[0], count, None):
        _run_workers(workers, _queue_worker(prepared, timings, count, next_index, taken, False),
                     prepared.run_context)
    return timings


def poisson_arrivals(qps: float, iterations: int | None, seconds: float | None,
                     seed: int) -> list[float]:
    """Arrival offsets (seconds from the start) of a Poisson process at ``qps``: that many,
    or those within ``seconds``, or both (at least that many and that long)."""
    generator = random.Random(seed)
    horizon = int(seconds * 1e9) if seconds is not None else None
    offsets: list[float] = []
    offset = 0.0
    while True:
        offset += generator.expovariate(qps)
        if not _keep_going(len(offsets), int(offset * 1e9), iterations, horizon):
            return offsets
        offsets.append(offset)


def run_server(prepared: Prepared, qps: float, iterations: int | None, seconds: float | None,
               progress: bool, label: str, seed: int = 0, workers: int = 1) -> Timings:
    """Poisson arrivals at ``qps`` into one FIFO queue; ``workers`` threads serve it."""
    names = [name for name, _ in prepared.phases]
    offsets = poisson_arrivals(qps, iterations, seconds, seed)
    count = len(offsets)
    timings = Timings(names, [0] * (count * (1 + len(names))), [])
    taken = [0]
    next_index = itertools.count().__next__
    with Progress(progress, label, lambda: taken[0], iterations, seconds):
        origin = _perf_counter_ns() + 1_000_000
        assert timings.arrivals is not None
        timings.arrivals.extend(origin + int(offset * 1e9) for offset in offsets)
        work = _queue_worker(prepared, timings, count, next_index, taken, True)
        if workers == 1:
            work()  # in this thread, already inside the back-end's run context
        else:
            _run_workers(workers, work, prepared.run_context)
    return timings
