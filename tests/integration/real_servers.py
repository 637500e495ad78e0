"""Real servers on 127.0.0.1 for the export tests: Jaeger v2, the OpenTelemetry Collector,
Zipkin, Prometheus, the Pushgateway, VictoriaLogs and a Kafka broker in KRaft mode
(docs/servers.md).

``scripts/servers/install.sh`` installs them once, outside the repo (under
``${OPSIGHT_CACHE:-~/.cache/opsight}/servers/``); here each is a context manager that picks
free ports, writes its configuration into a temporary folder, starts the server, waits until
it answers, and yields an object with its endpoints and small query helpers::

    with real_servers.jaeger() as jaeger:
        post_json(jaeger.otlp_traces_url, payload)
        trace = jaeger.get_trace("0123...")

The server logs to a file in that folder; any start error includes the log's tail. On exit
the server's process group is terminated (killed if it lingers), whether the test passed or
not; the server also gets SIGTERM if this Python process dies first.

A server that is not installed skips the test, saying which ``install.sh NAME`` brings it,
unless ``OPSIGHT_REQUIRE`` (a comma list, as ``make test`` sets it) names the server: then
the test fails. Only the standard library is used, but for the Kafka helpers (confluent-kafka,
pinned in requirements/test.txt).

The ``*_server`` names at the bottom are module-scoped pytest fixtures over the same context
managers: a test module imports those it uses (``from real_servers import jaeger_server``).
"""

from __future__ import annotations

import base64
import calendar
import collections
import contextlib
import ctypes
import importlib.util
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

#: Where scripts/servers/install.sh puts the servers.
CACHE = Path(os.environ.get("OPSIGHT_CACHE") or Path.home() / ".cache" / "opsight") / "servers"
ROOT = Path(__file__).resolve().parents[2]
INSTALL = "scripts/servers/install.sh"

#: Servers that must be there (OPSIGHT_REQUIRE, comma list): a missing one fails the test.
REQUIRED = {name.strip() for name in os.environ.get("OPSIGHT_REQUIRE", "").split(",")
            if name.strip()}


def require_modules(*modules: str) -> None:
    """Skips (fails, when OPSIGHT_REQUIRE names one) if a Python module is not installed."""
    for module in modules:
        if importlib.util.find_spec(module) is None:
            message = f"{module} is not installed (requirements/test.txt)"
            if module in REQUIRED:
                pytest.fail(f"{message} (OPSIGHT_REQUIRE names {module})", pytrace=False)
            pytest.skip(message)


PROMETHEUS_BINARY = Path("/usr/bin/prometheus")
PUSHGATEWAY_BINARY = Path("/usr/bin/prometheus-pushgateway")
PROMTOOL_BINARY = Path("/usr/bin/promtool")


class ServerError(RuntimeError):
    """A server did not start, died, or did not answer in time."""


# --- small HTTP helpers (urllib) -------------------------------------------------------------

def http_request(url: str, data: bytes | None = None, method: str | None = None,
                 headers: dict[str, str] | None = None, timeout: float = 10.0
                 ) -> tuple[int, bytes]:
    """(status, body) of one request; HTTP errors are returned, not raised."""
    request = urllib.request.Request(url, data=data, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def post_json(url: str, payload: Any, timeout: float = 10.0) -> tuple[int, bytes]:
    """POSTs ``payload`` as JSON; returns (status, body)."""
    return http_request(url, json.dumps(payload).encode(), "POST",
                        {"Content-Type": "application/json"}, timeout)


def get_json(url: str, timeout: float = 10.0) -> Any:
    status, body = http_request(url, timeout=timeout)
    if status != 200:
        raise ServerError(f"GET {url}: HTTP {status}: {body[:500]!r}")
    return json.loads(body)


def poll(what: str, attempt: Callable[[], Any], timeout: float, interval: float = 0.1) -> Any:
    """Calls ``attempt`` until it returns something truthy; raises ServerError (naming
    ``what`` and the last exception, if any) after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    last_error: BaseException | None = None
    while True:
        try:
            result = attempt()
            if result:
                return result
        except (OSError, ServerError, ValueError) as error:
            last_error = error
        if time.monotonic() >= deadline:
            detail = f" (last error: {last_error})" if last_error else ""
            raise ServerError(f"{what}: not there after {timeout:g} s{detail}")
        time.sleep(interval)


# --- processes ---------------------------------------------------------------------------------

def free_ports(count: int) -> list[int]:
    """``count`` distinct TCP ports free on 127.0.0.1 right now (held together while picked)."""
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind(("127.0.0.1", 0))
            sockets.append(sock)
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def port_open(port: int, host: str = "127.0.0.1") -> bool:
    with contextlib.closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((host, port)) == 0


_PR_SET_PDEATHSIG = 1
try:
    _LIBC = ctypes.CDLL(None, use_errno=True)
except OSError:
    _LIBC = None


def _die_with_parent() -> None:  # runs in the child between fork and exec
    """The server gets SIGTERM when this process dies (Linux), even by SIGKILL."""
    if _LIBC is not None:
        _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def missing(name: str, detail: str) -> None:
    """Fails (``OPSIGHT_REQUIRE`` names ``name``) or skips the calling test."""
    message = f"{name} is not installed ({detail}): run `{INSTALL} {name}`"
    if name in REQUIRED:
        pytest.fail(f"{message} (OPSIGHT_REQUIRE names {name})", pytrace=False)
    pytest.skip(f"{message}; OPSIGHT_REQUIRE={name} makes this a failure")


def require_command(command: str, package: str) -> str:
    """The path of ``command``; when it is not on PATH, fails the test if ``OPSIGHT_REQUIRE``
    names it, else skips saying which Debian ``package`` brings it (scripts/setup.sh test
    installs it)."""
    path = shutil.which(command)
    if path is None:
        message = f"the {command} command is not installed (Debian package {package})"
        if command in REQUIRED:
            pytest.fail(f"{message} but OPSIGHT_REQUIRE names it", pytrace=False)
        pytest.skip(f"{message}; OPSIGHT_REQUIRE={command} makes this a failure")
    return path


def self_signed_certificate(directory: Path, name: str) -> tuple[str, str]:
    """A self-signed certificate for 127.0.0.1 (CN ``name``) and its key, as PEM files in
    ``directory``, made by openssl: a server's certificate that is its own CA (give it as
    OTEL_EXPORTER_OTLP_CERTIFICATE), or a client's for mutual TLS."""
    require_command("openssl", "openssl")
    key, certificate = directory / f"{name}.key", directory / f"{name}.pem"
    made = subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days",
                           "1", "-subj", f"/CN={name}", "-addext", "subjectAltName=IP:127.0.0.1",
                           "-keyout", str(key), "-out", str(certificate)],
                          capture_output=True, text=True, timeout=60)
    assert made.returncode == 0, made.stderr
    return str(certificate), str(key)


