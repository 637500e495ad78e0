"""``compare_backends(fn, inputs, backends=["cpu-large/ort-cpu", ...], cluster=...)``:
octoml-profile's remote inference, on a Ray cluster the team runs.

The function runs here, once per call, as a local ``compare_backends`` with one back-end
(``eager``) does it: dynamo captures its graphs, the Python between them is timed here (the
uncompiled segments), and compilation and warm-up calls are discarded. Each captured graph
then travels as a torch.export program with the arguments it was called with; on each
``HARDWARE/BACKEND`` a worker compiles every graph with ``compare_backends``' own
compilers and recorder and runs the graphs in the order one call runs them, ``warmups +
repeats`` times (the same priming runs, timing and output check as a local comparison).
The result is a :class:`~opsight.compare_backends.CompareBackendsResult` whose back-ends
are the specs: per graph the remote times, and the estimate of one call per back-end
(uncompiled here + that back-end's graphs there), with its cost per million calls at the
hardware's price, plus the hardware each spec ran on, the clock offsets and the merged
trace."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

from ..compare_backends.measure import _stats
from ..compare_backends.measure import compare_backends as local_compare_backends
from ..compare_backends.result import BackendStats, CompareBackendsResult, Segment
from .artifacts import graph_artifact
from .bench import _clock_lines, _price_lines, progress_hook
from .cluster import Job, Outcome, connect, import_ray, run_jobs
from .facts import facts_line
from .merge import merged_trace, save, worker_tags
from .prices import PriceTable, as_price_table
from .specs import RemoteError, SpecError, parse_specs

#: The back-ends a worker can compile a graph for (compare_backends' built-in ones).
REMOTE_BACKENDS = ("eager", "compile", "torchscript", "ort-cpu")


@dataclass
class RemoteCompareBackendsResult(CompareBackendsResult):
    """A :class:`CompareBackendsResult` whose back-ends are ``HARDWARE/BACKEND`` specs, with
    where each ran (``outcomes``: node, facts, clock offset, error), the prices, the
    cluster, the merged trace and the saved run."""
    cluster: str = ""
    outcomes: list[Outcome] = field(default_factory=list)
    price_table: PriceTable = field(default_factory=PriceTable)
    trace: Any = field(default=None, repr=False)
    saved_run: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        data = super().to_dict()
        data["remote"] = {
            "cluster": self.cluster,
            "backends": [{"spec": str(outcome.spec), "hardware": outcome.spec.hardware,
                          "backend": outcome.spec.backend, "node_id": outcome.node_id,
                          "error": outcome.error, "facts": outcome.facts,
                          "clock_offset_ns": outcome.clock_offset_ns,
                          "clock_uncertainty_ns": outcome.clock_uncertainty_ns}
                         for outcome in self.outcomes],
            "prices": self.price_table.to_dict(),
            "saved_run": ({key: self.saved_run.get(key) for key in ("id", "uuid", "store")}
                          if self.saved_run else None)}
        return data

    def table(self) -> str:
        lines = [super().table().rstrip("\n"), f"Hardware per back-end ({self.cluster}):"]
        width = max(len(str(outcome.spec)) for outcome in self.outcomes)
        for outcome in self.outcomes:
            where = (f"error: {outcome.error}" if outcome.error and not outcome.facts else
                     facts_line({**outcome.facts, "node_id": outcome.node_id}))
            lines.append(f"    {str(outcome.spec):<{width}}  {where}")
        lines.extend(_price_lines(self.price_table, [outcome.spec for outcome in self.outcomes],
                                  "calls (the totals above)"))
        lines.extend(_clock_lines(self.outcomes))
        return "\n".join(lines) + "\n"


def compare_backends_remote(fn: Any, example_inputs: Sequence[Any], backends: Any, *,
                            cluster: str, repeats: int = 10, warmups: int = 1,
                            prices: Any = None, rtol: float = 1e-3, atol: float = 1e-5,
                            no_grad: bool = True, threads: int | None = None,
                            timeout_s: float = 600.0, progress: bool = False,
                            store: Any = False, name: str | None = None
                            ) -> RemoteCompareBackendsResult:
    """See the module's documentation; :func:`opsight.compare_backends.compare_backends`
    calls it when given ``cluster``."""
    specs = parse_specs(backends, allowed=REMOTE_BACKENDS)
    table = as_price_table(prices)
    described = connect(cluster, [spec.hardware for spec in specs])
    captured: dict[int, tuple[Any, list]] = {}

    def capture(graph_module, graph_inputs):
        captured[len(captured) + 1] = (graph_module, list(graph_inputs))
        return graph_module

    local = local_compare_backends(fn, example_inputs, [("eager", capture)], repeats=repeats,
                             warmups=warmups, rtol=rtol, atol=atol, no_grad=no_grad,
                             threads=threads)
    path = [segment.graph_id for segment in local.segments if segment.kind == "graph"]
    if not path:
        raise RemoteError("compare_backends: dynamo captured no graph from fn: there is "
                          "nothing to run remotely")
    graphs = [graph_artifact(graph_id, *captured[graph_id]) for graph_id in sorted(set(path))]
    ray = import_ray()
    graphs_ref = ray.put(graphs)
    options = {"repeats": repeats, "warmups": warmups, "rtol": rtol, "atol": atol,
               "threads": threads}
    jobs = [Job(spec, "compare_graphs", (graphs_ref, path, spec.backend, options))
            for spec in specs]
    outcomes = run_jobs(jobs, timeout_s=timeout_s, progress=progress_hook(progress, len(jobs)))

    names = [str(spec) for spec in specs]
    segments: list[Segment] = []
    position = 0
    for segment in local.segments:
        if segment.kind != "graph":
            segments.append(segment)
            continue
        remote = Segment(segment.index, "graph", graph_id=segment.graph_id,
                         op_count=segment.op_count)
        for outcome in outcomes:
            stats = BackendStats()
            if not outcome.ok:
                stats.failures = repeats
                stats.errors.append(outcome.error)
            else:
                value = outcome.value
                samples = value["samples_ns"][position]
                times = [sample for sample in samples if sample is not None]
                stats.runs, stats.failures = len(times), len(samples) - len(times)
                stats.mean_ms, stats.median_ms, stats.min_ms, stats.max_ms = _stats(times)
                stats.errors.extend(value["errors"][position])
                stats.mismatches = value["mismatches"][position]
                stats.max_abs_diff = value["max_abs_diff"][position]
            remote.backends[str(outcome.spec)] = stats
        segments.append(remote)
        position += 1
    prices_per_hour = {str(spec): table.price(spec.hardware) for spec in specs
                       if table.price(spec.hardware) is not None}
    environment = dict(local.environment)
    environment["caller"] = "uncompiled segments timed here; graphs on the workers"
    result = RemoteCompareBackendsResult(
        backends=names, segments=segments, repeats=repeats, warmups=warmups,
        graph_count=local.graph_count, graph_break_count=local.graph_break_count,
        graph_break_reasons=local.graph_break_reasons, discarded_runs=local.discarded_runs,
        measured_runs=local.measured_runs, prices_per_hour=prices_per_hour, rtol=rtol,
        atol=atol, environment=environment, cluster=described, outcomes=outcomes,
        price_table=table)
    result.trace = merged_trace(outcomes, "compare_backends")
    if store:
        tags = {"compare_backends": "1", "remote": "1", "cluster": described,
                **worker_tags(outcomes, [result.cost_per_million(name) for name in names])}
        result.saved_run = save(result.trace, name=name or "compare_backends (remote)",
                                tags=tags, store=store, prefix="compare_backends")
    return result


def compare_backends(fn: Any, example_inputs: Sequence[Any] = (), backends: Any = None,
                     *, cluster: str | None = None, prices: Any = None,
                     timeout_s: float = 600.0, progress: bool = False,
                     store: Any = False, name: str | None = None,
                     **options: Any) -> CompareBackendsResult:
    """``opsight.torch.compare_backends``: :func:`opsight.compare_backends.compare_backends`
    on this machine, or with ``cluster`` (``ray://HOST:PORT``, ``HOST:PORT``, ``auto``,
    ``local``) on the labelled nodes of a Ray cluster: ``backends`` are then
    ``HARDWARE/BACKEND`` specs, ``prices`` a price table (a YAML file's path or a mapping
    hardware label -> price per hour), ``timeout_s`` each back-end's bound, ``progress``
    status lines on stderr, ``store`` saves the merged run (docs/remote.md)."""
    if cluster is None:
        if prices is not None or store or name is not None:
            raise ValueError("compare_backends: prices=, store= and name= are for remote runs "
                             "(cluster=); on this machine give prices_per_hour=")
        if backends is None:
            return local_compare_backends(fn, example_inputs, **options)
        return local_compare_backends(fn, example_inputs, backends, **options)
    if options.get("prices_per_hour"):
        raise ValueError("compare_backends: with cluster=, prices come per hardware label "
                         "(prices=), not per back-end (prices_per_hour=)")
    options.pop("prices_per_hour", None)
    if backends is None:
        raise SpecError("compare_backends: with cluster=, name the back-ends as "
                        "HARDWARE/BACKEND, e.g. backends=['cpu-large/ort-cpu']")
    return compare_backends_remote(fn, example_inputs, backends, cluster=cluster,
                                   prices=prices, timeout_s=timeout_s, progress=progress,
                                   store=store, name=name, **options)
