""":class:`BenchResult`: what one benchmark measured, as data (``to_dict``), text, JSON or
CSV.

The text report follows the shape of the latency reports of Furiosa's profiler ("Inference
Results Summary": count, min, max, mean, median, p90 ... p99.9) and Qualcomm's Cloud AI
tools (one row per part of an inference, columns mean, min, p50, p75, p90, p95, p99, max):
one row for the whole query, then one per phase. Every statistic in it is the core's (the
breakdown of the ``query`` spans of :attr:`BenchResult.trace`, see :mod:`.recording`).
"""

from __future__ import annotations

import csv
import io
import json
import math
import sys
from dataclasses import dataclass, field
from typing import IO, Any

from .statistics import STATISTIC_KEYS

_UNITS = (("ns", 1.0), ("µs", 1e3), ("ms", 1e6), ("s", 1e9))


def _unit_for(value: float | None) -> tuple[str, float]:
    if value is None or not math.isfinite(value):
        return "ms", 1e6
    for name, scale in reversed(_UNITS):
        if value >= scale:
            return name, scale
    return "ns", 1.0


def _number(value: Any, scale: float = 1.0) -> str:
    if value is None:
        return "-"
    scaled = value / scale
    if abs(scaled) >= 1000:
        return f"{scaled:.0f}"
    if abs(scaled) >= 100:
        return f"{scaled:.1f}"
    if abs(scaled) >= 10:
        return f"{scaled:.2f}"
    return f"{scaled:.3f}"


