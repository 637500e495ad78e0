"""opsight.llm's requests (docs/llm.md) in REAL observability servers (scripts/servers/
install.sh, tests/integration/real_servers.py): the gen_ai.request spans and their GenAI
attributes in Jaeger through the OTLP exporter, and OpenTelemetry's GenAI histograms
(gen_ai.client.* / gen_ai.server.*, named by OpenTelemetry's Prometheus rules) in
Prometheus, scraped live from the reference server under ``opsight run --export
prometheus=...`` and pushed through a Pushgateway from a client's run; PromQL's counts and
sums must equal the requests the traces hold."""

from __future__ import annotations

import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from real_servers import (attributes_dict, jaeger_server, otlp_spans,  # noqa: F401
                          prometheus, promtool_check_metrics, pushgateway_server, require_modules,
                          traces_of)

import opsight
import opsight._native as native

ROOT = Path(__file__).resolve().parents[2]
SERVER = ROOT / "examples" / "llm" / "server.py"

DECODE_LOOP = textwrap.dedent("""
    import time
    from opsight import llm

    def busy(ns):
        end = time.perf_counter_ns() + ns
        while time.perf_counter_ns() < end:
            pass

    for index in range(4):
        with llm.request(model="tiny-llama", input_tokens=10 + index, operation="chat",
                         provider="opsight-test") as request:
            with request.prefill():
                busy(2_000_000)
            request.token()
            for _ in range(index + 2):
                with request.decode():
                    busy(500_000)
                request.token()
    client = llm.Request("remote-model", 7, kind="client", operation="text_completion")
    client.token()
    client.token(3)
    client.finish("timeout", "no event within 1 s")
""")


def _environment(**extra: str) -> dict[str, str]:
    environment = {key: value for key, value in os.environ.items()
                   if not key.startswith(("OTEL_", "OPSIGHT_")) or key == "OPSIGHT_HOME"}
    environment.update(extra)
    return environment


def test_gen_ai_request_spans_reach_jaeger_with_their_attributes(tmp_path, jaeger_server):
    script = tmp_path / "decode_loop.py"
    script.write_text(DECODE_LOOP)
    output = tmp_path / "run.opsight"
    done = subprocess.run(
        [sys.executable, "-m", "opsight", "run", "--no-store", "--report", "none", "-o",
         str(output), "--export", f"otlp={jaeger_server.otlp_http_endpoint}", "--",
         sys.executable, str(script)], capture_output=True, text=True, timeout=120,
        env=_environment())
    assert done.returncode == 0, done.stderr
    frame = opsight.load(str(output)).dataframe()
    requests = frame[frame["name"] == "gen_ai.request"]
    assert len(requests) == 5
    trace = native.read_trace(str(output))
    spans = otlp_spans(jaeger_server.get_traces(traces_of(trace)))
    by_id = {span["spanId"].lower(): span for span in spans}
    assert len(spans) == len(frame)
    names = [span["name"] for span in spans]
    assert names.count("gen_ai.inter_token") == (frame["name"] == "gen_ai.inter_token").sum()
    keys = ("gen_ai.operation.name", "gen_ai.provider.name", "gen_ai.request.model",
            "gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens",
            "gen_ai.server.time_to_first_token", "gen_ai.server.time_per_output_token",
            "gen_ai.server.request.duration", "gen_ai.client.operation.time_to_first_chunk",
            "gen_ai.client.operation.duration", "error.type")
    for _, row in requests.iterrows():
        span = by_id[row["span_id"]]
        attributes = attributes_dict(span["attributes"])
        for key in keys:
            value = row.get(key)
            if value is None or (isinstance(value, float) and math.isnan(value)):
                assert key not in attributes, key
            elif isinstance(value, float):
                assert attributes[key] == pytest.approx(value, rel=1e-12), key
            else:
                assert attributes[key] == value, key
        client = row.get("span.kind") == "client"
        # OTLP JSON names the kind; the client's failed request has an error status.
        assert span.get("kind") in ((3, "SPAN_KIND_CLIENT") if client else
                                    (1, "SPAN_KIND_INTERNAL", None)), span.get("kind")
        if client:
            assert attributes["error.type"] == "timeout"
            assert (span.get("status") or {}).get("code") in (2, "STATUS_CODE_ERROR")
            assert attributes["gen_ai.usage.output_tokens"] == 4
        else:
            assert attributes["gen_ai.provider.name"] == "opsight-test"
            assert attributes["gen_ai.operation.name"] == "chat"


def _wait_sum(server, promql: str, expected: float, timeout: float = 30.0) -> float:
    from real_servers import poll

    def attempt():
        result = server.query(promql)
        if result and float(result[0]["value"][1]) == pytest.approx(expected, rel=1e-9):
            return float(result[0]["value"][1])
        return None

    return poll(f"{promql} == {expected}", attempt, timeout, interval=0.25)


