"""The timed queries as a trace of opsight's core, and their statistics from it.

The loops of :mod:`.scenarios` take ``time.perf_counter_ns()`` (CLOCK_MONOTONIC) stamps
into preallocated Python lists and do nothing else inside a query. Once the run is over,
:class:`QueryRecorder` writes every query into an in-memory recording session of the core
(``opsight._native.Session("")``) as spans at those times: one ``query`` span from the
query's start (in the server scenario from its scheduled arrival, so that queueing counts)
to its end, with a ``queue`` child (server) and one child per phase. A query during which a
compilation happened is named ``compiling query`` (with ``flagged=compilation``), so that
it stays in the trace but out of the ``query`` statistics. Queries that overlap in time
(queueing, several workers) go on async tracks of their own ("lanes"), since spans on one
track must nest.

Everything the report shows then comes from that trace, as every other opsight report
does: the latency distribution and the phase table are the core's breakdown of ``query``
(``trace.render("breakdown", "json", span="query")``: population standard deviation,
percentiles interpolated linearly between ranks), the stored run and any Chrome JSON are
``trace.write``. So ``opsight bench`` and ``opsight report RUN --summary`` agree on every
statistic of ``query``.

Why after the run and not in the loop: a native begin/end call costs more than a
``perf_counter_ns`` read and a list store (benchmarks/python/bench_harness.py measures
both), and the session is paused during the run, so nothing records into it (neither the
stream writer nor the model's own traced code) while the queries are timed.
"""

from __future__ import annotations

import heapq
import json
import time
from typing import Any

import opsight._native as _native
from ..models import ModelError
from .scenarios import Timings

_perf_counter_ns = time.perf_counter_ns

#: The recorder's clock is mapped onto perf_counter_ns over at least this long a window.
_MINIMUM_CALIBRATION_NS = 20_000_000
#: Statistic keys of the core's distributions that the bench report carries.
_DISTRIBUTION_KEYS = ("count", "mean_ns", "min_ns", "p50_ns", "p75_ns", "p90_ns", "p95_ns",
                      "p99_ns", "p999_ns", "max_ns", "stddev_ns")


