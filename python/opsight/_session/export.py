"""Sending a finished trace to the observability stack (the C++ export module, through
``Trace.export``): the one place ``opsight run --export``, ``opsight.profile(export=...)``
and ``OPSIGHT_EXPORT`` go through, so they read targets and report results alike.

A target is one of (docs/export.md):

- ``otlp[=URL]``, ``otlp-json=URL``, ``otlp-protobuf=URL``: OpenTelemetry over HTTP;
- ``otlp-grpc[=URL]`` (or ``otlp`` with ``OTEL_EXPORTER_OTLP_PROTOCOL=grpc``): OpenTelemetry
  over gRPC (default ``http://localhost:4317``; builds with grpc++ only);
- ``zipkin[=URL]``: Zipkin v2 JSON;
- ``pushgateway=URL``: the trace's metrics, PUT to a Prometheus Pushgateway;
- ``kafka[=BROKER[,BROKER...]][?topic=NAME&PROPERTY=VALUE...]``: one Kafka message per
  batch of spans, an OTLP ``ExportTraceServiceRequest`` in protobuf keyed by the trace id
  (default broker ``localhost:9092``, topic ``otlp_spans``); the other query parameters
  are librdkafka properties (``security.protocol=SASL_SSL&sasl.mechanisms=PLAIN...``),
  percent-decoded; ``OPSIGHT_KAFKA_PROPERTIES`` keeps secrets off the command line;
- ``loki[=URL]``: Loki's push API, one JSON log line per span in streams labelled
  ``service_name``, ``span_name``, ``status`` (default path ``/loki/api/v1/push``;
  VictoriaLogs: ``loki=http://HOST:9428/insert/loki/api/v1/push``);
- ``otlp-metrics[=URL]``: the run's metrics as OTLP/HTTP (default ``/v1/metrics``, the
  ``OTEL_EXPORTER_OTLP_METRICS_*`` variables); ``otlp-metrics-grpc[=URL]`` (or
  ``otlp-metrics`` with ``OTEL_EXPORTER_OTLP_[METRICS_]PROTOCOL=grpc``) over gRPC;
- ``otlp-logs[=URL]``, ``loki-logs[=URL]``: the program's own log records (Python
  ``logging``, recorded by ``opsight.integrations.logs``) with the trace and span ids of
  the span each was logged in, as OTLP/HTTP logs (default ``/v1/logs``, the
  ``OTEL_EXPORTER_OTLP_LOGS_*`` variables) or through Loki's push API;
  ``otlp-logs-grpc[=URL]`` (or ``otlp-logs`` with ``OTEL_EXPORTER_OTLP_[LOGS_]PROTOCOL=grpc``)
  as OTLP/gRPC logs.

``OPSIGHT_EXPORT`` holds several, separated by commas, semicolons or spaces; a comma
inside a Kafka target's broker list or properties stays in that target (a piece that
does not start with a kind continues the Kafka target before it). Exporting never raises
into the traced program: a failure is a line on stderr and in the returned reports.
"""

from __future__ import annotations

import os
import re
import sys
from typing import Any, Iterable

from ..targets.model import EXPORT_KINDS

#: The environment variable naming export targets for a program run unchanged.
EXPORT_VARIABLE = "OPSIGHT_EXPORT"


#: The kinds a target starts with (export/export.hpp; prometheus= is opsight run's live endpoint).
KINDS = EXPORT_KINDS
_KIND = re.compile(r"^([a-z-]+)(?:[=?]|$)")


def _starts_a_target(piece: str) -> bool:
    match = _KIND.match(piece)
    return bool(match) and match.group(1) in KINDS