@dataclass
class BenchResult:
    """What one benchmark run measured: its set-up, the latency distribution of its
    queries and one row per phase (ns, from the core's breakdown of the recorded trace),
    throughput, the server scenario's verdict and the top operators. ``timings`` holds the
    queries' timestamps (as the trace has them) and ``trace`` the trace itself
    (``opsight._native.Trace``: ``render``, ``write``). Rendered as text, JSON or CSV.
    """

    model: str
    source: str
    form: str
    backend: str
    device: str
    scenario: str
    batch_size: int
    samples_per_query: int
    threads: int | None
    warmup: dict[str, Any]
    queries: int
    counted: int
    flagged: int
    elapsed_ns: int
    latency: dict[str, Any]
    phases: list[dict[str, Any]]
    throughput: dict[str, float | None]
    server: dict[str, Any] | None = None
    operators: list[dict[str, Any]] | None = None
    operators_source: str | None = None
    operators_iterations: int = 0
    notes: list[str] = field(default_factory=list)
    versions: dict[str, str] = field(default_factory=dict)
    saved_run: dict[str, Any] | None = None
    timings: Any = field(default=None, repr=False)
    workers: int = 1
    trace: Any = field(default=None, repr=False)

    # ---- data -----------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """Everything but the raw timestamps, JSON-ready (times in ns)."""
        return {
            "model": self.model, "source": self.source, "form": self.form,
            "backend": self.backend, "device": self.device, "scenario": self.scenario,
            "batch_size": self.batch_size, "samples_per_query": self.samples_per_query,
            "threads": self.threads, "workers": self.workers, "warmup": dict(self.warmup),
            "queries": self.queries,
            "counted": self.counted, "flagged": self.flagged,
            "flagged_reason": "compilation" if self.flagged else None,
            "elapsed_ns": self.elapsed_ns, "latency": dict(self.latency),
            "phases": [dict(phase) for phase in self.phases],
            "throughput": dict(self.throughput),
            "server": dict(self.server) if self.server is not None else None,
            "operators": [dict(row) for row in self.operators] if self.operators is not None else None,
            "operators_source": self.operators_source,
            "operators_iterations": self.operators_iterations,
            "notes": list(self.notes), "versions": dict(self.versions),
            "saved_run": ({key: self.saved_run.get(key) for key in ("id", "uuid", "store")}
                          if self.saved_run else None),
        }

    def write_trace(self, path: str) -> None:
        """Writes the timed queries' trace: Chrome JSON (``.json``, for Perfetto UI), Perfetto
        protobuf (``.pftrace``) or opsight's native format (``.opsight``), by extension."""
        if self.trace is None:
            raise ValueError("this result holds no trace")
        self.trace.write(str(path))

    @property
    def passed(self) -> bool:
        """False only when a server run's p99 bound was given and not held."""
        return not (self.server and self.server.get("p99_bound_held") is False)

    # ---- rendering -------------------------------------------------------------------------
    def render(self, format: str = "text", *, top: int = 10) -> str:
        if format == "json":
            return json.dumps(self.to_dict(), indent=2) + "\n"
        if format == "csv":
            return self._csv(top)
        if format == "text":
            return self._text(top)
        raise ValueError(f"format {format!r}: expected text, json or csv")

    def print(self, format: str = "text", *, file: IO[str] | None = None, top: int = 10) -> None:
        print(self.render(format, top=top), end="", file=file or sys.stdout)

    def __str__(self) -> str:
        return self._text(10)

    def _text(self, top: int) -> str:
        lines: list[str] = []
        samples = f"{self.samples_per_query} sample{'s' if self.samples_per_query != 1 else ''}"
        threads = f"threads {self.threads}" if self.threads else "threads default"
        if self.workers > 1:
            threads += f", {self.workers} workers"
        lines.append(f"opsight bench: {self.model} ({self.source}) on {self.backend}, "
                     f"{self.device}, scenario {self.scenario}")
        lines.append(f"  batch {self.batch_size} ({samples} per query), {threads}; warm-up "
                     f"{self.warmup['iterations']} queries in {self.warmup['seconds']:.3f} s; "
                     f"{self.queries} timed queries"
                     + (f" ({self.counted} counted)" if self.flagged else "")
                     + f" in {self.elapsed_ns / 1e9:.3f} s")
        compilations = self.warmup.get("compilations") or 0
        if self.flagged or compilations:
            lines.append(f"  compilation: {compilations} graph(s) compiled during warm-up; "
                         f"{self.flagged} timed quer{'y' if self.flagged == 1 else 'ies'} compiled "
                         "and left out of the statistics")
        lines.append("")
        unit, scale = _unit_for(self.latency.get("p50_ns"))
        header = ["", "count", "mean", "min", "p50", "p75", "p90", "p95", "p99", "p99.9", "max",
                  "stddev", "share"]
        rows = [[f"query ({unit})", *self._row(self.latency, scale), ""]]
        for phase in self.phases:
            share = phase.get("share_of_mean")
            rows.append([f"  {phase['name']}", *self._row(phase, scale),
                         f"{share * 100:.1f}%" if share is not None else "-"])
        lines.extend(_table(header, rows))
        lines.append("")
        throughput = self.throughput
        lines.append(f"throughput: {_number(throughput['queries_per_second'])} queries/s, "
                     f"{_number(throughput['samples_per_second'])} samples/s")
        if self.scenario == "single-stream":
            lines.append(f"single-stream latency (p90): {_number(self.latency['p90_ns'], scale)} {unit}")
        elif self.scenario == "offline":
            lines.append(f"offline throughput: {_number(throughput['samples_per_second'])} samples/s")
        if self.server is not None:
            server = self.server
            bound = server.get("p99_bound_ms")
            verdict = ("no --p99-bound-ms given" if bound is None else
                       f"bound {bound:g} ms {'HELD' if server['p99_bound_held'] else 'FAILED'}")
            p99 = self.latency.get("p99_ns")
            lines.append(f"server: {server['target_qps']:g} queries/s offered (Poisson), "
                         f"{_number(server['achieved_qps'])} achieved; p99 latency "
                         f"{_number(p99, 1e6)} ms: {verdict}")
        if self.operators is not None:
            lines.append("")
            lines.append(f"top operators ({self.operators_iterations} profiled queries after the "
                         f"timed ones, {self.operators_source}; per query):")
            rows = []
            shown = self.operators[:top] if top else self.operators
            if shown:
                op_unit, op_scale = _unit_for(max(row.get("self_ns") or 0 for row in shown)
                                              / max(self.operators_iterations, 1))
                for row in shown:
                    rows.append([row["name"], f'{row["count"] / max(self.operators_iterations, 1):.3g}',
                                 _number(row.get("total_ns", 0) / max(self.operators_iterations, 1), op_scale),
                                 _number(row.get("self_ns", 0) / max(self.operators_iterations, 1), op_scale),
                                 f"{(row.get('share') or 0) * 100:.1f}%"])
                lines.extend(_table([f"operator ({op_unit})", "calls", "total", "self", "share"], rows))
            else:
                lines.append("  (none recorded)")
        if self.notes:
            lines.append("")
            lines.append("notes:")
            lines.extend(f"  - {note}" for note in self.notes)
        return "\n".join(lines) + "\n"

    @staticmethod
    def _row(statistics: dict[str, Any], scale: float) -> list[str]:
        cells = [str(statistics.get("count", 0))]
        for key in STATISTIC_KEYS[1:]:
            cells.append(_number(statistics.get(key), scale))
        return cells

    def _csv(self, top: int) -> str:
        columns = ["section", "name", "value", *STATISTIC_KEYS, "self_ns", "total_ns", "share"]
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, columns, lineterminator="\n")
        writer.writeheader()
        summary = {
            "model": self.model, "backend": self.backend, "device": self.device,
            "scenario": self.scenario, "batch_size": self.batch_size,
            "samples_per_query": self.samples_per_query, "threads": self.threads,
            "workers": self.workers, "warmup_iterations": self.warmup["iterations"], "queries": self.queries,
            "counted": self.counted, "flagged": self.flagged, "elapsed_ns": self.elapsed_ns,
            "queries_per_second": self.throughput["queries_per_second"],
            "samples_per_second": self.throughput["samples_per_second"],
        }
        if self.server is not None:
            summary.update({f"server_{key}": value for key, value in self.server.items()})
        for key, value in summary.items():
            writer.writerow({"section": "summary", "name": key,
                             "value": "" if value is None else value})
        writer.writerow({"section": "latency", "name": "query",
                         **{key: self.latency.get(key) for key in STATISTIC_KEYS}})
        for phase in self.phases:
            writer.writerow({"section": "phase", "name": phase["name"],
                             "share": phase.get("share_of_mean"),
                             **{key: phase.get(key) for key in STATISTIC_KEYS}})
        for row in (self.operators or [])[: top or None]:
            writer.writerow({"section": "operator", "name": row["name"],
                             "self_ns": row.get("self_ns"), "total_ns": row.get("total_ns"),
                             "share": row.get("share"),
                             **{key: row.get(key) for key in STATISTIC_KEYS}})
        return buffer.getvalue()


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(str(row[index])) for row in [header, *rows]) for index in range(len(header))]
    lines = []
    for row in [header, *rows]:
        cells = [str(row[0]).ljust(widths[0])]
        cells += [str(cell).rjust(widths[index]) for index, cell in enumerate(row[1:], start=1)]
        lines.append("  ".join(cells).rstrip())
    return lines
