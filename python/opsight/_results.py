"""Analyses of a recorded trace, as data, DataFrames and printed reports.

:class:`TraceAnalyses` is shared by :class:`opsight.Profile` (what a ``with
opsight.profile()`` block recorded) and :class:`opsight.TraceFile` (a trace file or a run of
the store, from :func:`opsight.load`). Every method computes in the C++ core; the data
methods return exactly the JSON of the matching ``opsight report`` view, so a number seen in
Python is the number the CLI prints.

``opsight.compare(a, b)`` compares two traces (files, runs, profiles) as ``opsight compare``
does.
"""

from __future__ import annotations

import json
import os
import sys
from typing import IO, Any, Sequence

from . import _native

_PERCENTILE_COLUMNS = ["count", "total_ns", "min_ns", "mean_ns", "p50_ns", "p75_ns", "p90_ns",
                       "p95_ns", "p99_ns", "p999_ns", "max_ns", "stddev_ns"]


def _pandas() -> Any:
    try:
        import pandas
    except ImportError as error:  # pragma: no cover - depends on the environment
        raise ImportError("opsight: DataFrames need pandas (pip install pandas)") from error
    return pandas


def _checked(text: str) -> str:
    """The core returns a failure to render (out of memory) as one line of text."""
    if text.startswith("opsight: cannot render"):
        raise RuntimeError(text.strip())
    return text


def _category_list(categories: Any) -> list[str]:
    if categories is None:
        return []
    if isinstance(categories, str):
        return [categories]
    try:
        result = [str(category) for category in categories]
    except TypeError:
        raise TypeError(f"categories: expected a string or a list of strings, "
                        f"not {type(categories).__name__}") from None
    return result


