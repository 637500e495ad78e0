"""Metrics and log records over OTLP while the program runs (``opsight run --export-live``),
against the real servers: ``otlp-metrics`` into the OpenTelemetry Collector's OTLP receiver
(Jaeger v2, a Collector distribution; read back through its prometheus exporter) every
OTEL_METRIC_EXPORT_INTERVAL and once more at the end, and ``otlp-logs`` / ``loki-logs`` into
VictoriaLogs and the Collector as the program writes its records (OTEL_BLRP_SCHEDULE_DELAY).
Each is queried while the program still runs (it waits for the test's release file), then
after it ends: nothing lost, nothing twice, sent + dropped = recorded. Also the sampled rates
(process.io_read_bytes_per_s) as the Collector's prometheus exporter shows them: the
``_total`` counter of bytes the Prometheus exposition serves."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
import time

import opsight
import pytest

import real_servers
from real_servers import jaeger_server, victorialogs_server  # noqa: F401 (fixtures)


def _environment(**settings: str) -> dict[str, str]:
    environment = {key: value for key, value in os.environ.items()
                   if not key.startswith(("OPSIGHT_", "OTEL_")) or key == "OPSIGHT_HOME"}
    environment.update(settings)
    return environment


def _samples(text: str) -> dict[str, float]:
    samples = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name_and_labels, value = line.rsplit(" ", 1)
            samples[name_and_labels] = float(value)
    return samples


def _sample(text: str, name: str, **labels: str) -> float | None:
    for key, value in _samples(text).items():
        if key.startswith(name + "{") and all(f'{label}="{want}"' in key
                                              for label, want in labels.items()):
            return value
    return None


def _reported(stderr: str, item: str) -> list[tuple[int, int]]:
    """(sent, offered) of each export report line counting `item`s ("log records")."""
    return [(int(sent), int(offered)) for sent, offered in
            re.findall(rf"exported (\d+) of (\d+) {item}", stderr)]


READER = textwrap.dedent("""
    import sys, time, opsight
    path = sys.argv[1]
    time.sleep(0.3)
    for _ in range(8):
        with opsight.span("read"):
            with open(path, "rb", buffering=0) as file:
                while file.read(1 << 20):
                    pass
        time.sleep(0.05)
    time.sleep(0.3)  # a sample after the last read
""")


def test_a_sampled_rate_reaches_the_collector_as_a_counter_of_bytes(tmp_path, jaeger_server):
    """process.io_read_bytes_per_s is sent as the monotonic sum of bytes
    (opsight.process.io_read_bytes, unit By): the Collector's prometheus exporter shows the
    counter opsight_process_io_read_bytes_total, holding at least the bytes read."""
    data = tmp_path / "data.bin"
    data.write_bytes(os.urandom(16 << 20))
    script = tmp_path / "reader.py"
    script.write_text(READER)
    done = subprocess.run(
        [sys.executable, "-m", "opsight", "run", "--no-store", "--report", "none", "-o",
         str(tmp_path / "reader.opsight"), "--sample-ms", "50", "--service", "rates",
         "--export", f"otlp-metrics={jaeger_server.otlp_metrics_url}", "--",
         sys.executable, str(script), str(data)],
        capture_output=True, text=True, timeout=120, env=_environment())
    assert done.returncode == 0, done.stderr
    assert "dropped" not in done.stderr, done.stderr
    text = real_servers.poll(
        "the counter in the Collector's prometheus exporter",
        lambda: (lambda t: t if "opsight_process_io_read_bytes_total{" in t and
                 'job="rates"' in t else None)(jaeger_server.received_metrics_text()), 30)
    assert "# TYPE opsight_process_io_read_bytes_total counter" in text, text
    assert "_per_s" not in text, text
    total = _sample(text, "opsight_process_io_read_bytes_total", job="rates")
    read = 8 * (16 << 20)
    # The rates are integrated over the trace's sample times, which the file's clock fit
    # places within a few µs of the sampler's own: a relative error of about 1e-5 either way.
    assert read * (1 - 1e-4) <= total <= read + (48 << 20), (total, read)


LIVE_METRICS = textwrap.dedent("""
    import os, sys, time, opsight
    for i in range(20):
        with opsight.span("step"):
            time.sleep(0.001)
    print("done", flush=True)
    deadline = time.monotonic() + 60  # running until the test has seen the metrics
    while not os.path.exists(sys.argv[1]) and time.monotonic() < deadline:
        time.sleep(0.05)
    with opsight.span("after release"):
        pass