def test_the_reference_servers_gen_ai_histograms_are_scraped_live_by_prometheus(tmp_path):
    """The reference server (a random GPT-2) under ``opsight run --export prometheus=...``;
    12 streamed requests; while it still runs, PromQL's count of each server histogram is
    12, and the sums equal what the server's own trace holds once it has stopped."""
    require_modules("torch", "transformers")
    import socket

    from opsight.llm import load as llm_load
    from opsight.llm.client import Endpoint

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    output = tmp_path / "server.opsight"
    with prometheus(scrape_targets=[f"127.0.0.1:{port}"], job="llm") as server:
        run = subprocess.Popen(
            [sys.executable, "-m", "opsight", "run", "--no-store", "--report", "none", "-o",
             str(output), "--export", f"prometheus=127.0.0.1:{port}", "--", sys.executable,
             str(SERVER), "--port", "0", "--model", "gpt2"], stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, env=_environment())
        try:
            line = run.stdout.readline()
            assert "http://" in line, run.stderr.read() if run.poll() is not None else line
            endpoint = Endpoint(line.split()[-1], api="chat", model="gpt2")
            specs = llm_load.make_requests(12, "6", "5", seed=3)
            result = llm_load.run_load(llm_load.http_backend(endpoint), specs, concurrency=3)
            assert all(request.ok for request in result.requests)
            for family in ("gen_ai_server_request_duration_seconds",
                           "gen_ai_server_time_to_first_token_seconds",
                           "gen_ai_server_time_per_output_token_seconds"):
                _wait_sum(server, f"sum({family}_count)", 12)
            _wait_sum(server, 'sum(gen_ai_client_token_usage_sum{gen_ai_token_type="output"})',
                      60)
            assert run.poll() is None  # seen live
            labels = server.query("gen_ai_server_time_to_first_token_seconds_count")[0]["metric"]
            assert labels["gen_ai_operation_name"] == "chat"
            assert labels["gen_ai_provider_name"] == "opsight-example"
            assert labels["job"] == "llm"
            ttft_sum = float(server.query(
                "sum(gen_ai_server_time_to_first_token_seconds_sum)")[0]["value"][1])
            quantile = float(server.query(
                "histogram_quantile(1, sum by (le) "
                "(gen_ai_server_time_to_first_token_seconds_bucket))")[0]["value"][1])
        finally:
            run.terminate()  # opsight run passes SIGTERM on; the server stops as on Ctrl-C
            _, stderr = run.communicate(timeout=60)
        assert run.returncode == 0, stderr
    frame = opsight.load(str(output)).dataframe()
    served = frame[frame["name"] == "gen_ai.request"]
    assert len(served) == 12
    ttfts = served["gen_ai.server.time_to_first_token"]
    assert ttft_sum == pytest.approx(float(ttfts.sum()), rel=1e-9)
    assert quantile >= float(ttfts.max())  # the bucket that holds the slowest first token


def test_a_clients_gen_ai_histograms_reach_prometheus_through_a_pushgateway(
        tmp_path, pushgateway_server):
    """A client's requests (kind client) recorded in this process, the trace exported to a
    Pushgateway (``opsight export``'s path), scraped by Prometheus: gen_ai.client.* with
    the conventions' names, buckets and labels; a failed request only in the duration,
    with its error_type; the text passes promtool."""
    from opsight import llm

    with opsight.profile() as prof:
        for index in range(7):
            request = llm.Request("remote", 20, kind="client", operation="chat",
                                  provider="openai")
            request.server = ("llm.example", 8443)
            request.token()
            request.token(2)
            if index == 6:
                request.finish("http_error", "HTTP 500")
            else:
                request.finish()
    path = tmp_path / "client.opsight"
    prof.save(path)
    done = subprocess.run([sys.executable, "-m", "opsight", "export", str(path), "--to",
                           f"pushgateway={pushgateway_server.url}"], capture_output=True,
                          text=True, timeout=60, env=_environment())
    assert done.returncode == 0, done.stderr
    text = pushgateway_server.metrics_text()
    assert "# TYPE gen_ai_client_operation_duration_seconds histogram" in text
    exposed = "\n".join(line for line in text.splitlines()
                        if line.startswith(("gen_ai_", "# HELP gen_ai_", "# TYPE gen_ai_")))
    checked = promtool_check_metrics(exposed + "\n")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    with prometheus(scrape_targets=[pushgateway_server.url], job="pushgateway") as server:
        _wait_sum(server, "sum(gen_ai_client_operation_duration_seconds_count)", 7)
        failed = server.wait_for('gen_ai_client_operation_duration_seconds_count'
                                 '{error_type="http_error"}')
        assert float(failed[0]["value"][1]) == 1
        _wait_sum(server, "sum(gen_ai_client_operation_time_to_first_chunk_seconds_count)", 6)
        # One chunk after the first in each successful request: its time to the next chunk.
        _wait_sum(server, "sum(gen_ai_client_operation_time_per_output_chunk_seconds_count)", 6)
        _wait_sum(server, 'sum(gen_ai_client_token_usage_sum{gen_ai_token_type="output"})', 18)
        _wait_sum(server, 'sum(gen_ai_client_token_usage_count{gen_ai_token_type="input"})', 6)
        labels = server.query("gen_ai_client_operation_time_to_first_chunk_seconds_count")[0]
        assert labels["metric"]["gen_ai_provider_name"] == "openai"
        assert labels["metric"]["gen_ai_request_model"] == "remote"
        assert (labels["metric"]["server_address"], labels["metric"]["server_port"]) == (
            "llm.example", "8443")
        assert not server.query("gen_ai_server_request_duration_seconds_count")