def installed_file(name: str, path: Path) -> Path:
    """``path`` when it is there, else skips or fails (``missing``)."""
    if not path.exists():
        missing(name, f"{path} not found")
    return path


def installed_version(name: str) -> str:
    """The version install.sh recorded for ``name`` ('' when it has no stamp)."""
    try:
        return (CACHE / name / ".stamp").read_text().split()[1]
    except (OSError, IndexError):
        return ""


class Server:
    """One started server: its process (a group of its own), folder, log and ports."""

    def __init__(self, name: str, workdir: Path):
        self.name = name
        self.workdir = workdir
        self.log_path = workdir / f"{name}.log"
        self.process: subprocess.Popen | None = None
        self.version = installed_version(name)

    def start(self, command: list[str], env: dict[str, str] | None = None) -> None:
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                [str(part) for part in command], cwd=self.workdir, stdin=subprocess.DEVNULL,
                stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})},
                start_new_session=True, preexec_fn=_die_with_parent)

    def log_tail(self, characters: int = 4000) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "(no log)"
        return text[-characters:]

    def error(self, message: str) -> ServerError:
        return ServerError(f"{self.name}: {message}\n--- last lines of {self.log_path} ---\n"
                           f"{self.log_tail()}")

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def wait_ready(self, ready: Callable[[], Any], timeout: float) -> None:
        """Polls ``ready`` until truthy; raises with the log's tail if the process exits or
        the time runs out."""
        deadline = time.monotonic() + timeout
        while True:
            if not self.alive():
                code = self.process.returncode if self.process else None
                raise self.error(f"exited with status {code} before it was ready")
            try:
                if ready():
                    return
            except (OSError, ValueError, ServerError):
                pass
            if time.monotonic() >= deadline:
                raise self.error(f"not ready after {timeout:g} s")
            time.sleep(0.1)

    def http_ready(self, url: str) -> Callable[[], bool]:
        return lambda: http_request(url, timeout=2)[0] == 200

    def stop(self, grace: float = 10.0) -> None:
        """SIGTERM to the server's process group, SIGKILL after ``grace`` seconds."""
        process, self.process = self.process, None
        if process is None:
            return
        for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
            try:
                os.killpg(process.pid, sig)
            except ProcessLookupError:
                break
            try:
                process.wait(timeout=wait)
                break
            except subprocess.TimeoutExpired:
                continue
        # children that outlived the leader (none of these servers fork, but be sure)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name} {self.version} in {self.workdir}>"


@contextlib.contextmanager
def _running(server: Server, keep_dir: bool = False) -> Iterator[Server]:
    try:
        yield server
    finally:
        server.stop()
        if not keep_dir and not os.environ.get("OPSIGHT_KEEP_SERVER_DIRS"):
            shutil.rmtree(server.workdir, ignore_errors=True)


def _workdir(name: str) -> Path:
    return Path(tempfile.mkdtemp(prefix=f"opsight-{name}-"))


# --- Jaeger v2 -------------------------------------------------------------------------------

