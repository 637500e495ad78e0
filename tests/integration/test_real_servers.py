"""The real servers of real_servers.py answer as the export tests expect: each gets a
hand-written payload in its own wire format, and the test reads it back field by field.
These need no opsight code; they prove the fixtures that the exporters' tests reuse."""

import http.server
import json
import threading
import time

import pytest

import real_servers
from real_servers import (attributes_dict, jaeger_server, kafka_server,  # noqa: F401 (fixtures)
                          otlp_spans, post_json, pushgateway_server, victorialogs_server,
                          zipkin_server)

TRACE_ID = "5b8efff798038103d269b633813fc60c"
ROOT_SPAN = "eee19b7ec3c1b174"
CHILD_SPAN = "eee19b7ec3c1b173"
# Nanosecond times whose last digits would be lost by a microsecond round trip.
T0 = 1_700_000_000_123_456_789


def otlp_payload():
    """An OTLP/HTTP JSON request: one resource, a root span and its child."""
    def attribute(key, **value):
        return {"key": key, "value": value}

    return {"resourceSpans": [{
        "resource": {"attributes": [attribute("service.name", stringValue="opsight-smoke"),
                                    attribute("host.name", stringValue="test-host")]},
        "scopeSpans": [{
            "scope": {"name": "opsight", "version": "0.0.1"},
            "spans": [
                {"traceId": TRACE_ID, "spanId": ROOT_SPAN, "name": "train_step", "kind": 1,
                 "startTimeUnixNano": str(T0), "endTimeUnixNano": str(T0 + 2_000_000_001),
                 "attributes": [attribute("opsight.step", intValue="7"),
                                attribute("opsight.loss", doubleValue=0.25),
                                attribute("opsight.ok", boolValue=True),
                                attribute("opsight.device", stringValue="cpu")],
                 "status": {"code": 1}},
                {"traceId": TRACE_ID, "spanId": CHILD_SPAN, "parentSpanId": ROOT_SPAN,
                 "name": "forward", "kind": 1, "startTimeUnixNano": str(T0 + 1_001),
                 "endTimeUnixNano": str(T0 + 500_000_333),
                 "attributes": [attribute("opsight.layer", stringValue="linear")],
                 "events": [{"timeUnixNano": str(T0 + 250_000_017), "name": "checkpoint",
                             "attributes": [attribute("n", intValue="3")]}]},
            ]}]}]}


def test_jaeger_takes_otlp_http_json_and_returns_it_with_nanoseconds(jaeger_server):
    status, body = post_json(jaeger_server.otlp_traces_url, otlp_payload())
    assert status == 200, body

    spans = {span["spanId"]: span for span in
             otlp_spans(jaeger_server.get_trace(TRACE_ID, min_spans=2))}
    assert set(spans) == {ROOT_SPAN, CHILD_SPAN}
    root, child = spans[ROOT_SPAN], spans[CHILD_SPAN]
    assert root["traceId"] == child["traceId"] == TRACE_ID
    assert root["resource"]["service.name"] == "opsight-smoke"
    assert root["resource"]["host.name"] == "test-host"
    assert root["scope"] == "opsight"
    assert root["name"] == "train_step" and child["name"] == "forward"
    assert root.get("parentSpanId", "") == ""
    assert child["parentSpanId"] == ROOT_SPAN
    assert int(root["startTimeUnixNano"]) == T0
    assert int(root["endTimeUnixNano"]) == T0 + 2_000_000_001
    assert int(child["startTimeUnixNano"]) == T0 + 1_001
    assert int(child["endTimeUnixNano"]) == T0 + 500_000_333
    assert root["kind"] == 1
    assert root["status"].get("code") == 1
    assert attributes_dict(root["attributes"]) == {
        "opsight.step": 7, "opsight.loss": 0.25, "opsight.ok": True, "opsight.device": "cpu"}
    assert attributes_dict(child["attributes"]) == {"opsight.layer": "linear"}
    event, = child["events"]
    assert event["name"] == "checkpoint" and int(event["timeUnixNano"]) == T0 + 250_000_017
    assert attributes_dict(event["attributes"]) == {"n": 3}

    # The classic API (the Jaeger UI's model, microseconds) sees the same trace.
    trace = jaeger_server.get_trace_v1(TRACE_ID)
    by_id = {span["spanID"]: span for span in trace["spans"]}
    assert by_id[CHILD_SPAN]["references"] == [
        {"refType": "CHILD_OF", "traceID": TRACE_ID, "spanID": ROOT_SPAN}]
    assert by_id[ROOT_SPAN]["startTime"] == T0 // 1000
    assert trace["processes"][by_id[ROOT_SPAN]["processID"]]["serviceName"] == "opsight-smoke"
    assert "opsight-smoke" in jaeger_server.services()


