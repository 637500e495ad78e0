"""Interleaved rounds for the tracer benchmarks that time each variant two ways (the hot
path inside the session, and the whole session as a user pays it): every round runs every
variant once, in an order reversed every other round so that no variant always runs first;
the figures are medians over rounds."""

from __future__ import annotations

import statistics
from typing import Callable

Variant = Callable[[], "tuple[int, int]"]  # -> (hot path ns, whole session ns)


def run_rounds(variants: dict[str, Variant], rounds: int) -> dict[str, tuple[float, float]]:
    """{name: (median hot path ns, median whole session ns)} over ``rounds`` rounds."""
    hot: dict[str, list[int]] = {name: [] for name in variants}
    whole: dict[str, list[int]] = {name: [] for name in variants}
    for round_index in range(rounds):
        names = list(variants)
        if round_index % 2:
            names.reverse()
        for name in names:
            hot_ns, whole_ns = variants[name]()
            hot[name].append(hot_ns)
            whole[name].append(whole_ns)
    return {name: (statistics.median(hot[name]), statistics.median(whole[name]))
            for name in variants}
