"""`opsight export ... --to kafka=...` against a real Kafka broker (KRaft, real_servers.py):
the messages are consumed back with confluent-kafka, decoded as OTLP
ExportTraceServiceRequest with the opentelemetry-proto package, and compared field by field
with the trace the test wrote (export_sample.py): one message per batch, keyed by the trace
id, content-type header; span names, ids, parentage, start and end to the nanosecond, kind,
status and exception event, typed attributes, resource. Also: librdkafka properties reach
the producer (compression, TLS), and a broker that is not there costs a bounded time and
every span is counted as dropped, with the reason."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import time
import uuid

import pytest

import export_sample
import real_servers
from real_servers import kafka_server  # noqa: F401 (fixture)

try:  # opentelemetry-proto (requirements/test.txt) decodes the messages
    from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
except ImportError as error:  # as real_servers does for confluent-kafka
    trace_service_pb2 = None
    MISSING_PROTO = (f"opentelemetry-proto is not installed ({error}): "
                     "pip install -r requirements/test.txt")


def decode_request(payload):
    if trace_service_pb2 is None:
        if "kafka" in real_servers.REQUIRED:
            pytest.fail(f"{MISSING_PROTO} (OPSIGHT_REQUIRE names kafka)", pytrace=False)
        pytest.skip(MISSING_PROTO)
    return trace_service_pb2.ExportTraceServiceRequest.FromString(payload)


SERVICE = "inference"


def export(opsight_cli, trace, target, *extra, timeout=60):
    done = opsight_cli("export", trace, "--to", target, "--service", SERVICE, "--format", "json",
                       *extra, timeout=timeout)
    reports = json.loads(done.stdout) if done.stdout.strip().startswith("[") else []
    return done, reports


def any_value(value):
    """An OTLP AnyValue as the Python value it holds."""
    kind = value.WhichOneof("value")
    return getattr(value, kind) if kind else None


def attributes(key_values):
    return {item.key: any_value(item.value) for item in key_values}


def decoded_spans(messages):
    """span id (hex) -> (span, resource attributes, scope name), each span exactly once."""
    spans = {}
    for message in messages:
        request = decode_request(message.value())
        for resource_spans in request.resource_spans:
            resource = attributes(resource_spans.resource.attributes)
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    span_id = span.span_id.hex()
                    assert span_id not in spans, f"span {span_id} sent twice"
                    spans[span_id] = (span, resource, scope_spans.scope.name)
    return spans


@pytest.fixture()
def sample(tmp_path):
    offset = export_sample.recent_unix_offset_ns()
    return (export_sample.write(tmp_path / "sample.json", offset),
            export_sample.expected_spans(offset, SERVICE))


def test_one_otlp_message_per_batch_keyed_by_trace_id_decoded_field_by_field(
        opsight_cli, kafka_server, sample):
    trace, expected = sample
    topic = f"opsight-spans-{uuid.uuid4().hex[:8]}"
    kafka_server.create_topic(topic, partitions=3)
    done, reports = export(opsight_cli, trace, f"kafka={kafka_server.bootstrap}?topic={topic}",
                           "--batch-size", "2")
    assert done.returncode == 0, done.stderr
    report, = reports
    assert report["target"] == f"kafka {kafka_server.bootstrap} topic {topic}"
    assert (report["spans"], report["sent"], report["dropped"]) == (6, 6, 0)
    # A message per batch of at most two spans of one trace: the request's trace (4 spans)
    # in two, the decoder's root and the tokenizer's root (a trace each) in one each.
    assert report["requests"] == 4

    messages = kafka_server.consume(topic, count=4)
    traces = {want["trace"] for want in expected.values()}
    assert len(traces) == 3
    assert {message.key().decode() for message in messages} == traces
    by_key: dict[bytes, set[int]] = {}
    for message in messages:
        by_key.setdefault(message.key(), set()).add(message.partition())
    assert all(len(partitions) == 1 for partitions in by_key.values())  # a key, a partition
    for message in messages:
        assert message.headers() == [("content-type", b"application/x-protobuf")]

    spans = decoded_spans(messages)
    assert set(spans) == set(expected)
    kinds = {"internal": 1, "server": 2}
    for span_id, want in expected.items():
        span, shared_resource, scope = spans[span_id]
        resource = dict(shared_resource)
        assert span.name == want["name"]
        assert span.trace_id.hex() == want["trace"]
        assert span.parent_span_id.hex() == (want["parent"] or "")
        assert span.start_time_unix_nano == want["start_unix_ns"], want["name"]
        assert span.end_time_unix_nano == want["end_unix_ns"], want["name"]
        assert span.kind == kinds[want["kind"]]
        got_attributes = attributes(span.attributes)
        assert got_attributes == want["attributes"], want["name"]
        assert type(got_attributes.get("batch", 0)) is int  # typed, not strings
        if want["error"]:
            assert span.status.code == 2  # STATUS_CODE_ERROR
            assert span.status.message == want["error"]
            event, = span.events
            assert event.name == "exception"
            assert event.time_unix_nano == want["end_unix_ns"]
            assert attributes(event.attributes) == want["exception"]
        else:
            assert span.status.code == 0 and not span.events
        assert scope == "opsight"
        version = resource.pop("telemetry.sdk.version")
        assert version
        want_resource = dict(want["resource"],
                             **{"process.title": export_sample.PROCESS_NAMES[want["pid"]]})
        assert resource == want_resource, want["name"]


def test_librdkafka_properties_reach_the_producer(opsight_cli, kafka_server, sample, tmp_path):
    trace, expected = sample
    topic = f"opsight-zstd-{uuid.uuid4().hex[:8]}"
    # Compressed by the producer, decompressed by the consumer: the payload is unchanged.
    done, reports = export(
        opsight_cli, trace,
        f"kafka={kafka_server.bootstrap}?topic={topic}&compression.type=zstd&acks=all"
        "&client.id=opsight-test&enable.idempotence=true")
    assert done.returncode == 0, done.stderr
    assert reports[0]["sent"] == 6
    messages = kafka_server.consume(topic, count=3)  # a message per trace
    assert set(decoded_spans(messages)) == set(expected)

    # TLS to a plaintext listener: the handshake fails, which retrying cannot mend, so the
    # batch fails and the report says why (the properties did reach librdkafka).
    started = time.monotonic()
    done, reports = export(
        opsight_cli, trace,
        f"kafka={kafka_server.bootstrap}?topic={topic}&security.protocol=SSL",
        "--timeout", "5")
    assert done.returncode != 0
    assert reports[0]["sent"] == 0 and reports[0]["dropped"] == 6
    assert "SSL" in reports[0]["error"] or "ssl" in reports[0]["error"], reports[0]["error"]
    print(f"TLS to plaintext: {time.monotonic() - started:.1f} s: {reports[0]['error']}")
    assert time.monotonic() - started < 30

    # A property librdkafka does not know is a usage error, before anything is sent.
    done, _ = export(opsight_cli, trace, f"kafka={kafka_server.bootstrap}?securty.protocol=SSL")
    assert done.returncode == 64  # a usage error (sysexits' EX_USAGE, as every command)
    assert "securty.protocol" in done.stderr and "No such configuration property" in done.stderr


def test_no_broker_is_a_bounded_wait_and_every_span_counted_as_dropped(opsight_cli, sample):
    trace, _ = sample
    port, = real_servers.free_ports(1)  # nobody listens there
    started = time.monotonic()
    done, reports = export(opsight_cli, trace, f"kafka=127.0.0.1:{port}?topic=nowhere",
                           "--timeout", "3")
    elapsed = time.monotonic() - started
    assert done.returncode != 0
    report, = reports
    assert (report["spans"], report["sent"], report["dropped"]) == (6, 0, 6)
    assert "Connection refused" in report["error"], report["error"]
    # --timeout 3: the export gives up at 3 s; a send under way ends by its own timeout
    # (3 s and the delivery report's second), and the producer is torn down at once.
    assert elapsed < 12, elapsed


def test_opsight_run_exports_a_python_program_through_opsight_export(kafka_server, tmp_path):
    """The path an unchanged program takes: OPSIGHT_EXPORT (a broker list: its comma stays
    in the Kafka target) read by `opsight run`, the merged run sent at the end."""
    opsight_command = pathlib.Path(sys.executable).with_name("opsight")
    assert opsight_command.is_file(), f"{opsight_command} is not installed: run `make install`"
    program = tmp_path / "program.py"
    program.write_text("import opsight\n"
                       "with opsight.span('outer'):\n"
                       "    with opsight.span('inner'):\n"
                       "        pass\n")
    topic = f"opsight-run-{uuid.uuid4().hex[:8]}"
    brokers = f"{kafka_server.bootstrap},{kafka_server.bootstrap}"
    env = dict(os.environ, OPSIGHT_EXPORT=f"kafka={brokers}?topic={topic}&acks=all")
    done = subprocess.run([str(opsight_command), "run", "--no-store", "--", sys.executable,
                           str(program)], capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr
    assert f"exported 2 of 2 spans to kafka {brokers} topic {topic} in 1 request" in done.stderr
    message, = kafka_server.consume(topic, count=1)
    spans = decoded_spans([message])
    assert sorted(span.name for span, _, _ in spans.values()) == ["inner", "outer"]
    outer = next(span for span, _, _ in spans.values() if span.name == "outer")
    inner = next(span for span, _, _ in spans.values() if span.name == "inner")
    assert inner.parent_span_id == outer.span_id
    assert message.key() == outer.trace_id.hex().encode()


def consume_all(kafka, topic, idle_s=3.0, timeout_s=60.0):
    """Every message of ``topic`` from its beginning, until none came for ``idle_s``."""
    client = real_servers.kafka_client()
    consumer = client.Consumer({"bootstrap.servers": kafka.bootstrap,
                                "group.id": f"opsight-{uuid.uuid4()}",
                                "auto.offset.reset": "earliest", "enable.auto.commit": False})
    messages = []
    try:
        consumer.subscribe([topic])
        last = time.monotonic()
        deadline = last + timeout_s
        while time.monotonic() - last < idle_s and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is None or message.error():
                continue
            messages.append(message)
            last = time.monotonic()
    finally:
        consumer.close()
    return messages


def test_spans_stream_to_kafka_while_the_program_runs(kafka_server, tmp_path):
    """`opsight run --export-live`: spans reach the topic while the program still runs,
    and in the end every span of the run's file is there once, keyed by the trace id."""
    script = tmp_path / "streamed.py"
    script.write_text(export_sample.LIVE_PROGRAM)
    output = tmp_path / "streamed.opsight"
    topic = f"opsight-live-{uuid.uuid4().hex[:8]}"
    kafka_server.create_topic(topic)
    run = subprocess.Popen(
        [sys.executable, "-m", "opsight", "run", "--no-store", "--report", "none", "-o",
         str(output), "--export-live", "--export", f"kafka={kafka_server.bootstrap}?topic={topic}",
         "--", sys.executable, str(script), str(tmp_path / "release")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert run.stdout.readline() == "done\n"
        kafka_server.consume(topic, count=1, timeout=30)  # the first spans, while it runs
        assert run.poll() is None
    finally:
        (tmp_path / "release").touch()
        _, stderr = run.communicate(timeout=60)
    assert run.returncode == 0, stderr
    assert "dropped" not in stderr, stderr

    import opsight
    trace = opsight.load(output).trace
    expected = set(trace.slice_columns()["span_id"])
    assert len(expected) == 32
    messages = consume_all(kafka_server, topic)
    spans = decoded_spans(messages)
    assert set(spans) == expected
    # Keyed by trace, as the run's file gives each span's (the warm-up root with its steps,
    # and the root after the release: a trace each).
    traces = set(trace.slice_columns()["trace_id"])
    assert {message.key().decode() for message in messages} == traces
    assert len(traces) == 2