def _clock_pair() -> tuple[int, int]:
    """(recorder ticks, perf_counter_ns) read together: the narrowest of a few brackets."""
    best: tuple[int, int, int] | None = None
    ticks_now = _native.metric_ticks
    for _ in range(7):
        before = _perf_counter_ns()
        ticks = ticks_now()
        after = _perf_counter_ns()
        if best is None or after - before < best[0]:
            best = (after - before, ticks, (before + after) // 2)
    assert best is not None
    return best[1], best[2]


class QueryRecorder:
    """Records the timed queries of one benchmark run into a recording session of its own.

    :meth:`start` (before the timed loop) starts an in-memory session, paused, and reads
    the recorder's clock against ``perf_counter_ns``; :meth:`finish` (after it) reads the
    clock again, writes every query as spans at its measured times (ticks on the line
    through the two readings), stops the session and returns the trace. It then replaces
    the timestamps in ``timings`` with the trace's own, so that what ``BenchResult.timings``
    holds is exactly what the statistics were computed from (they differ from the measured
    ones by the clock mapping's rounding, a nanosecond at most over a query).

    Thread-safety: one thread calls start and finish; nothing records from other threads
    while finish writes.
    """

    def __init__(self) -> None:
        self._session: Any = None
        self._pair: tuple[int, int] = (0, 0)

    def start(self, expected_queries: int | None, phase_count: int) -> None:
        from .._session import state as _session_state

        if _session_state.session is not None:
            raise ModelError("a recording session is already running (OPSIGHT_OUTPUT or "
                             "opsight run): opsight bench records its queries in a session "
                             "of its own; run it outside that session")
        # 16-byte events: a begin and an end per span, a query and its children; an
        # estimate for a run by duration, grown by the stream writer's recycling otherwise.
        queries = expected_queries or 200_000
        events_bytes = queries * (2 + 2 * (phase_count + 1)) * 16 + queries * 48
        buffer_mb = max(16, int(events_bytes * 1.5) // (1 << 20) + 8)
        session = _native.Session("", buffer_mb, 100, 0)
        if not session.ok:
            raise ModelError(f"opsight bench: cannot start a recording session: {session.error}")
        session.pause()
        self._session = session
        self._pair = _clock_pair()

    def abort(self) -> None:
        if self._session is not None:
            session, self._session = self._session, None
            session.stop()

    def finish(self, timings: Timings, name: str = "opsight bench") -> Any:
        session = self._session
        if session is None:
            raise RuntimeError("QueryRecorder.finish before start")
        ticks_0, ns_0 = self._pair
        waited = _perf_counter_ns() - ns_0
        if waited < _MINIMUM_CALIBRATION_NS:
            time.sleep((_MINIMUM_CALIBRATION_NS - waited) / 1e9)
        ticks_1, ns_1 = _clock_pair()
        slope = (ticks_1 - ticks_0) / (ns_1 - ns_0)
        session.resume()
        try:
            _write_queries(timings, ticks_0 - ns_0 * slope + 0.5, slope)
        finally:
            self._session = None
            ok = session.stop()
        if not ok:
            raise ModelError(f"opsight bench: the recording session failed: {session.error}")
        if session.events_dropped:
            raise ModelError(f"opsight bench: {session.events_dropped} events of the timed "
                             "queries were dropped (out of recording memory)")
        trace = _native.trace_from_native_bytes(session.take_native_bytes(), name)
        _use_trace_times(trace, timings)
        return trace


def _lanes(begins: list[int], ends: list[int], order: list[int]) -> list[int]:
    """A lane per query such that the queries of one lane do not overlap (greedy interval
    colouring in ``order`` of their begins; the lowest free lane is taken)."""
    if all(ends[previous] <= begins[following]
           for previous, following in zip(order, order[1:])):
        return [0] * len(begins)  # back to back: one lane
    lanes = [0] * len(begins)
    free: list[int] = []
    busy: list[tuple[int, int]] = []
    next_lane = 0
    for index in order:
        begin = begins[index]
        while busy and busy[0][0] <= begin:
            heapq.heappush(free, heapq.heappop(busy)[1])
        if free:
            lane = heapq.heappop(free)
        else:
            lane, next_lane = next_lane, next_lane + 1
        lanes[index] = lane
        heapq.heappush(busy, (ends[index], lane))
    return lanes


def _write_queries(timings: Timings, intercept: float, slope: float) -> None:
    """Writes every query as spans; a time ``ns`` is written as ``int(intercept + ns *
    slope)`` ticks."""
    register = _native.register_name
    query_id = register("query", "bench")
    compiling_id = register("compiling query", "bench")
    queue_id = register("queue", "bench")
    phase_ids = list(enumerate(register(name, "bench") for name in timings.phase_names))
    begin_at, end_at, add_arg = _native.begin_at, _native.end_at, _native.add_arg
    width = timings.width
    count = timings.count
    stamps = timings.stamps
    arrivals = timings.arrivals
    flagged = timings.flagged
    ticks = [int(intercept + value * slope) for value in stamps[:count * width]]
    begins = arrivals[:count] if arrivals is not None else stamps[0:count * width:width]
    begin_ticks = ([int(intercept + value * slope) for value in begins]
                   if arrivals is not None else ticks[0:count * width:width])
    ends = stamps[width - 1:count * width:width]
    order = sorted(range(count), key=begins.__getitem__)
    lanes = _lanes(begins, ends, order)
    current_lane = 0
    named: set[int] = set()
    for index in order:
        lane = lanes[index]
        if lane != current_lane:
            if lane == 0 or lane in named:
                _native.switch_track(lane)
            else:
                named.add(lane)
                _native.switch_track(lane, f"queries, lane {lane + 1}")
            current_lane = lane
        base = index * width
        is_flagged = index in flagged
        if not begin_at(compiling_id if is_flagged else query_id, begin_ticks[index]):
            raise ModelError("opsight bench: the recording session stopped recording")
        if is_flagged:
            add_arg("flagged", "compilation")
        if arrivals is not None:
            begin_at(queue_id, begin_ticks[index])
            end_at(ticks[base])
        for position, phase_id in phase_ids:
            begin_at(phase_id, ticks[base + position])
            end_at(ticks[base + position + 1])
        end_at(ticks[base + width - 1])
    if current_lane != 0:
        _native.switch_track(0)


def _use_trace_times(trace: Any, timings: Timings) -> None:
    """Replaces the measured stamps by the trace's. The mapping measured -> trace is
    monotonic, so the sorted distinct values of both correspond one to one (unless two
    measured values fell on one trace nanosecond: then the measured stamps are kept)."""
    names = ["query", *timings.phase_names]
    if timings.flagged:
        names.append("compiling query")
    if timings.arrivals is not None:
        names.append("queue")
    recorded: set[int] = set()
    for name in set(names):
        times = trace.slice_times(name)
        recorded.update(start for _, start, _ in times)
        recorded.update(end for _, _, end in times)
    count = timings.count
    measured = set(timings.stamps[:count * timings.width])
    if timings.arrivals is not None:
        measured.update(timings.arrivals[:count])
    if len(measured) != len(recorded):
        return
    mapping = dict(zip(sorted(measured), sorted(recorded)))
    timings.stamps[:] = [mapping[value] for value in timings.stamps]
    if timings.arrivals is not None:
        timings.arrivals[:] = [mapping[value] for value in timings.arrivals]


def _distribution(values: dict[str, Any]) -> dict[str, Any]:
    count = int(values.get("count") or 0)
    if count == 0:
        return {key: (0 if key == "count" else None) for key in _DISTRIBUTION_KEYS}
    return {key: (count if key == "count" else values.get(key)) for key in _DISTRIBUTION_KEYS}


def query_statistics(trace: Any, phase_order: list[str]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The latency distribution of ``query`` and one row per phase, from the core's
    breakdown of ``query`` (``opsight report --breakdown query --format json``)."""
    breakdown = json.loads(trace.render("breakdown", "json", span="query"))
    latency = _distribution(breakdown.get("total") or {})
    rows = {row.get("phase"): row for row in breakdown.get("phases", []) if not row.get("uncovered")}
    phases = []
    for name in phase_order:
        row = rows.get(name, {})
        statistics = _distribution(row)
        share = row.get("share_of_mean") if statistics["count"] else None
        phases.append({"name": name, **statistics, "share_of_mean": share})
    return latency, phases
