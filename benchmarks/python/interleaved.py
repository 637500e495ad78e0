"""Interleaved rounds for the tracer benchmarks that time each variant two ways (the hot
path inside the session, and the whole session as a user pays it): every round runs every
variant once, in an order reversed every other round so that no variant always runs first;
the figures are medians over rounds."""

from __future__ import annotations

import statistics
from typing import Callable

# -> (hot path ns, whole session ns), optionally followed by more figures (CPU times...)
Variant = Callable[[], "tuple[int, ...]"]


def run_rounds(variants: dict[str, Variant], rounds: int) -> dict[str, tuple[float, ...]]:
    """{name: (median of each figure the variant returns)} over ``rounds`` rounds: (median
    hot path ns, median whole session ns, ...)."""
    figures: dict[str, list[tuple[int, ...]]] = {name: [] for name in variants}
    for round_index in range(rounds):
        names = list(variants)
        if round_index % 2:
            names.reverse()
        for name in names:
            figures[name].append(tuple(variants[name]()))
    return {name: tuple(statistics.median(column) for column in zip(*figures[name]))
            for name in variants}
