"""The logging bridge (opsight.integrations.logs) and the log exporters over it: Python
``logging`` records become instants in the trace on the thread that logged them, inside
the span open there (Trace.log_records() gives each its span's trace and span ids, as the
exporters send them), at OPSIGHT_LOGS's level (INFO by default) or off; the program's
logging is left as it was (no handler added, basicConfig and lastResort work, the patched
method is given back); records outside spans, from two threads, from asyncio tasks, with
exceptions and extra fields, and records logging cannot format. Then ``opsight run
--export otlp-logs=URL`` against a receiver in this process, the body read with the
opentelemetry-proto package's classes: every record with its severity, body, attributes
and the ids of the span that was open; the LOGS_ variables; and ``loki-logs``'s push body."""

from __future__ import annotations

import asyncio
import http.server
import json
import logging
import os
import subprocess
import sys
import threading

import pytest

import opsight
from conftest import require


@pytest.fixture
def logs_level(monkeypatch):
    """Sets OPSIGHT_LOGS for the sessions the test starts (unset: the default)."""
    monkeypatch.delenv("OPSIGHT_LOGS", raising=False)

    def set_level(value: str | None) -> None:
        if value is None:
            monkeypatch.delenv("OPSIGHT_LOGS", raising=False)
        else:
            monkeypatch.setenv("OPSIGHT_LOGS", value)

    return set_level


@pytest.fixture
def app_logger():
    """A logger that lets every level through, with a handler that keeps what it got (the
    program's own output, which the bridge must not change)."""
    logger = logging.getLogger("bridge_test.app")
    logger.setLevel(logging.DEBUG)
    kept: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record):
            kept.append(record)

    handler = Keep()
    logger.addHandler(handler)
    logger.kept = kept
    yield logger
    logger.removeHandler(handler)
    logger.setLevel(logging.NOTSET)
    logger.propagate = True


def _records(path):
    return opsight.load(path).trace.log_records()


def _spans(path):
    columns = opsight.load(path).trace.slice_columns()
    return {name: (span_id, trace_id) for name, span_id, trace_id in
            zip(columns["name"], columns["span_id"], columns["trace_id"])}


def test_records_carry_the_span_open_where_they_were_logged(tmp_path, logs_level, app_logger):
    path = tmp_path / "run.opsight"
    with opsight.profile(path):
        app_logger.warning("before any span")
        with opsight.span("request"):
            app_logger.info("in the request: %d items", 3)
            with opsight.span("step"):
                app_logger.error("in the step")
            app_logger.warning("back in the request")
        app_logger.debug("debug is below the default level")
    records = _records(path)
    spans = _spans(path)
    assert [r["message"] for r in records] == [
        "before any span", "in the request: 3 items", "in the step", "back in the request"]
    by_message = {r["message"]: r for r in records}
    assert by_message["before any span"]["span_id"] is None
    assert by_message["before any span"]["trace_id"] is None
    assert by_message["in the request: 3 items"]["span_id"] == spans["request"][0]
    assert by_message["in the request: 3 items"]["trace_id"] == spans["request"][1]
    assert by_message["in the step"]["span_id"] == spans["step"][0]
    assert by_message["back in the request"]["span_id"] == spans["request"][0]
    error = by_message["in the step"]
    assert (error["level"], error["level_name"], error["severity_number"]) == (40, "ERROR", 17)
    assert error["logger"] == "bridge_test.app"
    assert error["pid"] == os.getpid() and error["tid"] == threading.get_native_id()
    attributes = error["attributes"]
    assert attributes["logger.name"] == "bridge_test.app"
    assert attributes["code.file.path"] == __file__
    assert (attributes["code.function.name"]
            == "test_records_carry_the_span_open_where_they_were_logged")
    assert isinstance(attributes["code.line.number"], int) and attributes["code.line.number"] > 0
    assert attributes["thread.name"] == "MainThread"
    assert "exception.type" not in attributes
    # The program's own handler got every record, the debug one too: nothing changed there.
    assert [r.getMessage() for r in app_logger.kept][-1] == "debug is below the default level"
    assert len(app_logger.kept) == 5