class Jaeger(Server):
    """Jaeger v2 (all-in-one, memory storage): OTLP in over HTTP and gRPC, the query APIs."""

    otlp_grpc_port: int
    otlp_http_port: int
    query_port: int
    query_grpc_port: int
    health_port: int
    metrics_port: int  # the collector's own metrics (Prometheus text)
    # OTLP metrics received (the metrics pipeline: the Collector's otlp receiver into its
    # prometheus exporter), served as Prometheus text: received_metrics_text().
    received_metrics_port: int
    binary: Path
    # Where received spans go: "jaeger_storage_exporter" (stored, queryable) or "nop"
    # (received, decoded and counted, then discarded: the receiver's cost alone).
    traces_exporter: str = "jaeger_storage_exporter"
    # The OTLP gRPC receiver's TLS settings, as YAML lines under its `grpc:` (empty: plaintext).
    otlp_grpc_tls: str = ""

    def launch(self, start_timeout: float = 60.0) -> None:
        """Starts the server on its ports and waits until it takes spans and queries."""
        config = self.workdir / "config.yaml"
        config.write_text(JAEGER_CONFIG.format(**vars(self)))
        self.start([self.binary, "--config", config])
        health = f"http://127.0.0.1:{self.health_port}/status"
        self.wait_ready(lambda: (self.http_ready(health)()
                                 and port_open(self.otlp_http_port)
                                 and port_open(self.query_port)), start_timeout)

    def restart(self, start_timeout: float = 60.0) -> None:
        """Stops it (its memory store is lost) and starts it again on the same ports."""
        self.stop()
        self.launch(start_timeout)

    def accepted_spans(self) -> int:
        """Spans its OTLP receivers have taken since it started (the collector's
        ``otelcol_receiver_accepted_spans_total``, over HTTP and gRPC)."""
        status, body = http_request(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5)
        if status != 200:
            raise self.error(f"metrics answered {status}")
        total = 0.0
        for line in body.decode().splitlines():
            if line.startswith("otelcol_receiver_accepted_spans_total{"):
                total += float(line.rsplit(" ", 1)[1])
        return int(total)

    @property
    def otlp_http_endpoint(self) -> str:
        """Base URL of the OTLP/HTTP receiver (the exporter appends /v1/traces)."""
        return f"http://127.0.0.1:{self.otlp_http_port}"

    @property
    def otlp_metrics_url(self) -> str:
        return f"{self.otlp_http_endpoint}/v1/metrics"

    def received_metrics_text(self) -> str:
        """The OTLP metrics the Collector received, as its prometheus exporter serves them."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.received_metrics_port}/metrics",
                                    timeout=10) as answer:
            return answer.read().decode()

    @property
    def otlp_traces_url(self) -> str:
        return f"{self.otlp_http_endpoint}/v1/traces"

    @property
    def otlp_logs_url(self) -> str:
        return f"{self.otlp_http_endpoint}/v1/logs"

    def accepted_log_records(self) -> int:
        """Log records its OTLP receivers have taken since it started (the collector's
        ``otelcol_receiver_accepted_log_records_total``)."""
        status, body = http_request(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5)
        if status != 200:
            raise self.error(f"metrics answered {status}")
        return int(sum(float(line.rsplit(" ", 1)[1]) for line in body.decode().splitlines()
                       if line.startswith("otelcol_receiver_accepted_log_records_total{")))

    def received_log_records(self) -> list[dict]:
        """The OTLP log records the Collector received, as its logs pipeline's ``debug``
        exporter (verbosity detailed) printed them in the server's log, in order: each a dict
        with ``resource`` and ``attributes`` (dicts of the printed values: ``Str(x)`` is
        ``"x"``, ``Int(7)`` is ``7``), ``scope``, ``time_unix_nano``,
        ``observed_time_unix_nano``, ``severity_text``, ``severity_number``, ``body``,
        ``trace_id``, ``span_id`` (hex, "" when absent) and ``flags``."""
        return parse_debug_log_records(self.log_path.read_text(errors="replace"))

    @property
    def otlp_grpc_endpoint(self) -> str:
        return f"127.0.0.1:{self.otlp_grpc_port}"

    @property
    def query_url(self) -> str:
        return f"http://127.0.0.1:{self.query_port}"

    def get_trace(self, trace_id_hex: str, timeout: float = 10.0, min_spans: int = 1) -> dict:
        """The trace as OTLP JSON (``{"resourceSpans": [...]}``, nanosecond times) from the
        api_v3 endpoint, polled until it has at least ``min_spans`` spans."""
        url = f"{self.query_url}/api/v3/traces/{trace_id_hex}"

        def attempt():
            status, body = http_request(url, timeout=5)
            if status != 200:
                return None
            result = json.loads(body)["result"]
            return result if len(otlp_spans(result)) >= min_spans else None

        return poll(f"jaeger trace {trace_id_hex}", attempt, timeout)

    def get_traces(self, traces: dict[str, int], timeout: float = 10.0) -> dict:
        """Several traces (trace id -> the spans expected in it; a run holds one per root
        span) as one OTLP JSON ``{"resourceSpans": [...]}``, each polled for its spans."""
        resource_spans: list[dict] = []
        for trace_id_hex, spans in traces.items():
            resource_spans += self.get_trace(trace_id_hex, timeout, spans)["resourceSpans"]
        return {"resourceSpans": resource_spans}

    def get_trace_v1(self, trace_id_hex: str, timeout: float = 10.0) -> dict:
        """The trace from the classic ``/api/traces/{id}`` endpoint (microsecond times, the
        Jaeger UI's model): ``{"traceID", "spans", "processes"}``."""
        url = f"{self.query_url}/api/traces/{trace_id_hex}"

        def attempt():
            status, body = http_request(url, timeout=5)
            data = json.loads(body).get("data") if status == 200 else None
            return data[0] if data else None

        return poll(f"jaeger trace {trace_id_hex} (api/traces)", attempt, timeout)

    def services(self) -> list[str]:
        return get_json(f"{self.query_url}/api/v3/services").get("services") or []


class TcpGate:
    """A TCP forwarder to a real server that a test can take down and bring back: while
    closed nothing listens on its port (connections are refused, as from a server that is
    down) and the connections it carried are cut; opened, it listens on the same port again
    and forwards each connection to ``upstream_port``. Thread-safety: open/close from one
    thread; the forwarding runs on threads of its own."""

    def __init__(self, upstream_port: int, port: int | None = None) -> None:
        self.upstream_port = upstream_port
        self.port = port if port is not None else free_ports(1)[0]
        self._listener: socket.socket | None = None
        self._connections: list[socket.socket] = []
        self._lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def open(self) -> None:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def close(self) -> None:
        listener, self._listener = self._listener, None
        if listener is not None:
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)
            listener.close()
        with self._lock:
            connections, self._connections = self._connections, []
        for connection in connections:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)
            connection.close()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # closed
            try:
                upstream = socket.create_connection(("127.0.0.1", self.upstream_port), timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            with self._lock:
                self._connections += [client, upstream]
            for source, target in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(source, target), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, target: socket.socket) -> None:
        try:
            while data := source.recv(1 << 16):
                target.sendall(data)
        except OSError:
            pass
        for end in (source, target):
            with contextlib.suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)


def _debug_value(text: str) -> Any:
    """A value as the Collector's debug exporter prints it: Str(x), Int(7), Double(0.5),
    Bool(true); anything else as printed."""
    match = re.fullmatch(r"(Str|Int|Double|Bool)\((.*)\)", text, re.S)
    if not match:
        return text
    kind, value = match.groups()
    if kind == "Int":
        return int(value)
    if kind == "Double":
        return float(value)
    if kind == "Bool":
        return value == "true"
    return value


def _debug_time(text: str) -> int:
    """'2026-11-29 02:54:16.320384397 +0000 UTC' -> Unix nanoseconds, exactly."""
    day, clock = text.split()[:2]
    seconds, _, fraction = clock.partition(".")
    whole = calendar.timegm(time.strptime(f"{day} {seconds}", "%Y-%m-%d %H:%M:%S"))
    return whole * 10**9 + int((fraction + "000000000")[:9])