""")


def test_otlp_metrics_reach_the_collector_while_the_program_runs(tmp_path, jaeger_server):
    """--export-live otlp-metrics with OTEL_METRIC_EXPORT_INTERVAL=300: the Collector has the
    20 steps while the program still runs; after it ends, the last export adds the span
    ended after the release, the steps are still 20 (cumulative: nothing counted twice),
    and every data point offered was sent."""
    service = "live-metrics"
    script = tmp_path / "live.py"
    script.write_text(LIVE_METRICS)
    output = tmp_path / "live.opsight"
    run = subprocess.Popen(
        [sys.executable, "-m", "opsight", "run", "--no-store", "--report", "none", "-o",
         str(output), "--export-live", "--export",
         f"otlp-metrics={jaeger_server.otlp_metrics_url}", "--service", service, "--",
         sys.executable, str(script), str(tmp_path / "release")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=_environment(OTEL_METRIC_EXPORT_INTERVAL="300"))
    try:
        assert run.stdout.readline() == "done\n"
        steps = real_servers.poll(
            "the steps in the Collector while the program runs",
            lambda: _sample(jaeger_server.received_metrics_text(),
                            "opsight_span_duration_seconds_count", span="step", job=service),
            20)
        assert steps == 20
        assert run.poll() is None  # still running
    finally:
        (tmp_path / "release").touch()
        _, stderr = run.communicate(timeout=60)
    assert run.returncode == 0, stderr
    text = real_servers.poll(
        "the span after the release in the Collector",
        lambda: (lambda t: t if _sample(t, "opsight_span_duration_seconds_count",
                                        span="after release", job=service) else None)(
            jaeger_server.received_metrics_text()), 20)
    assert _sample(text, "opsight_span_duration_seconds_count", span="after release",
                   job=service) == 1
    assert _sample(text, "opsight_span_duration_seconds_count", span="step", job=service) == 20
    reports = _reported(stderr, "data points")
    assert len(reports) == 1 and reports[0][0] == reports[0][1] > 0, stderr
    assert "dropped" not in stderr, stderr


LIVE_LOGS = textwrap.dedent("""
    import logging, os, sys, time, opsight
    logging.basicConfig(level=logging.INFO)
    log = logging.getLogger("live.app")
    log.info("before any span")
    for i in range(3):
        with opsight.span("job"):
            log.warning("job %d", i)
    with opsight.span("serving"):
        log.info("serving, span still open")
        print("done", flush=True)
        deadline = time.monotonic() + 60  # running until the test has seen the records
        while not os.path.exists(sys.argv[1]) and time.monotonic() < deadline:
            time.sleep(0.05)
    log.error("after release")