class TraceAnalyses:
    """Analyses over ``self.trace`` (an ``opsight._native.Trace``)."""

    trace: Any

    def _render(self, view: str, format: str, **options: Any) -> str:
        return _checked(self.trace.render(
            view, format, options.get("sort", "total"), options.get("limit", 0),
            options.get("max_roots", 20), options.get("span", ""),
            options.get("by_category", False), _category_list(options.get("categories")),
            options.get("max_depth", 0)))

    def _data(self, view: str, **options: Any) -> Any:
        return json.loads(self._render(view, "json", **options))

    def _print(self, view: str, file: IO[str] | None, **options: Any) -> None:
        print(self._render(view, "text", **options), end="", file=file or sys.stdout)

    # ---- the reports of `opsight report` ------------------------------------------------
    def report(self, view: str = "summary", format: str = "text", **options: Any) -> str:
        """The text of ``opsight report --<view> --format <format>``; ``options``: ``sort``,
        ``limit``, ``max_roots``, ``max_depth``, ``span``, ``by_category``, ``categories``."""
        return self._render(view, format, **options)

    def summary(self, sort: str = "total") -> list[dict[str, Any]]:
        """Per span name: count, total, self, min, mean, percentiles, max (ns), as in
        ``opsight report --summary --format json``."""
        return self._data("summary", sort=sort)

    def print_summary(self, *, sort: str = "total", limit: int = 0, file: IO[str] | None = None) -> None:
        self._print("summary", file, sort=sort, limit=limit)

    def print_tree(self, *, max_roots: int = 20, max_depth: int = 0,
                   file: IO[str] | None = None) -> None:
        """The call tree of the first ``max_roots`` roots (0: all), ``max_depth`` levels
        under each (0: all; deeper spans are folded into a "+N nested" count)."""
        self._print("tree", file, max_roots=max_roots, max_depth=max_depth)

    def print_table(self, *, sort: str = "total", limit: int = 0, file: IO[str] | None = None) -> None:
        self._print("table", file, sort=sort, limit=limit)

    def dataframe(self) -> Any:
        """One row per span: trace_id, span_id, parent_span_id, linked_from_span_id (the span
        that handed it its work: a flow, ``None`` for most), name, category, thread, pid,
        tid, start, end, dur (ns), depth, unfinished, then one column per attribute, and one
        float column per metric named without its prefix (``cpu_ns``, ``rss_delta_bytes``,
        ...; NaN where a span has none)."""
        return spans_dataframe(self.trace)

    # ---- files --------------------------------------------------------------------------
    def save(self, path: str | os.PathLike) -> None:
        """Writes the trace: ``.opsight`` (native), ``.json`` (Chrome trace) or ``.pftrace``
        (Perfetto protobuf), by extension."""
        self.trace.write(os.fspath(path))

    def export_chrome_trace(self, path: str | os.PathLike) -> None:
        """Writes a Chrome trace (JSON) for Perfetto UI or chrome://tracing."""
        path = os.fspath(path)
        if not path.endswith(".json"):
            raise ValueError(f"export_chrome_trace: {path!r} must end in .json")
        self.trace.write(path)

    # ---- merged call tree ---------------------------------------------------------------
    def merged_tree(self) -> list[dict[str, Any]]:
        """The aggregated call tree (``opsight report --merged-tree``): one node per code
        path in depth-first order, each with ``name``, ``depth``, ``parent`` (index),
        ``count``, ``calls_per_parent_call``, ``total_ns``, ``self_ns``,
        ``share_of_parent`` and duration percentiles (ns)."""
        return self._data("merged_tree", max_roots=0)["nodes"]

    def merged_tree_dataframe(self) -> Any:
        """:meth:`merged_tree` as a DataFrame, with a ``path`` column ("main / infer")."""
        nodes = self.merged_tree()
        paths: list[str] = []
        for node in nodes:
            parent = node["parent"]
            paths.append(node["name"] if parent is None else f"{paths[parent]} / {node['name']}")
        frame = _pandas().DataFrame(nodes)
        frame.insert(0, "path", paths)
        return frame

    def print_merged_tree(self, *, max_roots: int = 20, file: IO[str] | None = None) -> None:
        self._print("merged_tree", file, max_roots=max_roots)

    # ---- per-inference breakdown --------------------------------------------------------
    def breakdown(self, span: str, *, by: str = "name") -> dict[str, Any]:
        """Splits every span named ``span`` (one inference) into phases, its children
        grouped by ``by`` ("name" or "category"), plus ``(uncovered)`` time; per phase the
        mean, min, p50, p75, p90, p95, p99 and max over the inferences (ns), and
        ``inferences_per_second`` (``opsight report --breakdown SPAN``)."""
        if by not in ("name", "category"):
            raise ValueError(f"breakdown: by={by!r}, expected 'name' or 'category'")
        return self._data("breakdown", span=span, by_category=by == "category")

    def breakdown_dataframe(self, span: str, *, by: str = "name") -> Any:
        """:meth:`breakdown` as a DataFrame: one row per phase, then the ``(total)`` row."""
        data = self.breakdown(span, by=by)
        rows = [dict(phase) for phase in data["phases"]]
        if data["inference_count"]:
            rows.append({"phase": "(total)", "uncovered": False,
                         "present_in": data["inference_count"], "share_of_mean": 1.0,
                         **data["total"]})
        return _pandas().DataFrame(rows).set_index("phase") if rows else _pandas().DataFrame()

    def print_breakdown(self, span: str, *, by: str = "name", file: IO[str] | None = None) -> None:
        if by not in ("name", "category"):
            raise ValueError(f"print_breakdown: by={by!r}, expected 'name' or 'category'")
        self._print("breakdown", file, span=span, by_category=by == "category")

    # ---- operators ----------------------------------------------------------------------
    def operators(self, categories: Sequence[str] | None = None) -> list[dict[str, Any]]:
        """The operator table (``opsight report --ops``): per operator (torch ``aten::*``,
        ONNX Runtime nodes by ``op_name``, GPU kernels), count, total, self, share of all
        operator self time, and duration percentiles (ns)."""
        return self._data("operators", categories=categories)["operators"]

    def operators_dataframe(self, categories: Sequence[str] | None = None) -> Any:
        rows = self.operators(categories)
        frame = _pandas().DataFrame(rows)
        return frame.set_index("name") if rows else frame

    def print_operators(self, categories: Sequence[str] | None = None, *, limit: int = 0,
                        file: IO[str] | None = None) -> None:
        self._print("operators", file, categories=categories, limit=limit)

    # ---- GPU kernels (docs/gpu.md) -----------------------------------------------------
    def kernels(self, *, sort: str = "total") -> list[dict[str, Any]]:
        """The kernel table (``opsight report --kernels``): per GPU kernel name ``count``,
        ``total_ns``, ``share`` of all kernel time, duration percentiles (ns), ``grid`` and
        ``block`` (the most common, with ``grid_variants`` and ``block_variants``), and
        ``launched_by``: each launch site's ``operator``, ``module``, ``python`` function
        and ``source`` ("file:line"), with its ``count`` and ``total_ns``. Empty when the
        trace has no GPU kernels."""
        return self._data("kernels", sort=sort)["kernels"]

    def kernels_dataframe(self, *, sort: str = "total") -> Any:
        """:meth:`kernels` as a DataFrame indexed by kernel name, ``launched_by`` replaced by
        ``operator``, ``module`` and ``source``: those of the launch site that launched the
        kernel most often ("" when it has none)."""
        rows = []
        for row in self.kernels(sort=sort):
            row = dict(row)
            sites = row.pop("launched_by")
            top = sites[0] if sites else {}
            row["operator"] = top.get("operator", "")
            row["module"] = top.get("module", "")
            row["source"] = top.get("source", "")
            rows.append(row)
        frame = _pandas().DataFrame(rows)
        return frame.set_index("name") if rows else frame

    def gpu_summary(self) -> dict[str, Any]:
        """The GPU side of the trace beside the kernel table: ``devices`` (busy time, kernel
        busy time and utilisation from the kernels, per device), ``busy_ns``,
        ``kernel_busy_ns``, ``utilisation``, ``cuda_api_calls``, ``cuda_api_ns``,
        ``kernel_launches``, ``launches_without_kernel``, ``kernels_without_launch``, and
        ``copies``: per kind (HtoD, DtoH, ..., Memset) ``count``, ``bytes``, ``total_ns`` and
        ``gigabytes_per_second``."""
        data = self._data("kernels", limit=1)
        return {**data["gpu"], "copies": data["copies"]}

    def print_kernels(self, *, sort: str = "total", limit: int = 0,
                      file: IO[str] | None = None) -> None:
        self._print("kernels", file, sort=sort, limit=limit)

    # ---- critical path ------------------------------------------------------------------
    def critical_path(self) -> dict[str, Any]:
        """The chain of root spans that sets the end-to-end time, and the time on it per
        span name (``opsight report --critical-path``)."""
        return self._data("critical_path")

    def print_critical_path(self, *, limit: int = 0, file: IO[str] | None = None) -> None:
        self._print("critical_path", file, limit=limit)

    # ---- metrics beyond latency (docs/metrics.md) ---------------------------------------
    def span_metrics(self) -> list[dict[str, Any]]:
        """Per span name and metric (``opsight report --metrics``): ``name``, ``metric``
        (without the ``metric.`` prefix: ``cpu_ns``, ``rss_delta_bytes``...), ``unit``,
        ``count``, ``total``, ``mean``, ``min``, ``p50``, ``p90``, ``p99``, ``max`` in the
        metric's unit. Empty when no span carries metrics."""
        return self._data("metrics")["span_metrics"]

    #: ``metrics()`` is ``span_metrics()``.
    metrics = span_metrics

    def counters(self) -> list[dict[str, Any]]:
        """Per counter track the sampler (or ``opsight.counter``) recorded: ``name``,
        ``pid``, ``unit``, ``samples``, ``min``, ``mean`` (time-weighted), ``max``,
        ``last``, ``first_ns`` and ``last_ns`` (from the start of the trace)."""
        return self._data("metrics")["counters"]

    def counters_dataframe(self) -> Any:
        """One row per counter sample, in time order: ``ts_ns`` (the trace's clock, as the
        ``start`` column of :meth:`dataframe`), ``track``, ``pid``, ``unit``, ``value``.
        ``frame.pivot_table(index="ts_ns", columns="track", values="value")`` gives one
        column per track."""
        return _pandas().DataFrame(self.trace.counter_columns())

    def print_metrics(self, *, limit: int = 0, file: IO[str] | None = None) -> None:
        """Counter tracks, the metrics per span and what they cost, as text (``opsight
        report --metrics``)."""
        self._print("metrics", file, limit=limit)