def parse_debug_log_records(log: str) -> list[dict]:
    """The log records in a Collector log written by its ``debug`` exporter at verbosity
    detailed (see ``Jaeger.received_log_records``). A multi-line value (a body or attribute
    with newlines) continues until the next line the exporter itself starts."""
    records: list[dict] = []
    resource: dict = {}
    scope = ""
    record: dict | None = None
    section = None  # "resource" or "record" attributes, while their "->" lines run
    last_key: tuple[dict, str] | None = None  # where a continued value's lines go
    own = re.compile(r"^(ResourceLog #|Resource SchemaURL|Resource attributes:|ScopeLogs #|"
                     r"ScopeLogs SchemaURL|InstrumentationScope|LogRecord #|ObservedTimestamp:|"
                     r"Timestamp:|SeverityText:|SeverityNumber:|Body:|Attributes:|Trace ID:|"
                     r"Span ID:|Flags:|EventName:|     -> |\d{4}-\d\d-\d\dT|\t\{)")
    raw: dict[tuple[int, str], str] = {}
    for line in log.splitlines():
        # The first line of a batch follows the log line's own prefix (time, level).
        prefixed = re.match(r"^\d{4}-\d\d-\d\dT\S+\t\w+\t(ResourceLog #.*)", line)
        if prefixed:
            line = prefixed.group(1)
        if not own.match(line):
            if last_key is not None:  # a value that went on to the next line
                target, key = last_key
                raw[(id(target), key)] = raw.get((id(target), key), "") + "\n" + line
                target[key] = _debug_value(raw[(id(target), key)])
            continue
        last_key = None
        if line.startswith("ResourceLog #"):
            resource, section = {}, None
        elif line.startswith("Resource attributes:"):
            section = "resource"
        elif line.startswith("InstrumentationScope"):
            scope = line.split(" ", 2)[1] if len(line.split(" ")) > 1 else ""
            section = None
        elif line.startswith("LogRecord #"):
            record = {"resource": resource, "scope": scope, "attributes": {}, "trace_id": "",
                      "span_id": "", "flags": 0, "body": None}
            records.append(record)
            section = None
        elif record is None:
            if section == "resource" and line.startswith("     -> "):
                key, _, value = line[len("     -> "):].partition(": ")
                raw[(id(resource), key)] = value
                resource[key] = _debug_value(value)
                last_key = (resource, key)
        elif line.startswith("ObservedTimestamp:"):
            record["observed_time_unix_nano"] = _debug_time(line.split(": ", 1)[1])
        elif line.startswith("Timestamp:"):
            record["time_unix_nano"] = _debug_time(line.split(": ", 1)[1])
        elif line.startswith("SeverityText:"):
            record["severity_text"] = line.split(": ", 1)[1] if ": " in line else ""
        elif line.startswith("SeverityNumber:"):
            record["severity_number"] = int(re.search(r"\((\d+)\)", line).group(1))
        elif line.startswith("Body:"):
            value = line.split(": ", 1)[1]
            raw[(id(record), "body")] = value
            record["body"] = _debug_value(value)
            last_key = (record, "body")
        elif line.startswith("Attributes:"):
            section = "record"
        elif line.startswith("     -> "):
            key, _, value = line[len("     -> "):].partition(": ")
            target = record["attributes"] if section == "record" else resource
            raw[(id(target), key)] = value
            target[key] = _debug_value(value)
            last_key = (target, key)
        elif line.startswith("Trace ID:"):
            record["trace_id"] = line.split(":", 1)[1].strip()
        elif line.startswith("Span ID:"):
            record["span_id"] = line.split(":", 1)[1].strip()
        elif line.startswith("Flags:"):
            record["flags"] = int(line.split(":", 1)[1].strip())
    return records


def traces_of(trace) -> dict[str, int]:
    """The traces of a run read with ``opsight._native.read_trace`` (a root span is a trace
    of its own): each trace id with the number of spans in it, as the exporters send them."""
    return dict(collections.Counter(trace.slice_columns()["trace_id"]))


def otlp_spans(traces: dict) -> list[dict]:
    """Every span of an OTLP JSON ``{"resourceSpans": ...}``, each with ``"resource"`` (its
    resource's attributes as a dict) and ``"scope"`` (its scope's name) added."""
    spans = []
    for resource_spans in traces.get("resourceSpans") or []:
        resource = attributes_dict((resource_spans.get("resource") or {}).get("attributes"))
        for scope_spans in resource_spans.get("scopeSpans") or []:
            scope = (scope_spans.get("scope") or {}).get("name", "")
            for span in scope_spans.get("spans") or []:
                spans.append({**span, "resource": resource, "scope": scope})
    return spans


def attributes_dict(attributes: list[dict] | None) -> dict[str, Any]:
    """OTLP JSON attributes (``[{"key", "value": {"stringValue": ...}}]``) as a plain dict;
    int64 values (strings in OTLP JSON) become ints."""
    def plain(value: dict) -> Any:
        (kind, inner), = value.items() if value else (("", None),)
        if kind == "intValue":
            return int(inner)
        if kind == "arrayValue":
            return [plain(item) for item in inner.get("values", [])]
        if kind == "kvlistValue":
            return attributes_dict(inner.get("values"))
        return inner
    return {item["key"]: plain(item.get("value") or {}) for item in attributes or []}


JAEGER_CONFIG = """\
# Jaeger v2 all-in-one for opsight's tests: OTLP in, memory storage, the query service.
service:
  extensions: [jaeger_storage, jaeger_query, healthcheckv2]
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [{traces_exporter}]
    metrics:
      receivers: [otlp]
      exporters: [prometheus]
    logs:
      receivers: [otlp]
      exporters: [debug]
  telemetry:
    metrics:
      level: basic
      readers:
        - pull:
            exporter:
              prometheus:
                host: 127.0.0.1
                port: {metrics_port}
    logs:
      level: info
extensions:
  healthcheckv2:
    use_v2: true
    http:
      endpoint: 127.0.0.1:{health_port}
  jaeger_query:
    storage:
      traces: memstore
    enable_tracing: false
    http:
      endpoint: 127.0.0.1:{query_port}
    grpc:
      endpoint: 127.0.0.1:{query_grpc_port}
  jaeger_storage:
    backends:
      memstore:
        memory:
          max_traces: 100000
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:{otlp_grpc_port}
{otlp_grpc_tls}
      http:
        endpoint: 127.0.0.1:{otlp_http_port}
exporters:
  jaeger_storage_exporter:
    trace_storage: memstore
  nop:
  prometheus:
    endpoint: 127.0.0.1:{received_metrics_port}
  debug:
    verbosity: detailed
"""


