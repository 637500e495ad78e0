"""Pictures of an ``opsight bench --generate`` report, drawn with matplotlib: the sweep's
throughput-latency Pareto frontier, and the distributions of TTFT, TPOT and ITL of each
point (empirical CDFs, one line per point, so that points of a sweep compare at a glance).

The format follows the file's extension (``.svg``, ``.png``, ``.pdf``: whatever matplotlib
writes). matplotlib is imported only here, when a plot is asked for; without it the error
says how to install it.
"""

from __future__ import annotations

import os
from typing import Any

#: What ``pip install`` gives the plots (the version the tests run with).
MATPLOTLIB_REQUIREMENT = "matplotlib==3.11.2"

_FORMATS = (".svg", ".png", ".pdf")


class PlotError(ValueError):
    """A plot that cannot be drawn (no matplotlib, an unknown file format)."""


def _pyplot():
    try:
        import matplotlib
    except ImportError as error:
        raise PlotError(f"--plot needs matplotlib ({error}): pip install "
                        f"{MATPLOTLIB_REQUIREMENT}") from None
    matplotlib.use("Agg", force=True)  # files only: never a window, no display needed
    import matplotlib.pyplot as pyplot
    return pyplot


def check_plot_path(path: str) -> None:
    """Refuses, before any request is sent, a plot file matplotlib cannot write or a
    missing matplotlib."""
    if os.path.splitext(path)[1].lower() not in _FORMATS:
        raise PlotError(f"--plot {path}: the file must end in {', '.join(_FORMATS)}")
    _pyplot()


def pareto_frontier(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """The (latency, throughput) points no other point beats on both (lower latency and
    higher throughput), by ascending latency."""
    frontier: list[tuple[float, float]] = []
    for latency, throughput in sorted(points):
        if not frontier or throughput > frontier[-1][1]:
            frontier.append((latency, throughput))
    return frontier


def write_sweep_plot(report: dict[str, Any], path: str, metric: str = "ttft") -> None:
    """Writes the figure of ``report`` (what ``run_sweep`` returns) to ``path``: the
    throughput against p50 and p99 ``metric`` with the p99 frontier, then the CDFs of TTFT,
    TPOT and ITL per point."""
    check_plot_path(path)
    pyplot = _pyplot()
    key = report["key"]
    points = report["points"]
    figure, axes = pyplot.subplots(1, 4, figsize=(19, 4.6), constrained_layout=True)
    frontier_axes, *cdf_axes = axes

    by_p99: list[tuple[float, float]] = []
    for point in points:
        summary = point["summary"]
        throughput = summary["output_tokens_per_second"] or 0.0
        latency = summary["metrics"][metric]
        p50 = (latency["p50"] or 0) / 1e6
        p99 = (latency["p99"] or 0) / 1e6
        by_p99.append((p99, throughput))
        frontier_axes.plot([p50, p99], [throughput, throughput], color="0.75", zorder=1)
        frontier_axes.scatter([p50], [throughput], color="#3366cc", zorder=2)
        frontier_axes.scatter([p99], [throughput], color="#cc3333", marker="s", zorder=2)
        frontier_axes.annotate(f"{key}={point[key]:g}", (p99, throughput),
                               textcoords="offset points", xytext=(6, 4), fontsize=8)
    frontier = pareto_frontier(by_p99)
    if len(frontier) > 1:
        frontier_axes.plot(*zip(*frontier), color="#cc3333", linewidth=2, zorder=1,
                           label="Pareto frontier (p99)")
    frontier_axes.scatter([], [], color="#3366cc", label=f"{metric.upper()} p50")
    frontier_axes.scatter([], [], color="#cc3333", marker="s", label=f"{metric.upper()} p99")
    frontier_axes.set_xlabel(f"{metric.upper()} (ms)")
    frontier_axes.set_ylabel("output tokens/s")
    frontier_axes.set_title(f"{report['model']}: throughput-latency ({key} sweep)", fontsize=10)
    # Room above and right of the points for their labels.
    frontier_axes.set_xlim(0, max((p for p, _ in by_p99), default=1) * 1.25 or 1)
    frontier_axes.set_ylim(0, max((t for _, t in by_p99), default=1) * 1.2 or 1)
    frontier_axes.legend(fontsize=8, loc="lower right")
    frontier_axes.grid(alpha=0.3)

    for axis, (name, label) in zip(cdf_axes, (("ttft", "time to first token"),
                                              ("tpot", "time per output token"),
                                              ("itl", "inter-token latency"))):
        for point in points:
            values: list[float] = []
            for request in point["requests"]:
                if not request["ok"]:
                    continue
                if name == "itl":
                    values.extend(request["itl_ns"])
                elif request[f"{name}_ns"] is not None:
                    values.append(request[f"{name}_ns"])
            if not values:
                continue
            values = sorted(value / 1e6 for value in values)
            fractions = [(index + 1) / len(values) for index in range(len(values))]
            axis.step(values, fractions, where="post", label=f"{key}={point[key]:g}")
        axis.set_xlabel(f"{name.upper()} (ms)")
        axis.set_ylabel("fraction of " + ("tokens" if name == "itl" else "requests"))
        axis.set_title(label, fontsize=10)
        axis.set_ylim(0, 1.02)
        axis.set_xlim(left=0)
        axis.grid(alpha=0.3)
        if axis.get_legend_handles_labels()[0]:
            axis.legend(fontsize=8, loc="lower right")
    figure.savefig(path)
    pyplot.close(figure)
