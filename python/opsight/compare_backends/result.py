"""What :func:`compare_backends` returns: ``CompareBackendsResult``, its ``Segment`` rows and
each back-end's ``BackendStats``, with the totals, costs, table, dict and DataFrame."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any


# ---- the result -----------------------------------------------------------------------------

@dataclass
class BackendStats:
    """One back-end's runs of one graph segment (times in milliseconds)."""
    runs: int = 0
    failures: int = 0
    mean_ms: float | None = None
    median_ms: float | None = None
    min_ms: float | None = None
    max_ms: float | None = None
    mismatches: int = 0
    max_abs_diff: float | None = None
    errors: list[str] = field(default_factory=list)


@dataclass
class Segment:
    """A segment of a call of ``fn``: a compiled graph, or the Python between graphs.

    ``kind`` is ``"graph"`` or ``"uncompiled"``; a graph segment has its ``graph_id`` (1, 2...,
    in capture order; one graph can be several segments when ``fn`` calls it more than
    once), ``op_count`` (call nodes of the FX graph) and per back-end ``backends``; an
    uncompiled segment has its own ``runs`` and times, shared by every back-end."""
    index: int
    kind: str
    graph_id: int | None = None
    op_count: int | None = None
    backends: dict[str, BackendStats] = field(default_factory=dict)
    runs: int = 0
    mean_ms: float | None = None
    median_ms: float | None = None
    min_ms: float | None = None
    max_ms: float | None = None


def _round(value: float | None, digits: int = 6) -> float | None:
    return None if value is None else round(value, digits)


