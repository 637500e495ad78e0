"""The program's own log records (Python ``logging``, through the logging bridge) exported
by ``opsight run`` to real servers, and read back from them: ``otlp-logs`` to VictoriaLogs'
OTLP endpoint (``/insert/opentelemetry/v1/logs``) and to the OpenTelemetry Collector's OTLP
receiver (Jaeger v2, a Collector distribution, whose logs pipeline ends in its ``debug``
exporter), and ``loki-logs`` to VictoriaLogs' Loki push endpoint. Each store is queried
back (LogsQL; the Collector's own log and its accepted-records count) and every record is
compared with the trace the run wrote (``Trace.log_records()``): its message, level, time to
the nanosecond, logger, code location, exception, extra fields, and the trace and span ids
of the span it was logged in (none outside spans), by that id."""

from __future__ import annotations

import calendar
import os
import subprocess
import sys
import time

import opsight
import pytest

import real_servers
from real_servers import jaeger_server, victorialogs_server  # noqa: F401 (fixtures)

SERVICE = "shop"

PROGRAM = """
import logging, threading, opsight

logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
log = logging.getLogger("shop.orders")

@opsight.trace
def checkout(order):
    log.info("checkout %s", order, extra={"order_id": order, "amount": 12.5})
    if order.endswith("3"):
        try:
            raise ValueError(f"no stock for {order}")
        except ValueError:
            log.exception("order %s failed", order)
    with opsight.span("pay"):
        log.warning("paying for %s\\nslowly", order)

def worker(name):
    with opsight.span(f"worker {name}"):
        for index in range(5):
            logging.getLogger("shop.worker").info("%s item %d", name, index)

log.warning("starting, outside any span")
for number in range(1, 7):
    checkout(f"o-{number}")
threads = [threading.Thread(target=worker, args=(name,), name=f"pool-{name}") for name in "ab"]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
log.critical("done")
log.debug("below INFO: not recorded")
"""


def unix_ns(rfc3339: str) -> int:
    """'2026-11-25T16:57:41.0082005Z' -> Unix nanoseconds, exactly."""
    seconds, _, fraction = rfc3339.rstrip("Z").partition(".")
    whole = time.strptime(seconds, "%Y-%m-%dT%H:%M:%S")
    return calendar.timegm(whole) * 10**9 + int((fraction + "000000000")[:9])


def _text(value) -> str:
    """How a store shows a typed value as text (VictoriaLogs keeps every field a string)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


@pytest.fixture(scope="module")
def run(tmp_path_factory, victorialogs_server, jaeger_server):
    """One ``opsight run`` of PROGRAM exporting its records to the three endpoints; the
    records the run's trace holds, and what the run printed."""
    directory = tmp_path_factory.mktemp("logs")
    script = directory / "shop.py"
    script.write_text(PROGRAM)
    output = directory / "run.opsight"
    environment = {key: value for key, value in os.environ.items()
                   if not key.startswith(("OPSIGHT_", "OTEL_")) or key == "OPSIGHT_HOME"}
    done = subprocess.run(
        [sys.executable, "-m", "opsight", "run", "--no-store", "--report", "none", "-o",
         str(output), "--service", SERVICE,
         "--export", f"otlp-logs={victorialogs_server.otlp_logs_url}",
         "--export", f"loki-logs={victorialogs_server.loki_push_url}?_msg_field=message",
         "--export", f"otlp-logs={jaeger_server.otlp_logs_url}",
         "--", sys.executable, str(script)],
        capture_output=True, text=True, timeout=180, env=environment)
    assert done.returncode == 0, done.stderr
    records = opsight.load(output).trace.log_records()
    return records, done.stderr


def test_the_trace_holds_every_record_with_its_span(run):
    records, stderr = run
    # starting, 6 checkouts of 2 records, o-3's error, 10 worker items, done
    assert len(records) == 1 + 6 * 2 + 1 + 10 + 1
    assert "below INFO" not in {r["message"] for r in records}
    assert "INFO checkout o-1\n" in stderr  # the program's own output is as it was
    exported = [line for line in stderr.splitlines() if "log records to" in line]
    assert len(exported) == 3, stderr  # one line per target, each with every record
    for line in exported:
        assert f"exported {len(records)} of {len(records)} log records" in line, stderr
    outside = [r for r in records if r["span_id"] is None]
    assert [r["message"] for r in outside] == ["starting, outside any span", "done"]


