"""Interleaved rounds for the tracer benchmarks that time each variant two ways (the hot
path inside the session, and the whole session as a user pays it): every round runs every
variant once, in an order reversed every other round so that no variant always runs first;
the figures are medians over rounds."""

from __future__ import annotations

import math
import statistics
from typing import Callable

# -> (hot path ns, whole session ns), optionally followed by more figures (CPU times...)
Variant = Callable[[], "tuple[int, ...]"]


def run_rounds_raw(variants: dict[str, Variant],
                   rounds: int) -> dict[str, list[tuple[int, ...]]]:
    """{name: [the figures the variant returned in each round]}, rounds in order."""
    figures: dict[str, list[tuple[int, ...]]] = {name: [] for name in variants}
    for round_index in range(rounds):
        names = list(variants)
        if round_index % 2:
            names.reverse()
        for name in names:
            figures[name].append(tuple(variants[name]()))
    return figures


def run_rounds(variants: dict[str, Variant], rounds: int) -> dict[str, tuple[float, ...]]:
    """{name: (median of each figure the variant returns)} over ``rounds`` rounds: (median
    hot path ns, median whole session ns, ...)."""
    figures = run_rounds_raw(variants, rounds)
    return {name: tuple(statistics.median(column) for column in zip(*figures[name]))
            for name in variants}


def median_ratios(figures: dict[str, list[tuple[int, ...]]],
                  baseline: str) -> dict[str, tuple[float, ...]]:
    """{name: (median over rounds of each figure / the baseline's figure in the same round)}:
    a slow stretch of the machine hits both sides of each ratio alike. A figure the
    baseline does not have (0) gives nan."""
    return {name: tuple(statistics.median(value / base if base else math.nan
                                          for value, base in zip(column, base_column))
                        for column, base_column in zip(zip(*rounds), zip(*figures[baseline])))
            for name, rounds in figures.items()}