def test_a_spans_own_arguments_after_a_record_stay_the_spans(tmp_path, logs_level,
                                                               app_logger):
    """A record is an instant, and an argument that follows an instant on its track is the
    instant's: the bridge writes its records on a lane of their own, so that what a span
    gets after a record logged in it (here an exception leaving it, and an argument) stays
    the span's, in the file and in the live export's reading."""
    import opsight._native as _native

    path = tmp_path / "run.opsight"
    with opsight.profile(path):
        with pytest.raises(ValueError):
            with opsight.span("handler"):
                app_logger.error("about to fail")
                _native.add_arg("status", 500)
                raise ValueError("kaput")
    columns = opsight.load(path).trace.slice_columns()
    row = columns["name"].index("handler")
    attributes = columns["attributes"]
    assert attributes["exception.type"][row] == "ValueError"
    assert attributes["exception.message"][row] == "kaput"
    assert attributes["status"][row] == 500
    record, = _records(path)
    assert record["span_id"] == columns["span_id"][row]
    assert "status" not in record["attributes"] and "exception.type" not in record["attributes"]


def test_the_level_comes_from_opsight_logs_and_off_records_nothing(tmp_path, logs_level,
                                                                  app_logger):
    for setting, expected in [("DEBUG", ["d", "i", "w"]), ("warning", ["w"]), ("25", ["w"]),
                              ("off", []), ("0", [])]:
        logs_level(setting)
        path = tmp_path / f"run-{setting}.opsight"
        original = logging.Logger.callHandlers
        with opsight.profile(path):
            if setting in ("off", "0"):
                assert logging.Logger.callHandlers is original  # not even hooked
            app_logger.debug("d")
            app_logger.info("i")
            app_logger.warning("w")
        assert [r["message"] for r in _records(path)] == expected, setting


def test_the_programs_logging_is_left_as_it_was(tmp_path, logs_level):
    """No handler is added (the handler lists are the same during and after the session),
    Logger.callHandlers is given back at stop, basicConfig still configures a program that
    calls it during the session, and lastResort still prints for a program that configured
    nothing."""
    program = tmp_path / "configures.py"
    program.write_text(
        "import logging, opsight\n"
        "root = logging.getLogger()\n"
        "before = (list(root.handlers), logging.Logger.callHandlers)\n"
        "with opsight.profile(%r):\n"
        "    assert list(root.handlers) == before[0]\n"
        "    assert logging.Logger.callHandlers is not before[1]  # the bridge's\n"
        "    logging.getLogger('quiet').warning('to lastResort')\n"
        "    logging.basicConfig(level=logging.INFO, format='configured %%(message)s')\n"
        "    assert len(root.handlers) == len(before[0]) + 1  # basicConfig's own\n"
        "    logging.info('hello')\n"
        "assert logging.Logger.callHandlers is before[1]\n"
        "root.removeHandler(root.handlers[-1])\n"
        "assert list(root.handlers) == before[0]\n" % str(tmp_path / "run.opsight"))
    environment = {key: value for key, value in os.environ.items()
                   if not key.startswith("OPSIGHT_") or key == "OPSIGHT_HOME"}
    done = subprocess.run([sys.executable, str(program)], capture_output=True, text=True,
                          timeout=60, env=environment)
    assert done.returncode == 0, done.stderr
    assert "to lastResort\n" in done.stderr  # lastResort's plain message
    assert "configured hello\n" in done.stderr  # basicConfig took effect
    assert [r["message"] for r in _records(tmp_path / "run.opsight")] == ["to lastResort",
                                                                         "hello"]


def test_the_method_is_given_back_and_costs_nothing_while_switched_off(tmp_path, logs_level,
                                                                       app_logger):
    original = logging.Logger.callHandlers
    path = tmp_path / "run.opsight"
    with opsight.profile(path):
        assert logging.Logger.callHandlers is not original
        opsight.disable()
        assert logging.Logger.callHandlers is original
        app_logger.warning("while off")
        opsight.enable()
        assert logging.Logger.callHandlers is not original
        app_logger.warning("on again")
    assert logging.Logger.callHandlers is original
    app_logger.warning("after the session")
    assert [r["message"] for r in _records(path)] == ["on again"]