@contextlib.contextmanager
def jaeger(start_timeout: float = 60.0, store: bool = True,
           grpc_tls: tuple[str, str, str | None] | None = None) -> Iterator[Jaeger]:
    """Jaeger v2 (``cmd/jaeger``) with the configuration above on seven free ports; with
    ``store=False`` it discards what it receives (the ``nop`` exporter). ``grpc_tls``
    (certificate, key, client CA or None: PEM files) serves its OTLP gRPC receiver over TLS,
    requiring a client certificate that CA signed when one is given (mutual TLS)."""
    binary = installed_file("jaeger", CACHE / "jaeger" / "jaeger")
    server = Jaeger("jaeger", _workdir("jaeger"))
    server.binary = binary
    server.traces_exporter = "jaeger_storage_exporter" if store else "nop"
    server.otlp_grpc_tls = ""  # an instance attribute: the configuration reads vars(self)
    if grpc_tls is not None:
        certificate, key, client_ca = grpc_tls
        lines = ["        tls:", f"          cert_file: {certificate}", f"          key_file: {key}"]
        if client_ca:
            lines.append(f"          client_ca_file: {client_ca}")
        server.otlp_grpc_tls = "\n".join(lines)
    with _running(server):
        (server.otlp_grpc_port, server.otlp_http_port, server.query_port,
         server.query_grpc_port, server.health_port, server.metrics_port,
         server.received_metrics_port) = free_ports(7)
        server.launch(start_timeout)
        yield server


# --- the OpenTelemetry Collector ---------------------------------------------------------------

class OtelCollector(Server):
    """The OpenTelemetry Collector (scripts/servers/otelcol: the Collector's own OTLP
    receiver and contrib's file exporter): OTLP in over gRPC and HTTP (each optionally over
    TLS, mutual when a client CA is given), everything received written as OTLP JSON lines
    to ``received_path`` (one line per request batch), read back by :meth:`received`."""

    otlp_grpc_port: int
    otlp_http_port: int
    binary: Path
    received_path: Path
    grpc_tls: str = ""
    http_tls: str = ""

    def launch(self, start_timeout: float) -> None:
        config = self.workdir / "config.yaml"
        config.write_text(OTELCOL_CONFIG.format(**vars(self)))
        self.start([self.binary, "--config", config])
        self.wait_ready(lambda: (port_open(self.otlp_grpc_port)
                                 and port_open(self.otlp_http_port)), start_timeout)

    @property
    def grpc_endpoint(self) -> str:
        return f"{'https' if self.grpc_tls else 'http'}://127.0.0.1:{self.otlp_grpc_port}"

    @property
    def http_endpoint(self) -> str:
        return f"{'https' if self.http_tls else 'http'}://127.0.0.1:{self.otlp_http_port}"

    def received(self) -> list[dict]:
        """Every request batch the file exporter wrote so far (OTLP JSON objects)."""
        try:
            text = self.received_path.read_text()
        except FileNotFoundError:
            return []
        return [json.loads(line) for line in text.splitlines() if line.strip()]

    def spans(self) -> list[dict]:
        return [span for batch in self.received() for resource in batch.get("resourceSpans", [])
                for scope in resource.get("scopeSpans", []) for span in scope.get("spans", [])]

    def log_records(self) -> list[dict]:
        return [record for batch in self.received() for resource in batch.get("resourceLogs", [])
                for scope in resource.get("scopeLogs", [])
                for record in scope.get("logRecords", [])]

    def metrics(self) -> list[dict]:
        return [metric for batch in self.received()
                for resource in batch.get("resourceMetrics", [])
                for scope in resource.get("scopeMetrics", [])
                for metric in scope.get("metrics", [])]

    def wait_for(self, what: str, count: Callable[[], int], at_least: int,
                 timeout: float = 30.0) -> int:
        """Polls until ``count()`` reaches ``at_least`` (the file exporter flushes every
        100 ms); returns it."""
        def reached() -> int | None:
            seen = count()
            return seen if seen >= at_least else None

        return poll(f"otelcol {what}", reached, timeout)


OTELCOL_CONFIG = """\
# The OpenTelemetry Collector for opsight's tests: OTLP in, every signal to a JSON-lines file.
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:{otlp_grpc_port}
{grpc_tls}
      http:
        endpoint: 127.0.0.1:{otlp_http_port}
{http_tls}
exporters:
  file:
    path: {received_path}
    format: json
    flush_interval: 100ms
service:
  telemetry:
    metrics:
      level: none
  pipelines:
    traces: {{receivers: [otlp], exporters: [file]}}
    metrics: {{receivers: [otlp], exporters: [file]}}
    logs: {{receivers: [otlp], exporters: [file]}}
"""


def _tls_lines(tls: tuple[str, str, str | None] | None) -> str:
    """A receiver protocol's `tls:` block (certificate, key, client CA or None), or ''."""
    if tls is None:
        return ""
    certificate, key, client_ca = tls
    lines = ["        tls:", f"          cert_file: {certificate}", f"          key_file: {key}"]
    if client_ca:
        lines.append(f"          client_ca_file: {client_ca}")
    return "\n".join(lines)


@contextlib.contextmanager
def otelcol(start_timeout: float = 30.0, grpc_tls: tuple[str, str, str | None] | None = None,
            http_tls: tuple[str, str, str | None] | None = None) -> Iterator[OtelCollector]:
    """The OpenTelemetry Collector with the configuration above on two free ports;
    ``grpc_tls``/``http_tls`` (certificate, key, client CA or None: PEM files) serve that
    receiver over TLS, requiring a client certificate the CA signed when one is given."""
    binary = installed_file("otelcol", CACHE / "otelcol" / "otelcol")
    server = OtelCollector("otelcol", _workdir("otelcol"))
    server.binary = binary
    server.received_path = server.workdir / "received.jsonl"
    server.grpc_tls = _tls_lines(grpc_tls)  # instance attributes: the configuration reads vars
    server.http_tls = _tls_lines(http_tls)
    with _running(server):
        server.otlp_grpc_port, server.otlp_http_port = free_ports(2)
        server.launch(start_timeout)
        yield server