""")


def test_log_records_reach_victorialogs_and_the_collector_while_the_program_runs(
        tmp_path, victorialogs_server, jaeger_server):
    """--export-live otlp-logs (VictoriaLogs and the Collector) and loki-logs (VictoriaLogs):
    the records logged so far are stored while the program still runs, the one logged in a
    span still open carries that span's ids; after the end every record is there once, with
    the ids of the trace the run wrote."""
    service = "live-logs"
    script = tmp_path / "live_logs.py"
    script.write_text(LIVE_LOGS)
    output = tmp_path / "live_logs.opsight"
    accepted_before = jaeger_server.accepted_log_records()
    run = subprocess.Popen(
        [sys.executable, "-m", "opsight", "run", "--no-store", "--report", "none", "-o",
         str(output), "--export-live", "--service", service,
         "--export", f"otlp-logs={victorialogs_server.otlp_logs_url}",
         "--export", f"loki-logs={victorialogs_server.loki_push_url}?_msg_field=message",
         "--export", f"otlp-logs={jaeger_server.otlp_logs_url}",
         "--", sys.executable, str(script), str(tmp_path / "release")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=_environment(OTEL_BLRP_SCHEDULE_DELAY="200"))
    try:
        assert run.stdout.readline() == "done\n"
        early_otlp = victorialogs_server.wait_for(f'{{service.name="{service}"}}', count=5,
                                                  timeout=20)
        early_loki = victorialogs_server.wait_for(f'{{service_name="{service}"}}', count=5,
                                                  timeout=20)
        real_servers.poll("the Collector's count of log records",
                          lambda: jaeger_server.accepted_log_records() - accepted_before >= 5, 20)
        assert run.poll() is None  # still running
    finally:
        (tmp_path / "release").touch()
        _, stderr = run.communicate(timeout=60)
    assert run.returncode == 0, stderr
    records = opsight.load(output).trace.log_records()
    assert len(records) == 6
    assert {entry["_msg"] for entry in early_otlp} == {entry["_msg"] for entry in early_loki} == {
        r["message"] for r in records if r["message"] != "after release"}
    by_message = {r["message"]: r for r in records}
    serving = by_message["serving, span still open"]
    assert serving["span_id"]  # logged in the span that had not ended when it was sent
    for query in (f'{{service.name="{service}"}}', f'{{service_name="{service}"}}'):
        entries = victorialogs_server.wait_for(query, count=6)
        time.sleep(0.5)  # anything sent twice would have landed by now
        entries = victorialogs_server.query(query)
        assert sorted(e["_msg"] for e in entries) == sorted(by_message), query
        for entry in entries:
            want = by_message[entry["_msg"]]
            assert entry.get("trace_id", "") == (want["trace_id"] or ""), entry["_msg"]
            assert entry.get("span_id", "") == (want["span_id"] or ""), entry["_msg"]
    real_servers.poll("the Collector's count of log records",
                      lambda: jaeger_server.accepted_log_records() - accepted_before >= 6, 10)
    time.sleep(0.5)
    assert jaeger_server.accepted_log_records() - accepted_before == 6
    reports = _reported(stderr, "log records")
    assert reports == [(6, 6)] * 3, stderr


GEN_AI_PROGRAM = textwrap.dedent("""
    import time
    from opsight import llm

    for index in range(4):
        with llm.request(model="tiny-llama", input_tokens=10 + index, operation="chat",
                         provider="opsight-test") as request:
            time.sleep(0.002)
            request.token()
            for _ in range(index + 2):
                time.sleep(0.0005)
                request.token()
""")


def test_gen_ai_histograms_reach_the_collector_over_otlp(tmp_path, jaeger_server):
    """otlp-metrics carries OpenTelemetry's GenAI histograms by their semantic-convention
    names (gen_ai.server.time_to_first_token, gen_ai.server.time_per_output_token,
    gen_ai.client.token.usage): the Collector's prometheus exporter shows them with the
    counts and sums of the run's gen_ai.request spans."""
    service = "gen-ai-otlp"
    script = tmp_path / "decode_loop.py"
    script.write_text(GEN_AI_PROGRAM)
    output = tmp_path / "run.opsight"
    done = subprocess.run(
        [sys.executable, "-m", "opsight", "run", "--no-store", "--report", "none", "-o",
         str(output), "--service", service,
         "--export", f"otlp-metrics={jaeger_server.otlp_metrics_url}", "--",
         sys.executable, str(script)], capture_output=True, text=True, timeout=120,
        env=_environment())
    assert done.returncode == 0, done.stderr
    assert "dropped" not in done.stderr, done.stderr
    frame = opsight.load(str(output)).dataframe()
    requests = frame[frame["name"] == "gen_ai.request"]
    assert len(requests) == 4
    text = real_servers.poll(
        "the GenAI histograms in the Collector's prometheus exporter",
        lambda: (lambda t: t if _sample(t, "gen_ai_server_time_to_first_token_seconds_count",
                                        job=service) else None)(
            jaeger_server.received_metrics_text()), 30)
    labels = {"job": service, "gen_ai_request_model": "tiny-llama",
              "gen_ai_operation_name": "chat", "gen_ai_provider_name": "opsight-test"}
    assert _sample(text, "gen_ai_server_time_to_first_token_seconds_count", **labels) == 4
    assert _sample(text, "gen_ai_server_time_to_first_token_seconds_sum", **labels) == \
        pytest.approx(requests["gen_ai.server.time_to_first_token"].sum(), rel=1e-9)
    assert _sample(text, "gen_ai_server_time_per_output_token_seconds_count", **labels) == 4
    assert _sample(text, "gen_ai_client_token_usage_count", gen_ai_token_type="input",
                   **labels) == 4
    assert _sample(text, "gen_ai_client_token_usage_sum", gen_ai_token_type="input",
                   **labels) == 10 + 11 + 12 + 13