def test_exceptions_extra_fields_and_stack_info(tmp_path, logs_level, app_logger):
    class Unprintable:
        def __str__(self):
            raise RuntimeError("no")

    path = tmp_path / "run.opsight"
    with opsight.profile(path):
        with opsight.span("handler"):
            try:
                {}["missing"]
            except KeyError:
                app_logger.exception("lookup failed for %s", "user-7")
            app_logger.warning("with fields", extra={"user_id": 7, "ratio": 0.5, "ok": True,
                                                     "tags": ["a"], "odd": Unprintable()})
            app_logger.warning("with the stack", stack_info=True)
    by_message = {r["message"]: r for r in _records(path)}
    failed = by_message["lookup failed for user-7"]
    assert failed["level_name"] == "ERROR"
    assert failed["attributes"]["exception.type"] == "KeyError"
    assert failed["attributes"]["exception.message"] == "'missing'"
    stack = failed["attributes"]["exception.stacktrace"]
    assert stack.startswith("Traceback (most recent call last):") and "KeyError: 'missing'" in stack
    assert failed["span_id"] == _spans(path)["handler"][0]
    fields = by_message["with fields"]["attributes"]
    assert (fields["user_id"], fields["ratio"], fields["ok"], fields["tags"]) == (7, 0.5, True,
                                                                                  "['a']")
    assert "odd" not in fields or fields["odd"] != ""  # unprintable: skipped, never raised
    assert "stack_info" not in fields and "msg" not in fields  # logging's own, not extras
    assert "test_exceptions_extra_fields_and_stack_info" in by_message["with the stack"][
        "attributes"]["code.stacktrace"]


def test_a_record_logging_cannot_format_is_kept_and_never_raises(tmp_path, logs_level,
                                                                 app_logger):
    path = tmp_path / "run.opsight"
    app_logger.propagate = False  # pytest's own handler would raise on it
    with opsight.profile(path):
        app_logger.warning("two %s %s", "only-one")  # logging prints its own error for this
        app_logger.warning("fine")
    messages = [r["message"] for r in _records(path)]
    assert messages == ["two %s %s", "fine"]  # the unformatted message


def test_records_from_two_threads_and_asyncio_tasks_carry_their_own_spans(tmp_path, logs_level,
                                                                          app_logger):
    path = tmp_path / "run.opsight"
    barrier = threading.Barrier(2)

    def work(name):
        with opsight.span(f"thread {name}"):
            barrier.wait()
            for index in range(20):
                app_logger.warning("%s %d", name, index)

    @opsight.trace("task")  # a traced coroutine runs on its asyncio task's own track
    async def task(name):
        await asyncio.sleep(0)
        app_logger.warning("task %s", name)
        await asyncio.sleep(0)
        app_logger.warning("task %s again", name)

    async def both():
        await asyncio.gather(task("a"), task("b"))

    with opsight.profile(path):
        threads = [threading.Thread(target=work, args=(name,), name=f"worker-{name}")
                   for name in ("x", "y")]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        asyncio.run(both())
    records = _records(path)
    spans = _spans(path)
    for name in ("x", "y"):
        mine = [r for r in records if r["message"].startswith(f"{name} ")]
        assert len(mine) == 20
        assert {r["span_id"] for r in mine} == {spans[f"thread {name}"][0]}
        assert {r["attributes"]["thread.name"] for r in mine} == {f"worker-{name}"}
    task_spans = set()
    for name in ("a", "b"):
        mine = [r for r in records if r["message"].startswith(f"task {name}")]
        assert len(mine) == 2
        span_ids = {r["span_id"] for r in mine}
        assert len(span_ids) == 1  # both records of a task in its one span
        task_spans |= span_ids
    columns = opsight.load(path).trace.slice_columns()
    assert task_spans == {span_id for name, span_id in zip(columns["name"], columns["span_id"])
                          if name == "task"}  # the two tasks' spans, one each


def test_no_session_no_record_and_no_hook(tmp_path, logs_level, app_logger):
    original = logging.Logger.callHandlers
    app_logger.warning("nobody records this")
    assert logging.Logger.callHandlers is original


# ---- export ----------------------------------------------------------------------------------

class _Receiver:
    """An HTTP receiver on 127.0.0.1 answering 200; keeps each request's path, headers and
    body."""

    def __init__(self):
        self.requests: list[tuple[str, dict[str, str], bytes]] = []
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 (the http.server API)
                body = self.rfile.read(int(self.headers["Content-Length"]))
                receiver.requests.append((self.path, {key.lower(): value for key, value
                                                      in self.headers.items()}, body))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver():
    server = _Receiver()
    yield server
    server.close()