def test_jaeger_unknown_trace_is_not_found(jaeger_server):
    status, _ = real_servers.http_request(
        f"{jaeger_server.query_url}/api/v3/traces/{'ab' * 16}")
    assert status == 404


def test_zipkin_takes_v2_json_spans_and_returns_them(zipkin_server):
    timestamp_us = T0 // 1000
    spans = [
        {"traceId": TRACE_ID, "id": ROOT_SPAN, "name": "train_step", "kind": "SERVER",
         "timestamp": timestamp_us, "duration": 2_000_000,
         "localEndpoint": {"serviceName": "opsight-smoke", "ipv4": "127.0.0.1"},
         "tags": {"opsight.step": "7", "opsight.device": "cpu"}},
        {"traceId": TRACE_ID, "id": CHILD_SPAN, "parentId": ROOT_SPAN, "name": "forward",
         "timestamp": timestamp_us + 1, "duration": 500_000,
         "localEndpoint": {"serviceName": "opsight-smoke"},
         "annotations": [{"timestamp": timestamp_us + 250_000, "value": "checkpoint"}],
         "tags": {"opsight.layer": "linear"}},
    ]
    status, body = post_json(zipkin_server.spans_url, spans)
    assert status == 202, body

    got = {span["id"]: span for span in zipkin_server.get_trace(TRACE_ID, min_spans=2)}
    root, child = got[ROOT_SPAN], got[CHILD_SPAN]
    assert root["traceId"] == child["traceId"] == TRACE_ID
    assert "parentId" not in root and child["parentId"] == ROOT_SPAN
    assert root["name"] == "train_step" and child["name"] == "forward"
    assert root["kind"] == "SERVER" and "kind" not in child
    assert root["timestamp"] == timestamp_us and root["duration"] == 2_000_000
    assert child["timestamp"] == timestamp_us + 1 and child["duration"] == 500_000
    assert root["localEndpoint"] == {"serviceName": "opsight-smoke", "ipv4": "127.0.0.1"}
    assert root["tags"] == {"opsight.step": "7", "opsight.device": "cpu"}
    assert child["annotations"] == [{"timestamp": timestamp_us + 250_000, "value": "checkpoint"}]
    services = real_servers.get_json(f"{zipkin_server.url}/api/v2/services")
    assert services == ["opsight-smoke"]


EXPOSITION = """\
# HELP opsight_smoke_steps_total Steps run.
# TYPE opsight_smoke_steps_total counter
opsight_smoke_steps_total{device="cpu"} 42
# HELP opsight_smoke_step_seconds Time of a step.
# TYPE opsight_smoke_step_seconds gauge
opsight_smoke_step_seconds{device="cpu",phase="forward"} 0.125
"""


