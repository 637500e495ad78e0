"""``opsight bench --cluster ADDRESS --on HARDWARE/BACKEND ...``: one model benchmarked by
:func:`opsight.bench.run` on several labelled nodes of a Ray cluster at once, in one table
with time, throughput, cost per million queries and hardware per back-end, saved as one run
whose trace holds every worker's queries."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from typing import Any

from ..models import canonical_backend, samples_per_query, tile_inputs
from .artifacts import model_artifact
from .cluster import Job, Outcome, Progress, connect, import_ray, run_jobs
from .facts import facts_line
from .merge import merged_trace, save, worker_tags
from .prices import PriceTable, as_price_table, cost_per_million
from .specs import BackendSpec, parse_specs

#: opsight.bench.run's options a worker takes as they are.
_BENCH_OPTIONS = ("scenario", "threads", "warmup", "iterations", "duration", "qps",
                  "p99_bound_ms", "device", "compile_backend", "compile_mode",
                  "profile_iterations", "seed", "workers")


@dataclass
class RemoteBackendRow:
    """One back-end's outcome: its bench result (``BenchResult.to_dict()``) or its error."""
    spec: BackendSpec
    outcome: Outcome
    result: dict[str, Any] | None
    price_per_hour: float | None
    cost_per_million: float | None

    @property
    def error(self) -> str | None:
        return self.outcome.error


@dataclass
class RemoteBenchResult:
    """Every back-end's row, the prices, the cluster, the merged trace and the saved run."""
    model: str
    cluster: str
    rows: list[RemoteBackendRow]
    prices: PriceTable
    options: dict[str, Any]
    trace: Any = field(default=None, repr=False)
    saved_run: dict[str, Any] | None = None

    @property
    def failed(self) -> list[RemoteBackendRow]:
        return [row for row in self.rows if row.error]

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model, "cluster": self.cluster, "options": dict(self.options),
            "backends": [{
                "spec": str(row.spec), "hardware": row.spec.hardware,
                "backend": row.spec.backend, "node_id": row.outcome.node_id,
                "error": row.error, "facts": row.outcome.facts,
                "clock_offset_ns": row.outcome.clock_offset_ns,
                "clock_uncertainty_ns": row.outcome.clock_uncertainty_ns,
                "price_per_hour": row.price_per_hour, "cost_per_million": row.cost_per_million,
                "result": row.result} for row in self.rows],
            "prices": self.prices.to_dict(),
            "saved_run": ({key: self.saved_run.get(key) for key in ("id", "uuid", "store")}
                          if self.saved_run else None),
        }

    def table(self) -> str:
        """octoml-profile's per-back-end table, with percentiles, throughput, cost per
        million queries and the hardware each back-end actually ran on."""
        currency = "$" if self.prices.currency == "USD" else self.prices.currency + " "
        header = ["Back-end", "Queries", "Mean ms", "p50 ms", "p99 ms", "Queries/s",
                  "Cost/1M", "Hardware"]
        rows = []
        for row in self.rows:
            if row.result is None:
                rows.append([str(row.spec), "-", "-", "-", "-", "-", "-",
                             f"error: {row.error}"])
                continue
            latency, throughput = row.result["latency"], row.result["throughput"]
            qps = throughput.get("queries_per_second")
            rows.append([
                str(row.spec), str(row.result["counted"]), _ms(latency.get("mean_ns")),
                _ms(latency.get("p50_ns")), _ms(latency.get("p99_ns")),
                "-" if qps is None else f"{qps:,.1f}",
                "-" if row.cost_per_million is None else f"{currency}{row.cost_per_million:,.4f}",
                facts_line({**row.outcome.facts, "node_id": row.outcome.node_id})])
        widths = [max(len(line[column]) for line in [header, *rows])
                  for column in range(len(header))]
        aligned = lambda line: "  ".join(  # noqa: E731
            (cell.ljust(width) if column in (0, 7) else cell.rjust(width))
            for column, (cell, width) in enumerate(zip(line, widths))).rstrip()
        scenario = self.options.get("scenario", "single-stream")
        nodes = len({row.outcome.node_id for row in self.rows if row.outcome.node_id})
        lines = [f"opsight bench {self.model} on {self.cluster}: {len(self.rows)} back-end"
                 f"{'s' if len(self.rows) != 1 else ''} on "
                 f"{nodes} node{'s' if nodes != 1 else ''}, {scenario}, batch "
                 f"{self.options.get('batch_size', 1)}",
                 aligned(header), "=" * len(aligned(header))]
        lines.extend(aligned(line) for line in rows)
        lines.append("-" * len(aligned(header)))
        lines.extend(_price_lines(self.prices, [row.spec for row in self.rows],
                                  "queries (1 / measured queries per second)"))
        lines.extend(_clock_lines([row.outcome for row in self.rows]))
        for row in self.rows:
            for note in (row.result or {}).get("notes", []):
                lines.append(f"Note ({row.spec}): {note}")
        return "\n".join(lines) + "\n"

    def render(self, format: str = "text") -> str:
        if format == "json":
            return json.dumps(self.to_dict(), indent=2) + "\n"
        if format == "text":
            return self.table()
        raise ValueError(f"format {format!r}: a remote benchmark is text or json")

    def print(self, file=None) -> None:
        (file or sys.stdout).write(self.table())


