"""Export targets from Python: how ``OPSIGHT_EXPORT`` and ``opsight run --export`` split a
list of targets (a Kafka target's broker list keeps its commas), and ``Trace.export`` with
the Kafka and Loki kinds: a bad librdkafka property is a ValueError naming it, and a Loki
push reaches an HTTP server (in this process) as one JSON line per span. And the core was
built with the libraries of its optional export kinds (Kafka: librdkafka, OTLP/gRPC: grpc++)
wherever they are installed: a build that found neither leaves out those kinds and their
C++ unit tests without a word, so this fails instead."""

from __future__ import annotations

import http.server
import json
import shutil
import subprocess
import threading

import pytest

import opsight
from opsight import _native
from opsight._session.export import parse_targets

from conftest import REQUIRED

#: The export kinds CMake builds only where their library is found (OPSIGHT_WITH_KAFKA,
#: OPSIGHT_WITH_GRPC): a target to check, the library's pkg-config name, its Debian package
#: (scripts/setup.sh installs both) and the C++ unit tests left out of a build without it.
OPTIONAL_EXPORT_KINDS = {
    "kafka": ("kafka=127.0.0.1:9?topic=spans", "rdkafka", "librdkafka-dev",
              "kafka_sender_test.cc"),
    "otlp-grpc": ("otlp-grpc=http://127.0.0.1:4317", "grpc++", "libgrpc++-dev",
                  "grpc_sender_test.cc"),
    "otlp-metrics-grpc": ("otlp-metrics-grpc=http://127.0.0.1:4317", "grpc++", "libgrpc++-dev",
                          "grpc_sender_test.cc"),
    "otlp-logs-grpc": ("otlp-logs-grpc=http://127.0.0.1:4317", "grpc++", "libgrpc++-dev",
                       "grpc_sender_test.cc"),
}


def require_export_kind(kind: str) -> None:
    """Returns when this opsight exports to ``kind``; else fails when the library is
    installed (the build is stale or left it out) or ``OPSIGHT_REQUIRE`` names the kind, and
    skips saying so otherwise."""
    target, library, package, unit_tests = OPTIONAL_EXPORT_KINDS[kind]
    try:
        _native.check_export_targets([target])
        return
    except ValueError as error:
        problem = str(error)
    message = (f"this opsight does not export to {kind} ({problem}); a build without "
               f"{package} leaves out the kind and its C++ unit tests ({unit_tests})")
    installed = shutil.which("pkg-config") is not None and subprocess.run(
        ["pkg-config", "--exists", library], capture_output=True).returncode == 0
    if installed:
        pytest.fail(f"{message}, though {package} is installed: rebuild it (make install)",
                    pytrace=False)
    if kind in REQUIRED:
        pytest.fail(f"{message} (OPSIGHT_REQUIRE names {kind})", pytrace=False)
    pytest.skip(f"{message}: apt-get install {package} and rebuild; OPSIGHT_REQUIRE={kind} "
                "makes this a failure")


@pytest.mark.parametrize("kind", sorted(OPTIONAL_EXPORT_KINDS))
def test_the_core_exports_to_the_kinds_whose_library_is_installed(kind):
    require_export_kind(kind)


def test_targets_split_on_commas_semicolons_and_spaces():
    assert parse_targets("otlp=http://a:4318, zipkin;loki") == [
        "otlp=http://a:4318", "zipkin", "loki"]
    assert parse_targets(["otlp", "zipkin=http://z:9411 pushgateway=http://p:9091"]) == [
        "otlp", "zipkin=http://z:9411", "pushgateway=http://p:9091"]
    assert parse_targets(None) == [] and parse_targets("") == []


def test_a_kafka_target_keeps_its_brokers_and_property_commas():
    assert parse_targets("kafka=k1:9092,k2:9092?topic=spans, loki") == [
        "kafka=k1:9092,k2:9092?topic=spans", "loki"]
    assert parse_targets("kafka=k1:9092, k2:9092;kafka?debug=broker,msg,zipkin") == [
        "kafka=k1:9092,k2:9092", "kafka?debug=broker,msg", "zipkin"]
    # After anything but a Kafka target a comma still separates.
    assert parse_targets("zipkin,k2:9092") == ["zipkin", "k2:9092"]
    # A space or a semicolon always ends a target.
    assert parse_targets("kafka=k1:9092 k2:9092") == ["kafka=k1:9092", "k2:9092"]


def _small_trace(tmp_path):
    with opsight.profile(tmp_path / "run.opsight"):
        with opsight.span("outer"):
            with opsight.span("inner"):
                pass
    return opsight.load(tmp_path / "run.opsight").trace


def test_trace_export_refuses_a_bad_kafka_property_by_name(tmp_path):
    require_export_kind("kafka")
    trace = _small_trace(tmp_path)
    with pytest.raises(ValueError) as raised:
        trace.export(["kafka=127.0.0.1:9?securty.protocol=SSL"])
    assert "securty.protocol" in str(raised.value), raised.value