@dataclass
class CompareBackendsResult:
    """What :func:`compare_backends` measured; ``print()``/``table()``, ``to_dict()``,
    ``dataframe()``."""
    backends: list[str]
    segments: list[Segment]
    repeats: int
    warmups: int
    graph_count: int
    graph_break_count: int
    graph_break_reasons: list[str]
    discarded_runs: dict[str, int]
    measured_runs: int
    prices_per_hour: dict[str, float]
    rtol: float
    atol: float
    environment: dict[str, Any]

    # ---- derived figures -------------------------------------------------------------------
    @property
    def uncompiled_total_ms(self) -> float | None:
        segments = [segment for segment in self.segments if segment.kind == "uncompiled"]
        if not segments or any(segment.mean_ms is None for segment in segments):
            return None
        return sum(segment.mean_ms for segment in segments)

    def compiled_total_ms(self, backend: str) -> float | None:
        """Sum of the backend's mean graph times; None when one of its graphs never ran."""
        total = 0.0
        for segment in self.segments:
            if segment.kind == "graph":
                mean = segment.backends[backend].mean_ms
                if mean is None:
                    return None
                total += mean
        return total

    def total_ms(self, backend: str) -> float | None:
        """Estimated time of one call of ``fn`` on ``backend``: compiled + uncompiled."""
        compiled, uncompiled = self.compiled_total_ms(backend), self.uncompiled_total_ms
        if compiled is None or uncompiled is None:
            return None
        return compiled + uncompiled

    def cost_per_million(self, backend: str) -> float | None:
        """Price of a million calls of ``fn`` on ``backend`` at its price per hour."""
        price, total = self.prices_per_hour.get(backend), self.total_ms(backend)
        if price is None or total is None:
            return None
        return total / 1000.0 * price / 3600.0 * 1e6

    @property
    def failures(self) -> dict[str, int]:
        return {backend: sum(segment.backends[backend].failures for segment in self.segments
                             if segment.kind == "graph") for backend in self.backends}

    @property
    def errors(self) -> dict[str, list[str]]:
        found: dict[str, list[str]] = {}
        for segment in self.segments:
            for backend, stats in segment.backends.items():
                for error in stats.errors:
                    line = f"graph #{segment.graph_id}: {error}"
                    if line not in found.setdefault(backend, []):
                        found[backend].append(line)
        return found

    # ---- presentation ----------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        segments = []
        for segment in self.segments:
            row: dict[str, Any] = {"index": segment.index, "kind": segment.kind}
            if segment.kind == "graph":
                row["graph_id"] = segment.graph_id
                row["op_count"] = segment.op_count
                row["backends"] = {
                    name: {"runs": stats.runs, "failures": stats.failures,
                           "mean_ms": _round(stats.mean_ms), "median_ms": _round(stats.median_ms),
                           "min_ms": _round(stats.min_ms), "max_ms": _round(stats.max_ms),
                           "mismatches": stats.mismatches, "max_abs_diff": stats.max_abs_diff,
                           "errors": list(stats.errors)}
                    for name, stats in segment.backends.items()}
            else:
                row.update(runs=segment.runs, mean_ms=_round(segment.mean_ms),
                           median_ms=_round(segment.median_ms), min_ms=_round(segment.min_ms),
                           max_ms=_round(segment.max_ms))
            segments.append(row)
        return {
            "backends": list(self.backends),
            "repeats": self.repeats,
            "warmups": self.warmups,
            "measured_runs": self.measured_runs,
            "discarded_runs": dict(self.discarded_runs),
            "graph_count": self.graph_count,
            "graph_break_count": self.graph_break_count,
            "graph_break_reasons": list(self.graph_break_reasons),
            "segments": segments,
            "uncompiled_total_ms": _round(self.uncompiled_total_ms),
            "totals": {
                backend: {"compiled_ms": _round(self.compiled_total_ms(backend)),
                          "uncompiled_ms": _round(self.uncompiled_total_ms),
                          "total_ms": _round(self.total_ms(backend)),
                          "failures": self.failures[backend],
                          "price_per_hour": self.prices_per_hour.get(backend),
                          "cost_per_million": _round(self.cost_per_million(backend))}
                for backend in self.backends},
            "prices_per_hour": dict(self.prices_per_hour),
            "errors": self.errors,
            "tolerance": {"rtol": self.rtol, "atol": self.atol},
            "environment": dict(self.environment),
        }

    def dataframe(self):
        """One row per segment and back-end (uncompiled segments: one row, backend None)."""
        import pandas

        rows = []
        for segment in self.segments:
            base = {"segment": segment.index, "kind": segment.kind,
                    "graph_id": segment.graph_id, "op_count": segment.op_count}
            if segment.kind == "graph":
                for name, stats in segment.backends.items():
                    rows.append({**base, "backend": name, "runs": stats.runs,
                                 "mean_ms": stats.mean_ms, "median_ms": stats.median_ms,
                                 "min_ms": stats.min_ms, "max_ms": stats.max_ms,
                                 "failures": stats.failures, "mismatches": stats.mismatches})
            else:
                rows.append({**base, "backend": None, "runs": segment.runs,
                             "mean_ms": segment.mean_ms, "median_ms": segment.median_ms,
                             "min_ms": segment.min_ms, "max_ms": segment.max_ms,
                             "failures": 0, "mismatches": 0})
        return pandas.DataFrame(rows)

    def table(self) -> str:
        """octoml-profile's table: segments, runs, mean and median ms, failures; then the
        totals (from the means), costs, graph break reasons and failures."""
        def ms(value: float | None) -> str:
            return "-" if value is None else f"{value:.3f}"

        name_width = max([len("Segment") + 4] + [len(name) + 5 for name in self.backends]
                         + [len(f"{len(self.segments)}  Graph #{self.graph_count} (00000 ops)")])
        header = (f"{'Segment':<{name_width}}  {'Runs':>6}  {'Mean ms':>9}  {'Median ms':>9}  "
                  f"{'Failures':>8}")
        lines = []
        discarded = ", ".join(f"{count} {why}" for why, count in self.discarded_runs.items()
                              if count) or "none"
        lines.append(f"Runs discarded: {discarded}")
        lines.append(f"Graphs: {self.graph_count}, graph breaks: {self.graph_break_count}")
        lines.append(header)
        lines.append("=" * len(header))
        for segment in self.segments:
            if segment.kind == "uncompiled":
                label = f"{segment.index:<3}Uncompiled"
                lines.append(f"{label:<{name_width}}  {segment.runs:>6}  "
                             f"{ms(segment.mean_ms):>9}  {ms(segment.median_ms):>9}")
            else:
                label = f"{segment.index:<3}Graph #{segment.graph_id} ({segment.op_count} ops)"
                lines.append(label)
                for name, stats in segment.backends.items():
                    note = f"  {stats.mismatches} mismatched" if stats.mismatches else ""
                    lines.append(f"{'     ' + name:<{name_width}}  {stats.runs:>6}  "
                                 f"{ms(stats.mean_ms):>9}  {ms(stats.median_ms):>9}  "
                                 f"{stats.failures:>8}{note}")
            lines.append("")
        if lines[-1] == "":
            lines.pop()
        lines.append("-" * len(header))
        lines.append(f"Total uncompiled code run time: {ms(self.uncompiled_total_ms)} ms")
        with_cost = any(self.cost_per_million(name) is not None for name in self.backends)
        lines.append("Total times (compiled + uncompiled) per back-end, ms"
                     + (", and cost per million calls at the given price per hour:"
                        if with_cost else ":"))
        width = max(len(name) for name in self.backends)
        for name in self.backends:
            line = f"    {name:<{width}}  {ms(self.total_ms(name)):>9}"
            cost = self.cost_per_million(name)
            if cost is not None:
                line += f"  ${cost:,.4f} (at ${self.prices_per_hour[name]}/h)"
            lines.append(line)
        if not self.measured_runs:
            lines.append("No measured runs: every call was a warm-up, compiled something or "
                         "took another path; raise repeats")
        if self.graph_break_reasons:
            lines.append("Graph break reasons:")
            lines.extend(f"    {reason}" for reason in self.graph_break_reasons)
        errors = self.errors
        if errors:
            lines.append("Failures:")
            for name, messages in errors.items():
                lines.extend(f"    {name}: {message}" for message in messages)
        return "\n".join(lines) + "\n"

    def print(self, file=None) -> None:
        (file or sys.stdout).write(self.table())

    def __str__(self) -> str:
        return self.table()