def parse_targets(value: str | Iterable[str] | None) -> list[str]:
    """``"otlp=http://a:4318, zipkin"`` or a list of such strings -> ``["otlp=...", "zipkin"]``.

    ``"kafka=k1:9092,k2:9092?topic=t, loki"`` -> ``["kafka=k1:9092,k2:9092?topic=t", "loki"]``:
    after a Kafka target, a comma-separated piece that does not start with a kind is part
    of it (another broker, or the rest of a property's value)."""
    if value is None:
        return []
    items = [value] if isinstance(value, str) else list(value)
    targets: list[str] = []
    for item in items:
        if not isinstance(item, str):
            raise TypeError(f"export target must be a string, got {type(item).__name__}")
        continues = False  # the previous piece was part of a Kafka target, joined by a comma
        for separator_and_piece in re.finditer(r"([,;\s]*)([^,;\s]+)", item):
            separator, piece = separator_and_piece.groups()
            if (continues and targets and separator.strip() == "," and
                    not _starts_a_target(piece)):
                targets[-1] += "," + piece
                continue
            targets.append(piece)
            continues = piece.startswith(("kafka=", "kafka?"))
    return targets


def targets_from_environment() -> list[str]:
    return parse_targets(os.environ.get(EXPORT_VARIABLE))


def target_problem(targets: list[str]) -> str | None:
    """What is wrong with ``targets`` and the ``OTEL_*`` settings they read (an unknown
    kind, a URL that is not one, a librdkafka property, an OTLP protocol or compression
    opsight does not speak, a bad ``OTEL_BSP_*`` value), checked before a program starts;
    None when they are fine. ``prometheus=`` (opsight run's live endpoint) is not checked
    here."""
    import opsight._native as _native

    checked = [target for target in targets if target.split("=", 1)[0] != "prometheus"]
    if not checked:
        return None
    try:
        _native.check_export_targets(checked)
    except ValueError as error:
        return str(error)
    return None


def sdk_disabled() -> bool:
    """``OTEL_SDK_DISABLED=true``: the OpenTelemetry switch that makes an SDK a no-op; opsight
    then sends nothing (it still records)."""
    import opsight._native as _native

    return _native.otel_sdk_disabled()


def export_trace(trace: Any, targets: list[str], *, prefix: str, service: str = "",
                 timeout_s: float = 30.0) -> list[dict[str, Any]]:
    """Sends ``trace`` to every target and prints one line per target on stderr (sent,
    dropped and why). Returns the reports; a bad target is reported, not raised. With
    ``OTEL_SDK_DISABLED=true`` nothing is sent (one line says so)."""
    if targets and sdk_disabled():
        print(f"{prefix}: export: OTEL_SDK_DISABLED=true: nothing exported", file=sys.stderr)
        return []
    live = [target for target in targets if target.split("=", 1)[0] == "prometheus"]
    if live:
        print(f"{prefix}: export: {live[0]}: live metrics are served by `opsight run "
              f"--export prometheus=PORT`; ignored here", file=sys.stderr)
        targets = [target for target in targets if target not in live]
    if not targets:
        return []
    try:
        reports = trace.export(targets, service=service, timeout_s=timeout_s)
    except ValueError as error:
        print(f"{prefix}: export: {error}", file=sys.stderr)
        return [{"target": " ".join(targets), "error": str(error), "sent": 0, "dropped": None}]
    for warning in (reports[0].get("warnings", []) if reports else []):
        print(f"{prefix}: export: warning: {warning} (ignored)", file=sys.stderr)
    print_reports(reports, prefix)
    return reports


def print_reports(reports: list[dict[str, Any]], prefix: str) -> None:
    """One line per target on stderr: what was sent, and what was dropped and why."""
    for report in reports:
        line = (f"{prefix}: exported {report['sent']} of {report['spans']} "
                f"{report.get('item', 'span')}s to "
                f"{report['target']} in {report['requests']} request"
                f"{'' if report['requests'] == 1 else 's'} ({report['seconds']:.2f} s)")
        if report["dropped"]:
            line += f"; {report['dropped']} dropped: {report['error']}"
        print(line, file=sys.stderr)