def test_victorialogs_otlp_has_every_record_by_its_trace_id(run, victorialogs_server):
    records, _ = run
    entries = victorialogs_server.wait_for(f'{{service.name="{SERVICE}"}}', count=len(records))
    assert len(entries) == len(records)
    by_message = {entry["_msg"]: entry for entry in entries}
    assert set(by_message) == {r["message"] for r in records}
    for want in records:
        entry = by_message[want["message"]]
        assert unix_ns(entry["_time"]) == want["time_unix_ns"], want["message"]
        assert entry["severity_text"] == want["level_name"]
        assert entry["severity_number"] == str(want["severity_number"])
        assert entry["scope.name"] == want["logger"]
        assert entry.get("trace_id", "") == (want["trace_id"] or "")
        assert entry.get("span_id", "") == (want["span_id"] or "")
        for key, value in want["attributes"].items():
            assert entry[key] == _text(value), (want["message"], key)
    # Every record of a span's trace is found by that trace id, as a trace view links them.
    for trace_id in {r["trace_id"] for r in records if r["trace_id"]}:
        found = victorialogs_server.query(f'{{service.name="{SERVICE}"}} trace_id:="{trace_id}"')
        assert sorted(e["_msg"] for e in found) == sorted(
            r["message"] for r in records if r["trace_id"] == trace_id)
    failed = by_message["order o-3 failed"]
    assert failed["exception.type"] == "ValueError"
    assert failed["exception.message"] == "no stock for o-3"
    assert "raise ValueError" in failed["exception.stacktrace"]
    assert by_message["checkout o-2"]["order_id"] == "o-2"


def test_victorialogs_loki_push_has_every_record_with_its_ids(run, victorialogs_server):
    records, _ = run
    entries = victorialogs_server.wait_for(f'{{service_name="{SERVICE}"}}', count=len(records))
    assert len(entries) == len(records)
    by_message = {entry["_msg"]: entry for entry in entries}
    assert set(by_message) == {r["message"] for r in records}
    for want in records:
        entry = by_message[want["message"]]
        assert unix_ns(entry["_time"]) == want["time_unix_ns"], want["message"]
        assert f'level="{want["level_name"].lower()}"' in entry["_stream"]
        assert entry.get("trace_id", "") == (want["trace_id"] or "")
        assert entry.get("span_id", "") == (want["span_id"] or "")
        for key, value in want["attributes"].items():
            assert entry[f"attributes.{key}"] == _text(value), (want["message"], key)
    errors = victorialogs_server.query(f'{{service_name="{SERVICE}",level="error"}}')
    assert [entry["_msg"] for entry in errors] == ["order o-3 failed"]


def test_the_collector_receives_every_record_exactly(run, jaeger_server):
    records, _ = run
    real_servers.poll("the Collector's count of log records",
                      lambda: jaeger_server.accepted_log_records() >= len(records), 10)
    assert jaeger_server.accepted_log_records() == len(records)
    received = real_servers.poll(
        "the Collector's debug output",
        lambda: (lambda got: got if len(got) >= len(records) else None)(
            jaeger_server.received_log_records()), 10)
    assert len(received) == len(records)
    by_body = {record["body"]: record for record in received}
    for want in records:
        got = by_body[want["message"]]
        assert got["resource"]["service.name"] == SERVICE
        assert got["scope"] == want["logger"]
        assert got["time_unix_nano"] == got["observed_time_unix_nano"] == want["time_unix_ns"]
        assert (got["severity_number"], got["severity_text"]) == (want["severity_number"],
                                                                  want["level_name"])
        assert got["trace_id"] == (want["trace_id"] or "")
        assert got["span_id"] == (want["span_id"] or "")
        assert got["flags"] == (1 if want["span_id"] else 0)
        assert got["attributes"] == want["attributes"], want["message"]