@pytest.fixture
def metrics_target():
    """An HTTP server on a free port exposing EXPOSITION at /metrics, like an exporter."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            if self.path != "/metrics":
                self.send_error(404)
                return
            body = EXPOSITION.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_prometheus_scrapes_a_target_and_answers_promql(metrics_target):
    assert real_servers.promtool_check_metrics(EXPOSITION).returncode == 0
    with real_servers.prometheus(scrape_targets=[metrics_target], scrape_interval="1s") as prom:
        result = prom.wait_for('opsight_smoke_steps_total{job="opsight"}')
        sample, = result
        assert sample["metric"] == {"__name__": "opsight_smoke_steps_total", "device": "cpu",
                                    "job": "opsight", "instance": metrics_target}
        assert float(sample["value"][1]) == 42
        gauge, = prom.query("opsight_smoke_step_seconds")
        assert gauge["metric"]["phase"] == "forward" and float(gauge["value"][1]) == 0.125
        target, = prom.targets()
        assert target["health"] == "up" and target["scrapeUrl"].endswith("/metrics")


def test_promtool_flags_bad_exposition_text():
    bad = "# TYPE opsight_x counter\nopsight_x{a=\"1\"} 1\nopsight_x{a=\"1\"} 2\n"
    checked = real_servers.promtool_check_metrics(bad)
    assert checked.returncode != 0, checked.stdout + checked.stderr


def test_pushgateway_keeps_a_pushed_group_and_prometheus_scrapes_it(pushgateway_server):
    text = ("# HELP opsight_smoke_peak_bytes Peak device memory.\n"
            "# TYPE opsight_smoke_peak_bytes gauge\n"
            'opsight_smoke_peak_bytes{device="cuda:0"} 1.5e+09\n')
    pushgateway_server.push("opsight-smoke", text, run="run 1/a")

    exposed = pushgateway_server.metrics_text()
    line, = [line for line in exposed.splitlines()
             if line.startswith("opsight_smoke_peak_bytes{")]
    assert 'device="cuda:0"' in line and 'job="opsight-smoke"' in line
    assert 'run="run 1/a"' in line and line.endswith(" 1.5e+09")
    group, = [group for group in pushgateway_server.groups()
              if group["labels"].get("job") == "opsight-smoke"]
    assert group["labels"]["run"] == "run 1/a"
    assert real_servers.promtool_check_metrics(exposed).returncode == 0

    target = pushgateway_server.url.removeprefix("http://")
    with real_servers.prometheus(scrape_targets=[target], job="pushgateway") as prom:
        sample, = prom.wait_for("opsight_smoke_peak_bytes")
        assert sample["metric"]["job"] == "opsight-smoke"  # honor_labels keeps the pushed job
        assert sample["metric"]["run"] == "run 1/a"
        assert float(sample["value"][1]) == 1.5e9


def rfc3339_nanoseconds(unix_ns):
    seconds, nanoseconds = divmod(unix_ns, 1_000_000_000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{nanoseconds:09d}Z"


def test_victorialogs_takes_loki_push_json_and_answers_logsql(victorialogs_server):
    now_ns = time.time_ns() // 1000 * 1000 + 789  # recent, with nanosecond digits
    push = {"streams": [
        {"stream": {"job": "opsight-smoke", "level": "info"},
         "values": [[str(T0), "step 7 done"],
                    [str(now_ns), "step 8 done", {"trace_id": TRACE_ID}]]},
        {"stream": {"job": "opsight-smoke", "level": "warn"},
         "values": [[str(T0 + 1), "loss is nan"]]},
    ]}
    status, body = post_json(victorialogs_server.loki_push_url, push)
    assert status in (200, 204), body

    rows = victorialogs_server.wait_for('{job="opsight-smoke"}', count=3)
    by_message = {row["_msg"]: row for row in rows}
    assert set(by_message) == {"step 7 done", "step 8 done", "loss is nan"}
    old, new, warn = by_message["step 7 done"], by_message["step 8 done"], by_message["loss is nan"]
    assert old["_time"] == rfc3339_nanoseconds(T0)
    assert new["_time"] == rfc3339_nanoseconds(now_ns)
    assert old["job"] == "opsight-smoke" and old["level"] == "info"
    assert old["_stream"] == '{job="opsight-smoke",level="info"}'
    assert new["trace_id"] == TRACE_ID  # Loki's structured metadata becomes a field
    assert warn["level"] == "warn"
    only_warn = victorialogs_server.query('{job="opsight-smoke", level="warn"} nan')
    assert [row["_msg"] for row in only_warn] == ["loss is nan"]


def test_kafka_broker_takes_a_message_and_gives_it_back(kafka_server):
    topic = "opsight-smoke"
    kafka_server.create_topic(topic)
    payload = json.dumps({"trace_id": TRACE_ID, "name": "train_step"}).encode()
    kafka_server.produce(topic, payload, key=TRACE_ID, headers={"content-type": "application/json"})

    message, = kafka_server.consume(topic, count=1)
    assert message.topic() == topic and message.partition() == 0 and message.offset() == 0
    assert message.key() == TRACE_ID.encode()
    assert json.loads(message.value()) == {"trace_id": TRACE_ID, "name": "train_step"}
    assert message.headers() == [("content-type", b"application/json")]
    kind, timestamp_ms = message.timestamp()
    assert kind != 0 and abs(timestamp_ms / 1000 - time.time()) < 120


def test_a_missing_server_names_its_install_command(monkeypatch, tmp_path):
    monkeypatch.setattr(real_servers, "CACHE", tmp_path)
    monkeypatch.setattr(real_servers, "REQUIRED", {"jaeger"})
    with pytest.raises(pytest.fail.Exception, match=r"scripts/servers/install.sh jaeger"):
        with real_servers.jaeger():
            pass
    monkeypatch.setattr(real_servers, "REQUIRED", set())
    with pytest.raises(pytest.skip.Exception, match=r"OPSIGHT_REQUIRE=jaeger makes this a failure"):
        with real_servers.jaeger():
            pass


def test_a_server_that_dies_reports_its_log(monkeypatch, tmp_path):
    fake = tmp_path / "jaeger" / "jaeger"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\necho 'fake jaeger: bad config' >&2\nexit 3\n")
    fake.chmod(0o755)
    monkeypatch.setattr(real_servers, "CACHE", tmp_path)
    with pytest.raises(real_servers.ServerError, match=r"(?s)exited with status 3.*bad config"):
        with real_servers.jaeger(start_timeout=10):
            pass