PROGRAM = """
import logging, threading, opsight

logging.basicConfig(level=logging.INFO, format="%(message)s")
log = logging.getLogger("shop.orders")

@opsight.trace
def checkout(order):
    log.info("checkout %s", order)
    try:
        raise ValueError(f"no stock for {order}")
    except ValueError:
        log.exception("order %s failed", order)

@opsight.trace
def worker():
    logging.getLogger("shop.worker").warning("worker here", extra={"queue": "q1"})

log.warning("starting")
for order in ("o-1", "o-2"):
    checkout(order)
thread = threading.Thread(target=worker, name="pool-1")
thread.start()
thread.join()
log.debug("not at INFO")
"""


def _otlp_records(body: bytes):
    """(resource attributes, scope name, LogRecord) of every record of an
    ExportLogsServiceRequest, read with opentelemetry-proto's classes."""
    require("opentelemetry.proto")
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

    request = ExportLogsServiceRequest.FromString(body)
    out = []
    for resource_logs in request.resource_logs:
        resource = {kv.key: kv.value for kv in resource_logs.resource.attributes}
        for scope_logs in resource_logs.scope_logs:
            for record in scope_logs.log_records:
                out.append((resource, scope_logs.scope.name, record))
    return out


def _any(value):
    kind = value.WhichOneof("value")
    return getattr(value, kind) if kind else None


def test_opsight_run_exports_every_record_as_otlp_logs_the_otel_protos_read(tmp_path, receiver):
    script = tmp_path / "shop.py"
    script.write_text(PROGRAM)
    output = tmp_path / "run.opsight"
    environment = {key: value for key, value in os.environ.items()
                   if not key.startswith(("OPSIGHT_", "OTEL_")) or key == "OPSIGHT_HOME"}
    environment["OTEL_EXPORTER_OTLP_LOGS_HEADERS"] = "x-tenant=logs"
    environment["OTEL_EXPORTER_OTLP_HEADERS"] = "x-tenant=general,x-other=1"
    done = subprocess.run(
        [sys.executable, "-m", "opsight", "run", "--no-store", "--report", "none", "-o",
         str(output), "--export", f"otlp-logs={receiver.url}", "--", sys.executable,
         str(script)], capture_output=True, text=True, timeout=120, env=environment)
    assert done.returncode == 0, done.stderr
    assert (f"exported 6 of 6 log records to otlp-logs {receiver.url}/v1/logs in 1 request"
            in done.stderr), done.stderr
    assert "checkout o-1\n" in done.stderr  # the program's own output is as it was
    (path, headers, body), = receiver.requests
    assert path == "/v1/logs"
    assert headers["content-type"] == "application/x-protobuf"
    assert (headers["x-tenant"], headers["x-other"]) == ("logs", "1")  # LOGS_ wins, key by key

    trace = opsight.load(output).trace
    columns = trace.slice_columns()
    spans = {}  # name -> [(span id, trace id)]
    for name, span_id, trace_id in zip(columns["name"], columns["span_id"], columns["trace_id"]):
        spans.setdefault(name, []).append((span_id, trace_id))
    sent = _otlp_records(body)
    assert len(sent) == 6
    by_body = {_any(record.body): (resource, scope, record) for resource, scope, record in sent}
    assert set(by_body) == {"starting", "checkout o-1", "order o-1 failed", "checkout o-2",
                            "order o-2 failed", "worker here"}
    checkout_spans = [span for name, ids in spans.items() if name.endswith("checkout")
                      for span in ids]
    assert len(checkout_spans) == 2
    for index, order in enumerate(("o-1", "o-2")):
        for message, number, text in ((f"checkout {order}", 9, "INFO"),
                                      (f"order {order} failed", 17, "ERROR")):
            resource, scope, record = by_body[message]
            assert _any(resource["service.name"]) == "shop.py"
            assert scope == "shop.orders"
            assert (record.severity_number, record.severity_text) == (number, text)
            assert record.span_id.hex() == checkout_spans[index][0]
            assert record.trace_id.hex() == checkout_spans[index][1]
            assert record.flags == 1
            assert record.time_unix_nano == record.observed_time_unix_nano > 0
            attributes = {kv.key: _any(kv.value) for kv in record.attributes}
            assert attributes["logger.name"] == "shop.orders"
            assert attributes["code.file.path"] == str(script)
            assert attributes["code.function.name"] == "checkout"
            assert attributes["thread.name"] == "MainThread"
    failed = {kv.key: _any(kv.value) for kv in by_body["order o-1 failed"][2].attributes}
    assert failed["exception.type"] == "ValueError"
    assert failed["exception.message"] == "no stock for o-1"
    assert "raise ValueError" in failed["exception.stacktrace"]
    _, scope, starting = by_body["starting"]
    assert (starting.trace_id, starting.span_id, starting.flags) == (b"", b"", 0)  # no span
    _, scope, worker = by_body["worker here"]
    worker_attributes = {kv.key: _any(kv.value) for kv in worker.attributes}
    assert scope == "shop.worker" and worker_attributes["queue"] == "q1"
    assert worker_attributes["thread.name"] == "pool-1"
    worker_span, = [ids for name, ids in spans.items() if name.endswith("worker")]
    assert worker.span_id.hex() == worker_span[0][0]
    # Each record's time lies inside its span, on the trace's clock.
    offset = trace.run_info().get("unix_offset_ns")
    if offset is not None:
        starts = dict(zip(columns["span_id"], columns["start"]))
        ends = dict(zip(columns["span_id"], columns["end"]))
        for _, _, record in sent:
            if record.span_id:
                span_id = record.span_id.hex()
                assert starts[span_id] + offset <= record.time_unix_nano <= ends[span_id] + offset


