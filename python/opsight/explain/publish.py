"""Explain results as Prometheus metrics (``--push-gateway URL``) and Loki log lines
(``--loki URL``), sent through the export module's sinks (``_native.push_metric_families``,
``_native.push_log_lines``: export/record_export.hpp; retries, timeouts and failures counted
as for traces).

Metrics (job ``opsight_explain`` unless the URL has a grouping path):

- ``opsight_compile_graph_breaks_total{model,family,reason,commit}``: breaks per reason
  (every explained model has a ``reason="none"`` sample of 0 when it does not break, so a
  dashboard's sum per model or family sees every model);
- ``opsight_compile_graphs{model,family,commit}``, ``opsight_compile_seconds{...}`` (dynamo's
  capture plus the back-end's first call), ``opsight_compile_peak_bytes{...}``;
- ``opsight_explain_model_ok{model,family,commit}``: 1 explained, 0 failed/crashed/timeout.

Log lines: one per break occurrence site, labels ``model``, ``family``, ``reason`` (and
``source="opsight-explain"``), the line a JSON object with the site, its count, the commit.
"""

from __future__ import annotations

import json
import sys
import time

from .result import STATUS_OK, ModelExplain

JOB = "opsight_explain"


def check_url(url: str) -> str:
    """What is wrong with a push URL ("" when nothing)."""
    if not url.startswith(("http://", "https://")):
        return "expected an http:// or https:// URL"
    if len(url.split("://", 1)[1].strip("/")) == 0:
        return "the URL has no host"
    return ""


def metric_families(results: list[ModelExplain], commit: str) -> list[tuple]:
    breaks, graphs, seconds, peak, healthy = [], [], [], [], []
    for result in results:
        labels = [("model", result.model), ("family", result.family or "none")]
        healthy.append((labels + [("commit", commit)], 1.0 if result.status == STATUS_OK else 0.0))
        if result.status != STATUS_OK:
            continue
        per_reason: dict[str, int] = {}
        for site in result.breaks:
            per_reason[site.reason] = per_reason.get(site.reason, 0) + site.count
        if not per_reason:
            per_reason["none"] = 0
        for reason, count in sorted(per_reason.items()):
            breaks.append((labels + [("reason", reason), ("commit", commit)], float(count)))
        with_commit = labels + [("commit", commit)]
        graphs.append((with_commit, float(result.graphs or 0)))
        seconds.append((with_commit, (result.explain_seconds or 0.0) + (result.compile_seconds or 0.0)))
        if result.compile_peak_bytes is not None:
            peak.append((with_commit, float(result.compile_peak_bytes)))
    return [
        # A counter by its name (the _total suffix, as dashboards expect): the breaks one
        # explain run counted; each push replaces the group's previous values.
        ("opsight_compile_graph_breaks_total", "counter",
         "torch.compile graph breaks of the model per reason (opsight explain).", breaks),
        ("opsight_compile_graphs", "gauge", "Graphs torch.compile made of the model.", graphs),
        ("opsight_compile_seconds", "gauge",
         "Seconds of dynamo's capture and the back-end's first call.", seconds),
        ("opsight_compile_peak_bytes", "gauge",
         "Peak resident memory above the start during the compile, bytes.", peak),
        ("opsight_explain_model_ok", "gauge",
         "1 when the model was explained, 0 when it failed, crashed or timed out.", healthy),
    ]


def log_lines(results: list[ModelExplain], commit: str, now_ns: int | None = None) -> list[tuple]:
    now_ns = time.time_ns() if now_ns is None else now_ns
    lines = []
    for result in results:
        for offset, site in enumerate(result.breaks):
            labels = [("source", "opsight-explain"), ("model", result.model),
                      ("family", result.family or "none"), ("reason", site.reason)]
            line = json.dumps({"model": result.model, "family": result.family,
                               "commit": commit, "reason": site.reason, "count": site.count,
                               "file": site.file, "line": site.line, "function": site.function,
                               "detail": site.detail}, separators=(",", ":"))
            lines.append((labels, now_ns + offset, line))
    return lines


def publish(results: list[ModelExplain], *, commit: str, push_gateway: str | None,
            loki: str | None, prefix: str, timeout_s: float = 30.0) -> bool:
    """Pushes and sends; one line per target on stderr. False when anything was dropped."""
    import opsight._native as _native

    ok = True
    reports = []
    if push_gateway:
        reports.append(_native.push_metric_families(push_gateway, metric_families(results, commit),
                                                    JOB, timeout_s))
    if loki:
        lines = log_lines(results, commit)
        if lines:
            reports.append(_native.push_log_lines(loki, lines, 500, timeout_s))
        else:
            print(f"{prefix}: loki: no graph breaks, no log lines to send", file=sys.stderr)
    for report in reports:
        line = f"{prefix}: sent {report['sent']} of {report['spans']} to {report['target']}"
        if report["dropped"]:
            ok = False
            line += f"; {report['dropped']} dropped: {report['error']}"
        print(line, file=sys.stderr)
    return ok