class TraceFile(TraceAnalyses):
    """A trace read from a file (``.opsight``, Chrome JSON, PyTorch profiler, ONNX Runtime)
    or from the run store; see :func:`load`."""

    def __init__(self, trace: Any) -> None:
        self.trace = trace

    @property
    def damage(self) -> str | None:
        """Where the file was damaged (it was read up to there), or None."""
        return self.trace.damage


def spans_dataframe(trace: Any) -> Any:
    """A pandas DataFrame of a trace's spans (see :meth:`TraceAnalyses.dataframe`)."""
    columns = trace.slice_columns(metric_columns=True)  # metrics: float columns, NaN if absent
    attributes = columns.pop("attributes")
    trace_id = columns.pop("trace_id")  # per span: a run holds a trace per request served
    frame = _pandas().DataFrame(columns)
    frame.insert(0, "trace_id", trace_id)
    for key, values in attributes.items():
        frame[key if key not in frame.columns else f"attribute.{key}"] = values
    return frame


def _load_native(source: Any, store: str | os.PathLike | None) -> Any:
    if isinstance(source, _native.Trace):  # opsight.read_trace(...)
        return source
    trace = getattr(source, "trace", None)
    if trace is not None and not isinstance(source, (str, os.PathLike)):
        return trace
    text = os.fspath(source) if isinstance(source, os.PathLike) else source
    if isinstance(source, int):
        text = str(source)
    if not isinstance(text, str):
        raise TypeError(f"opsight: cannot read a trace from {source!r}")
    try:  # a file or a run: the one rule of src/store/trace_source.hpp
        return _native.load(text, os.fspath(store) if store else "")
    except ValueError as error:
        message = str(error)
        if "no such file" not in message:  # a path that names no file
            message = f"{text}: no such file ({message.removeprefix(text + ': ')})"
        raise ValueError(message) from None