def test_logs_targets_are_checked_before_the_program_starts(tmp_path):
    script = tmp_path / "nothing.py"
    script.write_text("print('ran')\n")
    environment = {key: value for key, value in os.environ.items()
                   if not key.startswith(("OPSIGHT_", "OTEL_")) or key == "OPSIGHT_HOME"}
    environment["OTEL_EXPORTER_OTLP_LOGS_PROTOCOL"] = "http/json"  # grpc is otlp-logs-grpc
    done = subprocess.run(
        [sys.executable, "-m", "opsight", "run", "--no-store", "--report", "none", "--export",
         "otlp-logs", "--", sys.executable, str(script)],
        capture_output=True, text=True, timeout=60, env=environment)
    assert done.returncode == 64, done.stderr
    assert "OTEL_EXPORTER_OTLP_LOGS_PROTOCOL 'http/json'" in done.stderr
    assert "ran" not in done.stdout


def test_loki_logs_pushes_lines_with_the_ids_under_export_live_too(tmp_path, receiver):
    """loki-logs from ``opsight run --export-live``: the records stream as the program
    writes them (in batches of OTEL_BLRP_MAX_EXPORT_BATCH_SIZE, at least every
    OTEL_BLRP_SCHEDULE_DELAY), with the tenant header; every record once."""
    script = tmp_path / "shop.py"
    script.write_text(PROGRAM)
    environment = {key: value for key, value in os.environ.items()
                   if not key.startswith(("OPSIGHT_", "OTEL_")) or key == "OPSIGHT_HOME"}
    environment["OPSIGHT_LOKI_TENANT"] = "shop"
    done = subprocess.run(
        [sys.executable, "-m", "opsight", "run", "--no-store", "--report", "none", "-o",
         str(tmp_path / "run.opsight"), "--export-live", "--export",
         f"loki-logs={receiver.url}", "--service", "shop", "--", sys.executable, str(script)],
        capture_output=True, text=True, timeout=120, env=environment)
    assert done.returncode == 0, done.stderr
    assert receiver.requests
    streams: dict[tuple[str, str], list] = {}
    for path, headers, body in receiver.requests:
        assert path == "/loki/api/v1/push" and headers["x-scope-orgid"] == "shop"
        for stream in json.loads(body)["streams"]:
            streams.setdefault((stream["stream"]["service_name"], stream["stream"]["level"]),
                               []).extend(stream["values"])
    assert set(streams) == {("shop", "info"), ("shop", "warning"), ("shop", "error")}
    lines = [json.loads(line) for values in streams.values() for _, line in values]
    assert len(lines) == 6
    assert len({line["message"] for line in lines}) == 6  # none twice
    records = {r["message"]: r for r in opsight.load(tmp_path / "run.opsight").trace.log_records()}
    for line in lines:
        want = records[line["message"]]
        assert line.get("trace_id") == want["trace_id"]
        assert line.get("span_id") == want["span_id"]
        assert line["attributes"]["logger.name"] == want["logger"]