# --- Zipkin ----------------------------------------------------------------------------------

class Zipkin(Server):
    port: int

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def spans_url(self) -> str:
        """Where spans are POSTed (Zipkin v2 JSON list, or its proto3 ListOfSpans)."""
        return f"{self.url}/api/v2/spans"

    def get_trace(self, trace_id_hex: str, timeout: float = 10.0, min_spans: int = 1
                  ) -> list[dict]:
        """The trace's spans (Zipkin v2 JSON), polled until there are ``min_spans``."""
        url = f"{self.url}/api/v2/trace/{trace_id_hex}"

        def attempt():
            status, body = http_request(url, timeout=5)
            spans = json.loads(body) if status == 200 else []
            return spans if len(spans) >= min_spans else None

        return poll(f"zipkin trace {trace_id_hex}", attempt, timeout)

    def get_traces(self, traces: dict[str, int], timeout: float = 10.0) -> list[dict]:
        """Several traces' spans (trace id -> the spans expected in it), each polled."""
        spans: list[dict] = []
        for trace_id_hex, count in traces.items():
            spans += self.get_trace(trace_id_hex, timeout, count)
        return spans


@contextlib.contextmanager
def zipkin(start_timeout: float = 120.0) -> Iterator[Zipkin]:
    """The zipkin-server exec jar on Java, in-memory storage, on one free port."""
    jar = installed_file("zipkin", CACHE / "zipkin" / "zipkin.jar")
    java = shutil.which("java")
    if java is None:
        missing("zipkin", "java is not on PATH")
    server = Zipkin("zipkin", _workdir("zipkin"))
    with _running(server):
        server.port, = free_ports(1)
        server.start([java, "-Xms64m", "-Xmx512m", "-XX:TieredStopAtLevel=1", "-jar", jar,
                      "--armeria.ports[0].ip=127.0.0.1", f"--armeria.ports[0].port={server.port}",
                      "--armeria.ports[0].protocols=http", "--logging.level.root=INFO"],
                     env={"STORAGE_TYPE": "mem", "SELF_TRACING_ENABLED": "false",
                          "COLLECTOR_SCRIBE_ENABLED": "false"})
        server.wait_ready(server.http_ready(f"{server.url}/health"), start_timeout)
        yield server


# --- Prometheus --------------------------------------------------------------------------------

class Prometheus(Server):
    port: int

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def remote_write_url(self) -> str:
        """Prometheus remote-write receiver (on: --web.enable-remote-write-receiver)."""
        return f"{self.url}/api/v1/write"

    def query(self, promql: str) -> list[dict]:
        """The instant query's ``data.result`` (a list of {"metric": {...}, "value": [t, v]})."""
        answer = get_json(f"{self.url}/api/v1/query?" + urllib.parse.urlencode({"query": promql}))
        if answer.get("status") != "success":
            raise ServerError(f"prometheus query {promql!r}: {answer}")
        return answer["data"]["result"]

    def wait_for(self, promql: str, timeout: float = 20.0) -> list[dict]:
        """``query(promql)`` polled until its result is not empty (a scrape has landed)."""
        return poll(f"prometheus result for {promql!r}", lambda: self.query(promql), timeout,
                    interval=0.25)

    def query_exemplars(self, promql: str, start: float, end: float) -> list[dict]:
        """``/api/v1/query_exemplars``'s ``data`` between the Unix times ``start`` and
        ``end``: a list of {"seriesLabels": {...}, "exemplars": [{"labels": {...}, "value",
        "timestamp"}]} (kept only with ``features=["exemplar-storage"]``)."""
        answer = get_json(f"{self.url}/api/v1/query_exemplars?" + urllib.parse.urlencode(
            {"query": promql, "start": f"{start:.3f}", "end": f"{end:.3f}"}))
        if answer.get("status") != "success":
            raise ServerError(f"prometheus exemplars of {promql!r}: {answer}")
        return answer["data"] or []

    def targets(self) -> list[dict]:
        """The active scrape targets (``/api/v1/targets``), with health and lastError."""
        return get_json(f"{self.url}/api/v1/targets")["data"]["activeTargets"]


def _scrape_config(job: str, target: str, interval: str) -> str:
    parsed = urllib.parse.urlsplit(target if "//" in target else f"http://{target}")
    return (f"  - job_name: {json.dumps(job)}\n"
            f"    scrape_interval: {interval}\n"
            f"    scrape_timeout: {interval}\n"
            f"    scheme: {parsed.scheme}\n"
            f"    metrics_path: {json.dumps(parsed.path or '/metrics')}\n"
            f"    honor_labels: true\n"
            f"    static_configs:\n"
            f"      - targets: [{json.dumps(parsed.netloc)}]\n")


@contextlib.contextmanager
def prometheus(scrape_targets: list[str] = (), scrape_interval: str = "1s", job: str = "opsight",
               start_timeout: float = 60.0, features: list[str] = ()) -> Iterator[Prometheus]:
    """Prometheus (Debian's) scraping each of ``scrape_targets`` ("host:port", path
    /metrics, or a full URL) every ``scrape_interval``; one job per target, named ``job``
    (``job_2``, ``job_3``... for the others). TSDB in the temporary folder. ``features``:
    its --enable-feature flags (e.g. "exemplar-storage")."""
    binary = installed_file("prometheus", PROMETHEUS_BINARY)
    server = Prometheus("prometheus", _workdir("prometheus"))
    with _running(server):
        server.port, = free_ports(1)
        jobs = [_scrape_config(job if index == 0 else f"{job}_{index + 1}", target,
                               scrape_interval)
                for index, target in enumerate(scrape_targets)]
        config = server.workdir / "prometheus.yml"
        config.write_text(f"global:\n  scrape_interval: {scrape_interval}\n"
                          f"  evaluation_interval: {scrape_interval}\n"
                          "scrape_configs:\n" + ("".join(jobs) if jobs else "  []\n"))
        server.start([binary, f"--config.file={config}",
                      f"--storage.tsdb.path={server.workdir / 'data'}",
                      f"--web.listen-address=127.0.0.1:{server.port}",
                      "--web.enable-remote-write-receiver", "--log.level=info",
                      *[f"--enable-feature={feature}" for feature in features]])
        server.wait_ready(server.http_ready(f"{server.url}/-/ready"), start_timeout)
        yield server


