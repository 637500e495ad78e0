"""What the raw timestamps of the timed queries give directly: each query's latency, each
phase's duration, the elapsed time of the run.

The latency *statistics* (mean, percentiles, standard deviation) are not computed here:
they come from opsight's core, over the trace the queries are recorded in
(:mod:`.recording`), as for every other opsight report. ``STATISTIC_KEYS`` are the keys of
those distributions in the bench report (all values in nanoseconds).
"""

from __future__ import annotations

from .scenarios import Timings

STATISTIC_KEYS = ["count", "mean_ns", "min_ns", "p50_ns", "p75_ns", "p90_ns", "p95_ns", "p99_ns",
                  "p999_ns", "max_ns", "stddev_ns"]


def query_latencies(timings: Timings) -> list[int]:
    """Each query's latency: end minus start, or, in the server scenario, end minus its
    scheduled arrival (so time spent waiting behind earlier queries counts)."""
    width = timings.width
    stamps = timings.stamps
    arrivals = timings.arrivals
    latencies = []
    for index in range(timings.count):
        if index in timings.flagged:
            continue
        end = stamps[index * width + width - 1]
        begin = arrivals[index] if arrivals is not None else stamps[index * width]
        latencies.append(end - begin)
    return latencies


def phase_durations(timings: Timings) -> list[tuple[str, list[int]]]:
    """Per phase (with ``queue`` first in the server scenario), its duration per counted query."""
    width = timings.width
    stamps = timings.stamps
    counted = [index for index in range(timings.count) if index not in timings.flagged]
    phases: list[tuple[str, list[int]]] = []
    if timings.arrivals is not None:
        phases.append(("queue", [stamps[index * width] - timings.arrivals[index]
                                 for index in counted]))
    for position, name in enumerate(timings.phase_names):
        phases.append((name, [stamps[index * width + position + 1] - stamps[index * width + position]
                              for index in counted]))
    return phases


def counted_elapsed_ns(timings: Timings) -> int:
    """Wall time of the timed queries, first start (or arrival) to last end, less the time of
    flagged queries (a compilation is not throughput)."""
    count = timings.count
    if count == 0:
        return 0
    if timings.arrivals is not None:
        first = timings.arrivals[0]
    else:
        width = timings.width
        first = min(timings.stamps[0:count * width:width])
    last = max(timings.end(index) for index in range(count))
    elapsed = last - first
    for index in timings.flagged:
        elapsed -= timings.end(index) - timings.start(index)
    return max(elapsed, 0)