def progress_hook(progress: Any, total: int) -> Any:
    """``progress``: True for status lines on stderr, a callable ``(event, outcome,
    counts)`` (:func:`.cluster.run_jobs`), or False."""
    if callable(progress):
        return progress
    return Progress(total) if progress else None


def _ms(value: Any) -> str:
    return "-" if value is None else f"{value / 1e6:.3f}"


def _price_lines(prices: PriceTable, specs: list[BackendSpec], per: str) -> list[str]:
    lines = []
    labels = list(dict.fromkeys(spec.hardware for spec in specs))
    priced = [label for label in labels if prices.price(label) is not None]
    if priced:
        lines.append(f"Cost per million {per} at the price per hour of the hardware"
                     + (f" ({prices.path})" if prices.path else "") + ":")
        for label in priced:
            source = prices.sources.get(label)
            lines.append(f"    {label}: {prices.price(label):g} {prices.currency}/h"
                         + (f" ({source})" if source else ""))
    missing = [label for label in labels if prices.price(label) is None]
    if missing:
        lines.append(f"No price for {', '.join(missing)}: add "
                     + ("them" if len(missing) > 1 else "it")
                     + " to a price table (--prices FILE, examples/remote/prices.yaml)")
    return lines


def _clock_lines(outcomes: list[Outcome]) -> list[str]:
    measured = [outcome for outcome in outcomes if outcome.clock_offset_ns is not None]
    if not measured:
        return []
    parts = [f"{outcome.spec} {outcome.clock_offset_ns / 1e3:+.1f} us "
             f"(+-{(outcome.clock_uncertainty_ns or 0) / 1e3:.1f})" for outcome in measured]
    return ["Worker clocks minus this machine's (traces moved by them): " + ", ".join(parts)]


def run(model: Any, on: Any, *, cluster: str, inputs: Any = None, backend: str | None = None,
        shapes: Any = None, dtype: str = "float32", batch_size: int = 1, prices: Any = None,
        timeout_s: float = 600.0, progress: bool = False, store: Any = False,
        name: str | None = None, tags: Any = None, **options: Any) -> RemoteBenchResult:
    """Benchmarks ``model`` (as :func:`opsight.bench.run` takes it) on every spec of ``on``
    (``HARDWARE/BACKEND``, or ``HARDWARE`` with ``backend``) of the Ray cluster at
    ``cluster``; ``options`` are :func:`opsight.bench.run`'s. ``prices``: a price table's
    path or a mapping label -> price per hour. A back-end whose worker fails, dies or
    overruns ``timeout_s`` gets an error row; raises :class:`.specs.RemoteError` for a
    cluster, spec or model that cannot be used."""
    from .. import bench
    unknown = sorted(set(options) - set(_BENCH_OPTIONS))
    if unknown:
        raise TypeError(f"opsight.remote.bench.run: unknown option {unknown[0]!r}")
    specs = parse_specs(on, backend)
    table = as_price_table(prices)
    if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
        raise ValueError(f"batch size {batch_size!r}: expected an integer >= 1")
    bench._check_options(options.get("scenario", "single-stream"), batch_size,
                         options.get("threads"), options.get("qps"),
                         options.get("p99_bound_ms"), options.get("profile_iterations", 5),
                         options.get("workers", 1))
    described = connect(cluster, [spec.hardware for spec in specs])
    loaded = bench._resolve(model, inputs, shapes, dtype, None, None, None)
    loaded.inputs = tile_inputs(loaded.inputs, batch_size, loaded.source)
    ray = import_ray()
    artifacts: dict[str, Any] = {}
    for spec in specs:
        if spec.canonical not in artifacts:
            artifacts[spec.canonical] = ray.put(model_artifact(loaded, spec.canonical))
    worker_options = {key: value for key, value in options.items()}
    jobs = [Job(spec, "bench", (artifacts[spec.canonical],
                                {**worker_options, "backend": spec.canonical}))
            for spec in specs]
    outcomes = run_jobs(jobs, timeout_s=timeout_s, progress=progress_hook(progress, len(jobs)))
    rows = []
    samples = samples_per_query(loaded.inputs, batch_size)
    for outcome in outcomes:
        result = (outcome.value or {}).get("result") if outcome.ok else None
        if result is not None:
            result.update(model=loaded.name, source=loaded.source, form=loaded.form,
                          batch_size=batch_size, samples_per_query=samples)
        price = table.price(outcome.spec.hardware)
        qps = ((result or {}).get("throughput") or {}).get("queries_per_second")
        cost = cost_per_million(price, 1.0 / qps if qps else None)
        rows.append(RemoteBackendRow(outcome.spec, outcome, result, price, cost))
    merged = merged_trace(outcomes, f"opsight bench {loaded.name}")
    result = RemoteBenchResult(loaded.name, described, rows, table,
                               {**options, "batch_size": batch_size}, merged)
    if store:
        run_tags = {"bench": "1", "remote": "1", "cluster": described, "model": loaded.name,
                    "scenario": options.get("scenario", "single-stream"),
                    "batch_size": str(batch_size),
                    **worker_tags(outcomes, [row.cost_per_million for row in rows])}
        if isinstance(tags, dict):
            run_tags.update({str(key): str(value) for key, value in tags.items()})
        else:
            for tag in tags or []:
                key, _, value = str(tag).partition("=")
                run_tags[key] = value
        result.saved_run = save(merged, name=name or f"bench {loaded.name} (remote)",
                                tags=run_tags, store=store, prefix="opsight bench")
    return result