def load(source: str | os.PathLike | int, *, store: str | os.PathLike | None = None,
         window: str | None = None, start: str | None = None,
         end: str | None = None) -> TraceFile:
    """Reads a trace file, or a run of the store by reference (an id, ``"latest"``,
    ``"latest~1"``, a uuid prefix, a name): ``opsight.load("latest").print_summary()``.

    ``window="2.5s:3s"`` (or ``start="2.5s", end="3s"``) reads only that window, in time
    from the trace's first event, as ``opsight report --window`` does (the same parser:
    units ns, us, ms, s): the spans that overlap it, the instants and samples inside it. A
    ``.opsight`` file decodes only the chunks the window needs, through its time index
    (``opsight index FILE`` writes the index a killed recording lacks); other files and
    stored runs are read whole, then cut."""
    if start is not None or end is not None:
        if window is not None:
            raise ValueError("load: give window= or start=/end=, not both")
        if start is None or end is None:
            raise ValueError("load: start= and end= go together (e.g. start='2.5s', end='3s')")
        window = f"{start}:{end}"
    if window is None:
        return TraceFile(_load_native(source, store))
    if not isinstance(window, str):
        raise TypeError(f"load: window={window!r}, expected a string such as '2.5s:3s'")
    if not isinstance(source, (str, os.PathLike, int)):
        raise TypeError(f"load: a window needs a file or a run, not {source!r}")
    text = str(source) if isinstance(source, int) else os.fspath(source)
    return TraceFile(_native.load_window(text, window, os.fspath(store) if store else ""))


def compare(a: Any, b: Any, *, alpha: float = 0.01, min_change: float = 0.02,
            min_samples: int = 5, fail_threshold: float | None = None,
            store: str | os.PathLike | None = None) -> dict[str, Any]:
    """Compares two traces as ``opsight compare A B`` does: per span name and per code path,
    A's and B's distributions, the median ratio, the Mann-Whitney U test (Holm-adjusted)
    and a verdict ("same", "slower", "faster", "too few samples", "only in A", "only in
    B"). ``a`` and ``b`` are files, runs of the store, profiles or :class:`TraceFile` s.
    With ``fail_threshold=0.05`` (a fraction: 5%) the result's ``regressions`` lists the
    names slower by at least 5%."""
    _check_compare_options(alpha, min_change, min_samples, fail_threshold)
    return json.loads(_checked(_native.compare(
        _load_native(a, store), _load_native(b, store), alpha, min_change, min_samples,
        -1.0 if fail_threshold is None else fail_threshold, "json")))


def _check_compare_options(alpha: float, min_change: float, min_samples: int,
                           fail_threshold: float | None) -> None:
    if not 0 < alpha <= 0.5:
        raise ValueError(f"compare: alpha={alpha!r}, expected 0 < alpha <= 0.5")
    if not min_change >= 0:
        raise ValueError(f"compare: min_change={min_change!r}, expected a fraction >= 0 (0.02 is 2%)")
    if not isinstance(min_samples, int) or min_samples < 2:
        raise ValueError(f"compare: min_samples={min_samples!r}, expected an integer >= 2")
    if fail_threshold is not None and not fail_threshold >= 0:
        raise ValueError(f"compare: fail_threshold={fail_threshold!r}, expected a fraction >= 0 "
                         "(0.05 is 5%)")


def compare_report(a: Any, b: Any, *, format: str = "text", alpha: float = 0.01,
                   min_change: float = 0.02, min_samples: int = 5,
                   fail_threshold: float | None = None,
                   store: str | os.PathLike | None = None) -> str:
    """The text (or ``format="csv"``/``"json"``) of ``opsight compare A B``."""
    _check_compare_options(alpha, min_change, min_samples, fail_threshold)
    return _native.compare(
        _load_native(a, store), _load_native(b, store), alpha, min_change, min_samples,
        -1.0 if fail_threshold is None else fail_threshold, format)