def test_trace_export_pushes_one_loki_line_per_span(tmp_path):
    trace = _small_trace(tmp_path)
    received = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 (the http.server API)
            body = self.rfile.read(int(self.headers["Content-Length"]))
            received.append((self.path, self.headers["Content-Type"], body))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    serving = threading.Thread(target=server.serve_forever, daemon=True)
    serving.start()
    try:
        url = f"http://127.0.0.1:{server.server_port}"
        report, = trace.export([f"loki={url}"], service="py-test", timeout_s=10)
    finally:
        server.shutdown()
    assert report["target"] == f"loki {url}/loki/api/v1/push"
    assert (report["spans"], report["sent"], report["dropped"]) == (2, 2, 0)
    (path, content_type, body), = received
    assert path == "/loki/api/v1/push" and content_type == "application/json"
    lines = {}
    for stream in json.loads(body)["streams"]:
        assert stream["stream"]["service_name"] == "py-test"
        assert stream["stream"]["status"] == "ok"
        for timestamp, line in stream["values"]:
            entry = json.loads(line)
            assert int(timestamp) > 1_600_000_000 * 10**9  # Unix nanoseconds, as a string
            lines[stream["stream"]["span_name"]] = entry
    assert set(lines) == {"outer", "inner"}
    assert lines["inner"]["parent_span_id"] == lines["outer"]["span_id"]
    assert lines["inner"]["trace_id"] == lines["outer"]["trace_id"]


class _Refusing(http.server.BaseHTTPRequestHandler):
    """An OTLP receiver that refuses every batch for good (HTTP 400): the drops are at once."""

    def do_POST(self):  # noqa: N802 (the http.server API)
        self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(400)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.mark.parametrize("live, from_file", [(False, False), (True, False), (False, True)],
                         ids=["at exit", "live", "from the targets file"])
def test_what_an_export_dropped_is_in_the_reports_the_file_and_the_stored_run(tmp_path, live,
                                                                              from_file):
    import os
    import subprocess
    import sys

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Refusing)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    target = f"otlp http://127.0.0.1:{server.server_port}/v1/traces"
    script = tmp_path / "work.py"
    script.write_text("import opsight\nfor i in range(7):\n    with opsight.span('work'):\n"
                      "        pass\n")
    output = tmp_path / "run.opsight"
    environment = {**os.environ, "OPSIGHT_HOME": str(tmp_path / "home")}  # its own run store
    environment.pop("OPSIGHT_EXPORT", None)
    where = ["--export", f"otlp=http://127.0.0.1:{server.server_port}"]
    if from_file:  # the same target from the targets file's export: section
        targets_file = tmp_path / "targets.yaml"
        targets_file.write_text("targets:\n  - {module: work, function: nothing}\nexport:\n"
                                f"  otlp: http://127.0.0.1:{server.server_port}\n")
        where = ["-c", str(targets_file)]
    try:
        done = subprocess.run(
            [sys.executable, "-m", "opsight", "run", "--report", "summary",
             "-o", str(output), *where,
             *(["--export-live"] if live else []), "--", sys.executable, str(script)],
            capture_output=True, text=True, timeout=120, env=environment)
    finally:
        server.shutdown()
        server.server_close()
    # The program succeeded, the export did not: opsight run says so in its status (75).
    assert done.returncode == 75, done.stderr
    assert "an export dropped 7 spans: exit status 75" in done.stderr, done.stderr
    line = f"exported 0 of 7 spans to {target}, 7 dropped"
    overhead = [text for text in done.stderr.splitlines() if text.startswith("tracer overhead:")]
    assert overhead and line in overhead[0], done.stderr  # the run's own report
    written = opsight.load(output).trace
    assert line in written.render("summary")  # the file keeps it
    document = json.loads(written.render("tree", "json"))
    assert document["export"] == [{"target": target, "spans": 7, "sent": 0, "dropped": 7}]
    shown = subprocess.run([sys.executable, "-m", "opsight", "report", "latest", "--summary"],
                           capture_output=True, text=True, timeout=60, env=environment)
    assert shown.returncode == 0, shown.stderr
    assert line in shown.stdout, shown.stdout  # and so does the stored run


def test_an_unchanged_program_exports_to_its_targets_files_section(tmp_path):
    """OPSIGHT_OUTPUT and OPSIGHT_TARGETS, no opsight command: the program exports to the
    targets file's export: section when it ends (the refusing server makes the line
    count every span as dropped)."""
    import os
    import subprocess
    import sys

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Refusing)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    targets_file = tmp_path / "targets.yaml"
    targets_file.write_text("targets:\n  - {module: json, function: dumps}\nexport:\n"
                            f"  - otlp=http://127.0.0.1:{server.server_port}\n")
    script = tmp_path / "work.py"
    script.write_text("import json\nfor _ in range(3):\n    json.dumps(1)\n")
    environment = {**os.environ, "OPSIGHT_OUTPUT": str(tmp_path / "out.opsight"),
                   "OPSIGHT_TARGETS": str(targets_file)}
    environment.pop("OPSIGHT_EXPORT", None)
    try:
        done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                              timeout=120, env=environment)
    finally:
        server.shutdown()
        server.server_close()
    assert done.returncode == 0, done.stderr
    assert (f"opsight: exported 0 of 3 spans to otlp http://127.0.0.1:{server.server_port}"
            f"/v1/traces") in done.stderr, done.stderr