def promtool_check_metrics(text: str) -> subprocess.CompletedProcess:
    """``promtool check metrics`` over ``text`` (the exposition format linter);
    returncode 0 when it finds nothing, its complaints in stdout/stderr."""
    promtool = installed_file("prometheus", PROMTOOL_BINARY)
    return subprocess.run([str(promtool), "check", "metrics"], input=text, capture_output=True,
                          text=True, timeout=30)


# --- Pushgateway -----------------------------------------------------------------------------

class Pushgateway(Server):
    port: int

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def push_url(self, job: str, **labels: str) -> str:
        """``/metrics/job/JOB/LABEL/VALUE...`` (values base64-encoded, so any text is fine)."""
        path = f"/metrics/job@base64/{_b64(job)}"
        for name, value in labels.items():
            path += f"/{name}@base64/{_b64(value)}"
        return self.url + path

    def push(self, job: str, text: str, method: str = "PUT", **labels: str) -> int:
        """Pushes exposition-format ``text``; returns the HTTP status."""
        status, body = http_request(self.push_url(job, **labels), text.encode(), method,
                                    {"Content-Type": "text/plain; version=0.0.4"})
        if status >= 300:
            raise ServerError(f"pushgateway push: HTTP {status}: {body[:500]!r}")
        return status

    def metrics_text(self) -> str:
        """Everything the Pushgateway exposes (its own metrics and the pushed groups)."""
        status, body = http_request(f"{self.url}/metrics")
        if status != 200:
            raise ServerError(f"pushgateway /metrics: HTTP {status}")
        return body.decode()

    def groups(self) -> list[dict]:
        """The pushed groups (``/api/v1/metrics``), with their labels and metric families."""
        return get_json(f"{self.url}/api/v1/metrics")["data"]


def _b64(value: str) -> str:
    return base64.urlsafe_b64encode(value.encode()).decode() or "="


@contextlib.contextmanager
def pushgateway(start_timeout: float = 30.0) -> Iterator[Pushgateway]:
    """The Pushgateway (Debian's), no persistence, on one free port."""
    binary = installed_file("pushgateway", PUSHGATEWAY_BINARY)
    server = Pushgateway("pushgateway", _workdir("pushgateway"))
    with _running(server):
        server.port, = free_ports(1)
        # An empty persistence file: Debian's build defaults to
        # /var/lib/prometheus/pushgateway.data, shared by every run on the machine.
        server.start([binary, f"--web.listen-address=127.0.0.1:{server.port}",
                      "--persistence.file=", "--log.level=info"])
        server.wait_ready(server.http_ready(f"{server.url}/-/ready"), start_timeout)
        yield server


# --- VictoriaLogs ----------------------------------------------------------------------------

class VictoriaLogs(Server):
    port: int

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def loki_push_url(self) -> str:
        """Loki's push API (JSON, or snappy-compressed protobuf) as VictoriaLogs takes it."""
        return f"{self.url}/insert/loki/api/v1/push"

    @property
    def otlp_logs_url(self) -> str:
        """OTLP/HTTP logs (protobuf ExportLogsServiceRequest) as VictoriaLogs takes them."""
        return f"{self.url}/insert/opentelemetry/v1/logs"

    def flush(self) -> None:
        """Makes what was ingested searchable now (otherwise within about a second)."""
        http_request(f"{self.url}/internal/force_flush")

    def query(self, logsql: str, limit: int | None = None) -> list[dict]:
        """The log entries matching the LogsQL query (``/select/logsql/query``), each a dict
        with ``_msg``, ``_time`` (RFC 3339, nanoseconds), ``_stream`` and the other fields."""
        self.flush()
        form = {"query": logsql}
        if limit is not None:
            form["limit"] = str(limit)
        status, body = http_request(f"{self.url}/select/logsql/query",
                                    urllib.parse.urlencode(form).encode(), "POST",
                                    {"Content-Type": "application/x-www-form-urlencoded"})
        if status != 200:
            raise ServerError(f"victorialogs query {logsql!r}: HTTP {status}: {body[:500]!r}")
        return [json.loads(line) for line in body.decode().splitlines() if line.strip()]

    def wait_for(self, logsql: str, count: int = 1, timeout: float = 10.0) -> list[dict]:
        """``query(logsql)`` polled until it has at least ``count`` entries."""
        return poll(f"victorialogs entries for {logsql!r}",
                    lambda: (lambda rows: rows if len(rows) >= count else None)(
                        self.query(logsql)), timeout, interval=0.2)


@contextlib.contextmanager
def victorialogs(start_timeout: float = 30.0) -> Iterator[VictoriaLogs]:
    """VictoriaLogs with its data in the temporary folder, on one free port; a retention of
    100 years, so that entries with old fixed timestamps are kept."""
    binary = installed_file("victorialogs", CACHE / "victorialogs" / "victoria-logs")
    server = VictoriaLogs("victorialogs", _workdir("victorialogs"))
    with _running(server):
        server.port, = free_ports(1)
        server.start([binary, f"-storageDataPath={server.workdir / 'data'}",
                      f"-httpListenAddr=127.0.0.1:{server.port}", "-retentionPeriod=100y",
                      "-loggerLevel=INFO"])
        server.wait_ready(server.http_ready(f"{server.url}/health"), start_timeout)
        yield server


# --- Kafka -----------------------------------------------------------------------------------

