"""Latency statistics of the timed queries.

Percentiles interpolate linearly between the two nearest ranks (numpy's default, R's type
7): ``p`` of ``n`` sorted values sits at rank ``p/100 * (n - 1)``. ``stddev`` is the sample
standard deviation (``n - 1``). All values are nanoseconds, rounded to 0.1 ns.
"""

from __future__ import annotations

import math
from typing import Sequence

from .scenarios import Timings

PERCENTILES = (("p50", 50.0), ("p75", 75.0), ("p90", 90.0), ("p95", 95.0), ("p99", 99.0),
               ("p999", 99.9))
STATISTIC_KEYS = ["count", "mean_ns", "min_ns", "p50_ns", "p75_ns", "p90_ns", "p95_ns", "p99_ns",
                  "p999_ns", "max_ns", "stddev_ns"]


def percentile(ordered: Sequence[int], fraction: float) -> float:
    if not ordered:
        return math.nan
    rank = fraction * (len(ordered) - 1)
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def distribution(values: Sequence[int]) -> dict[str, float | int | None]:
    """count, mean, min, p50 ... p99.9, max, stddev of ``values`` (ns); None when empty."""
    count = len(values)
    if count == 0:
        return {key: (0 if key == "count" else None) for key in STATISTIC_KEYS}
    ordered = sorted(values)
    mean = math.fsum(ordered) / count
    variance = math.fsum((value - mean) ** 2 for value in ordered) / (count - 1) if count > 1 else 0.0
    # Rounded to 0.1 ns, as the core's reports are.
    result: dict[str, float | int | None] = {"count": count, "mean_ns": round(mean, 1),
                                             "min_ns": ordered[0]}
    for key, value in PERCENTILES:
        result[f"{key}_ns"] = round(percentile(ordered, value / 100.0), 1)
    result["max_ns"] = ordered[-1]
    result["stddev_ns"] = round(math.sqrt(variance), 1)
    return result


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
    if timings.count == 0:
        return 0
    first = timings.arrivals[0] if timings.arrivals is not None else timings.start(0)
    elapsed = timings.end(timings.count - 1) - first
    for index in timings.flagged:
        elapsed -= timings.end(index) - timings.start(index)
    return max(elapsed, 0)
