"""Presenting explain results: a text table (one row per model, then each model's break sites
grouped and counted with their source lines), JSON (``{"models": [...]}`` — the form a
``--baseline FILE`` reads back) and CSV (one row per break site, models without breaks as one
row with empty break columns, so that a spreadsheet sums breaks per model or reason)."""

from __future__ import annotations

import csv
import io
import json
import os
from typing import Any

from .result import ModelExplain


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _bytes(value: int | None) -> str:
    if value is None:
        return "-"
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if value >= size:
            return f"{value / size:.1f} {unit}"
    return f"{value} B"


def _short_path(path: str) -> str:
    """A path under the working directory relative to it, one in site-packages from the
    package on (``transformers/models/bert/modeling_bert.py``)."""
    marker = "site-packages" + os.sep
    if marker in path:
        return path.split(marker, 1)[1]
    try:
        relative = os.path.relpath(path)
    except ValueError:
        return path
    return relative if not relative.startswith("..") else path


def _match(result: ModelExplain) -> str:
    if result.outputs_match is None:
        return "-"
    return "yes" if result.outputs_match else "NO"


def text_report(results: list[ModelExplain], *, overhead: dict[str, float] | None = None) -> str:
    headers = ["model", "family", "status", "graphs", "breaks", "ops/graph", "explain s",
               "compile s", "peak mem", "matches eager"]
    rows = []
    for result in results:
        ops = ",".join(str(count) for count in result.ops_per_graph) or "-"
        rows.append([result.model, result.family or "-", result.status,
                     "-" if result.graphs is None else str(result.graphs),
                     "-" if result.graph_breaks is None else str(result.graph_breaks),
                     ops if len(ops) <= 24 else ops[:21] + "...",
                     _seconds(result.explain_seconds), _seconds(result.compile_seconds),
                     _bytes(result.compile_peak_bytes), _match(result)])
    widths = [max(len(header), *(len(row[column]) for row in rows)) if rows else len(header)
              for column, header in enumerate(headers)]
    lines = ["  ".join(header.ljust(width) for header, width in zip(headers, widths)).rstrip()]
    lines.append("  ".join("-" * width for width in widths))
    for row in rows:
        lines.append("  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip())
    for result in results:
        if result.status != "ok":
            lines.append(f"\n{result.model}: {result.status}: {result.error}")
            continue
        if not result.breaks:
            continue
        lines.append(f"\n{result.model}: {result.graph_breaks} graph break"
                     f"{'' if result.graph_breaks == 1 else 's'} at {len(result.breaks)} "
                     f"site{'' if len(result.breaks) == 1 else 's'}")
        for site in result.breaks:
            lines.append(f"  {site.count:>3} x  {_short_path(site.file)}:{site.line} "
                         f"in {site.function}")
            lines.append(f"         {site.reason}")
    if overhead:
        lines.append("")
        lines.append("time: " + ", ".join(f"{key} {value:.2f} s" for key, value in overhead.items()))
    return "\n".join(lines) + "\n"


def json_report(results: list[ModelExplain], **extra: Any) -> str:
    return json.dumps({"models": [result.to_dict() for result in results], **extra}, indent=2) + "\n"


CSV_COLUMNS = ["model", "family", "status", "graphs", "graph_breaks", "ops", "explain_seconds",
               "compile_seconds", "compile_peak_bytes", "outputs_match", "break_reason",
               "break_file", "break_line", "break_function", "break_count"]


def csv_report(results: list[ModelExplain]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for result in results:
        common = [result.model, result.family, result.status, result.graphs, result.graph_breaks,
                  result.ops, result.explain_seconds, result.compile_seconds,
                  result.compile_peak_bytes, result.outputs_match]
        common = ["" if value is None else value for value in common]
        if not result.breaks:
            writer.writerow(common + ["", "", "", "", ""])
        for site in result.breaks:
            writer.writerow(common + [site.reason, site.file, site.line, site.function,
                                      site.count])
    return out.getvalue()