class Kafka(Server):
    port: int
    controller_port: int

    @property
    def bootstrap(self) -> str:
        """bootstrap.servers for clients (PLAINTEXT)."""
        return f"127.0.0.1:{self.port}"

    def create_topic(self, topic: str, partitions: int = 1, timeout: float = 30.0) -> None:
        admin_module = kafka_client()
        admin = admin_module.admin.AdminClient({"bootstrap.servers": self.bootstrap})
        futures = admin.create_topics([admin_module.admin.NewTopic(topic, partitions, 1)],
                                      operation_timeout=timeout, request_timeout=timeout)
        futures[topic].result(timeout)

    def produce(self, topic: str, value: bytes | str, key: bytes | str | None = None,
                headers: dict[str, bytes | str] | None = None, timeout: float = 30.0) -> None:
        """Produces one message and waits until the broker acknowledged it."""
        client = kafka_client()
        producer = client.Producer({"bootstrap.servers": self.bootstrap, "acks": "all"})
        errors = []
        producer.produce(topic, value=value, key=key, headers=list((headers or {}).items()),
                         on_delivery=lambda error, _message: errors.append(error))
        if producer.flush(timeout) != 0 or errors != [None]:
            raise ServerError(f"kafka produce to {topic}: {errors or 'not delivered'}")

    def consume(self, topic: str, count: int = 1, timeout: float = 30.0,
                group: str | None = None) -> list[Any]:
        """The first ``count`` messages of ``topic`` from its beginning (confluent_kafka
        Message objects: .value(), .key(), .headers(), .timestamp(), .partition())."""
        client = kafka_client()
        consumer = client.Consumer({
            "bootstrap.servers": self.bootstrap, "group.id": group or f"opsight-{uuid.uuid4()}",
            "auto.offset.reset": "earliest", "enable.auto.commit": False})
        messages = []
        try:
            consumer.subscribe([topic])
            deadline = time.monotonic() + timeout
            while len(messages) < count and time.monotonic() < deadline:
                message = consumer.poll(0.5)
                if message is None:
                    continue
                if message.error():
                    if message.error().code() == client.KafkaError._PARTITION_EOF:
                        continue
                    if message.error().code() == client.KafkaError.UNKNOWN_TOPIC_OR_PART:
                        continue  # not created yet: auto-creation is on
                    raise ServerError(f"kafka consume {topic}: {message.error()}")
                messages.append(message)
        finally:
            consumer.close()
        if len(messages) < count:
            raise ServerError(f"kafka consume {topic}: {len(messages)} of {count} messages "
                              f"after {timeout:g} s")
        return messages


def kafka_client():
    """The confluent_kafka module (requirements/test.txt); missing: skip or fail as 'kafka'."""
    try:
        import confluent_kafka
        import confluent_kafka.admin  # noqa: F401
    except ImportError as error:
        message = (f"the Python Kafka client confluent-kafka is not installed ({error}): "
                   "pip install -r requirements/test.txt")
        if "kafka" in REQUIRED:
            pytest.fail(f"{message} (OPSIGHT_REQUIRE names kafka)", pytrace=False)
        pytest.skip(message)
    return confluent_kafka


KAFKA_PROPERTIES = """\
# One KRaft node, broker and controller, for opsight's tests.
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:{controller_port}
listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}
advertised.listeners=PLAINTEXT://127.0.0.1:{port}
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
log.dirs={log_dirs}
num.partitions=1
default.replication.factor=1
offsets.topic.replication.factor=1
offsets.topic.num.partitions=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
auto.create.topics.enable=true
"""

KAFKA_LOG4J2 = """\
rootLogger.level=INFO
rootLogger.appenderRef.out.ref=OUT
appender.out.type=Console
appender.out.name=OUT
appender.out.layout.type=PatternLayout
appender.out.layout.pattern=[%d] %p %m (%c)%n
logger.kafka.name=kafka
logger.kafka.level=INFO
logger.org.name=org.apache.kafka
logger.org.level=INFO
"""


@contextlib.contextmanager
def kafka(start_timeout: float = 120.0) -> Iterator[Kafka]:
    """A Kafka broker (jars from Maven Central) in KRaft mode, one node as broker and
    controller on two free ports, its storage formatted in the temporary folder."""
    libs = CACHE / "kafka" / "libs"
    if not any(libs.glob("kafka_2.13-*.jar")):
        missing("kafka", f"no kafka_2.13 jar in {libs}")
    java = shutil.which("java")
    if java is None:
        missing("kafka", "java is not on PATH")
    server = Kafka("kafka", _workdir("kafka"))
    with _running(server):
        server.port, server.controller_port = free_ports(2)
        properties = server.workdir / "server.properties"
        properties.write_text(KAFKA_PROPERTIES.format(
            port=server.port, controller_port=server.controller_port,
            log_dirs=server.workdir / "data"))
        log4j = server.workdir / "log4j2.properties"
        log4j.write_text(KAFKA_LOG4J2)
        classpath = f"{libs}/*"
        jvm = [java, "-Xms128m", "-Xmx768m", f"-Dlog4j2.configurationFile={log4j}",
               "-Djava.awt.headless=true", "-cp", classpath]
        # A cluster id is 16 random bytes in URL-safe base64 without padding (Kafka's Uuid).
        # URL-safe base64 may begin with "-": given as its own argument, the tool's parser
        # took such an id for an option (CI saw it), so it goes as --cluster-id=ID.
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        with open(server.log_path, "ab") as log:
            formatted = subprocess.run(
                [*jvm, "kafka.tools.StorageTool", "format", f"--cluster-id={cluster_id}", "-c",
                 str(properties)], cwd=server.workdir, stdout=log, stderr=subprocess.STDOUT,
                timeout=start_timeout)
        if formatted.returncode != 0:
            raise server.error(f"kafka.tools.StorageTool format exited {formatted.returncode}")
        server.start([*jvm, "kafka.Kafka", properties])
        server.wait_ready(lambda: ("Kafka Server started" in server.log_tail(200_000)
                                   and port_open(server.port)), start_timeout)
        yield server


# --- pytest fixtures -------------------------------------------------------------------------

@pytest.fixture(scope="module")
def jaeger_server():
    with jaeger() as server:
        yield server


@pytest.fixture(scope="module")
def zipkin_server():
    with zipkin() as server:
        yield server


@pytest.fixture(scope="module")
def pushgateway_server():
    with pushgateway() as server:
        yield server


@pytest.fixture(scope="module")
def victorialogs_server():
    with victorialogs() as server:
        yield server


@pytest.fixture(scope="module")
def kafka_server():
    with kafka() as server:
        yield server
