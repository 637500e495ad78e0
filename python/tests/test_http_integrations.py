"""HTTP servers and clients in traces (opsight.integrations): the ASGI and WSGI middleware,
the requests and httpx hooks, and the automatic integration that applies them while a
session records. Each trace is exported as OTLP JSON to a small receiver here and read back
(trace and span ids, parents, kinds, attributes, status), since that is what Jaeger gets;
tests/integration/test_distributed_trace.py proves the same across real processes and a
real Jaeger. Untraced, every application and client behaves exactly as without opsight."""

from __future__ import annotations

import asyncio
import concurrent.futures
import http.server
import importlib.util
import json
import threading
from typing import Any

import pytest

import opsight
import opsight.propagation as propagation
from opsight.integrations import _http, _integration, http_clients
from opsight.integrations import asgi as opsight_asgi
from opsight.integrations import wsgi as opsight_wsgi

from conftest import require, serve_wsgi

HEADER = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
CALLER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER_SPAN = "00f067aa0ba902b7"
SERVER, CLIENT, INTERNAL = 2, 3, 1


# ---- reading back what the exporter sends ---------------------------------------------------------

class _Receiver(http.server.BaseHTTPRequestHandler):
    bodies: list[bytes]

    def do_POST(self):  # noqa: N802 - the handler's name
        self.bodies.append(self.rfile.read(int(self.headers["Content-Length"])))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args):
        pass


def _attribute_value(value: dict) -> Any:
    (kind, inner), = value.items()
    return int(inner) if kind == "intValue" else inner


def exported(profile: Any) -> list[dict]:
    """The profile's spans as OTLP JSON sends them, each with ``attrs`` (a dict) added."""
    bodies: list[bytes] = []
    handler = type("Receiver", (_Receiver,), {"bodies": bodies})
    server = http.server.HTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        reports = profile.trace.export([f"otlp-json=http://127.0.0.1:{server.server_port}"])
    finally:
        server.shutdown()
        server.server_close()
    assert reports[0]["dropped"] == 0, reports
    spans = []
    for body in bodies:
        for resource in json.loads(body)["resourceSpans"]:
            for scope in resource["scopeSpans"]:
                for span in scope["spans"]:
                    span["attrs"] = {item["key"]: _attribute_value(item["value"])
                                     for item in span.get("attributes", [])}
                    spans.append(span)
    return sorted(spans, key=lambda span: int(span["startTimeUnixNano"]))


def named(spans: list[dict], name: str) -> list[dict]:
    return [span for span in spans if span["name"] == name]


def one(spans: list[dict], name: str) -> dict:
    found = named(spans, name)
    assert len(found) == 1, (name, [span["name"] for span in spans])
    return found[0]


def is_error(span: dict) -> bool:
    return span.get("status", {}).get("code") == 2


def inside(child: dict, parent: dict) -> bool:
    return (int(parent["startTimeUnixNano"]) <= int(child["startTimeUnixNano"])
            and int(child["endTimeUnixNano"]) <= int(parent["endTimeUnixNano"]))


@pytest.fixture
def http_mode(monkeypatch):
    """Sets OPSIGHT_HTTP for the sessions the test starts."""
    def set_mode(mode: str) -> None:
        monkeypatch.setenv("OPSIGHT_HTTP", mode)
    return set_mode


@pytest.fixture(autouse=True)
def _clients_left_as_found():
    """No test leaves a client instrumented for the next."""
    yield
    http_clients.uninstrument_http_clients()


# ---- a plain ASGI application, driven by hand ---------------------------------------------------

def asgi_scope(method: str = "GET", path: str = "/hello", headers: list | None = None,
               **extra: Any) -> dict:
    return {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
            "method": method, "scheme": "http", "path": path, "raw_path": path.encode(),
            "query_string": b"", "root_path": "",
            "headers": [(b"host", b"api.example:8080"), (b"user-agent", b"tests/1.0")]
            + (headers or []),
            "client": ("10.1.2.3", 52100), "server": ("127.0.0.1", 8080), **extra}


async def drive(app: Any, scope: dict) -> list[dict]:
    """Runs one request through ``app``; the messages it sent."""
    sent: list[dict] = []

    async def receive() -> dict:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict) -> None:
        sent.append(message)

    await app(scope, receive, send)
    return sent


def plain_app(status: int = 200, chunks: int = 1, error: BaseException | None = None):
    async def app(scope, receive, send):
        if error is not None:
            raise error
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"text/plain")]})
        for index in range(chunks):
            with opsight.span(f"chunk {index}"):
                await asyncio.sleep(0.002)
            await send({"type": "http.response.body", "body": b"x",
                        "more_body": index < chunks - 1})
    return app


def test_asgi_server_span_has_the_http_conventions_and_joins_the_callers_trace(http_mode):
    http_mode("off")  # only the middleware
    app = opsight_asgi.OpsightMiddleware(plain_app())
    with opsight.profile() as profile:
        sent = asyncio.run(drive(app, asgi_scope(headers=[(b"traceparent", HEADER.encode())])))
    assert sent[0]["status"] == 200
    span = one(exported(profile), "GET /hello")
    assert span["kind"] == SERVER
    assert span["traceId"] == CALLER_TRACE and span["parentSpanId"] == CALLER_SPAN
    assert span["flags"] & 0x200  # the parent is remote
    attrs = span["attrs"]
    assert attrs["http.request.method"] == "GET"
    assert attrs["url.path"] == "/hello" and attrs["url.scheme"] == "http"
    assert attrs["server.address"] == "api.example" and attrs["server.port"] == 8080
    assert attrs["client.address"] == "10.1.2.3"
    assert attrs["user_agent.original"] == "tests/1.0"
    assert attrs["network.protocol.version"] == "1.1"
    assert attrs["http.response.status_code"] == 200
    assert "http.route" not in attrs and "error.type" not in attrs and not is_error(span)
    assert attrs["opsight.category"] == "http"


def test_asgi_request_without_traceparent_is_the_root_of_a_trace_of_its_own(http_mode):
    """As the OpenTelemetry SDK gives every root span a new trace id: each request without
    a caller is a trace, none of them the session's."""
    http_mode("off")
    app = opsight_asgi.OpsightMiddleware(plain_app())
    with opsight.profile() as profile:
        session_trace = propagation.current()[0]
        asyncio.run(drive(app, asgi_scope()))
        no_host = asgi_scope(path="/no-host")
        no_host["headers"] = []
        asyncio.run(drive(app, no_host))
    spans = exported(profile)
    span = one(spans, "GET /hello")
    assert span["traceId"] != session_trace and "parentSpanId" not in span
    assert span["flags"] & 0x200 == 0  # no remote parent: a root
    assert one(spans, "GET /no-host")["traceId"] not in (session_trace, span["traceId"])
    attrs = one(spans, "GET /no-host")["attrs"]  # no Host header: the server's address
    assert attrs["server.address"] == "127.0.0.1" and attrs["server.port"] == 8080
    assert "user_agent.original" not in attrs


def test_asgi_5xx_is_an_error_4xx_is_not_and_an_exception_propagates_unchanged(http_mode):
    http_mode("off")
    error = ValueError("model not loaded")
    with opsight.profile() as profile:
        asyncio.run(drive(opsight_asgi.OpsightMiddleware(plain_app(503)), asgi_scope(path="/a")))
        asyncio.run(drive(opsight_asgi.OpsightMiddleware(plain_app(404)), asgi_scope(path="/b")))
        with pytest.raises(ValueError) as raised:
            asyncio.run(drive(opsight_asgi.OpsightMiddleware(plain_app(error=error)),
                              asgi_scope(path="/c")))
    assert raised.value is error
    spans = exported(profile)
    unavailable, missing, failed = one(spans, "GET /a"), one(spans, "GET /b"), one(spans, "GET /c")
    assert is_error(unavailable) and unavailable["status"]["message"] == "503"
    assert unavailable["attrs"]["error.type"] == "503" and "events" not in unavailable
    assert not is_error(missing) and missing["attrs"]["http.response.status_code"] == 404
    assert is_error(failed) and failed["status"]["message"] == "ValueError: model not loaded"
    assert failed["events"][0]["name"] == "exception"
    assert "http.response.status_code" not in failed["attrs"]  # nothing was sent


def test_asgi_span_covers_a_streamed_body_on_the_requests_own_task_track(http_mode):
    http_mode("off")
    app = opsight_asgi.OpsightMiddleware(plain_app(chunks=3))

    async def two_at_once():
        return await asyncio.gather(drive(app, asgi_scope(path="/one")),
                                    drive(app, asgi_scope(path="/two")))

    with opsight.profile() as profile:
        results = asyncio.run(two_at_once())
    assert [len(sent) for sent in results] == [4, 4]
    spans = exported(profile)
    for path in ("/one", "/two"):
        request = one(spans, f"GET {path}")
        assert "parentSpanId" not in request  # the two requests never nest into each other
        assert request["attrs"]["thread.name"].startswith("asyncio Task-")
        chunks = [span for span in spans if span.get("parentSpanId") == request["spanId"]]
        assert sorted(span["name"] for span in chunks) == ["chunk 0", "chunk 1", "chunk 2"]
        assert all(inside(chunk, request) for chunk in chunks)
        assert all(chunk["attrs"]["thread.name"] == request["attrs"]["thread.name"]
                   for chunk in chunks)
    assert one(spans, "GET /one")["attrs"]["thread.name"] != \
        one(spans, "GET /two")["attrs"]["thread.name"]


def test_asgi_lifespan_websocket_and_a_second_middleware_pass_straight_through(http_mode):
    http_mode("off")
    seen: list[tuple[str, Any]] = []

    async def app(scope, receive, send):
        seen.append((scope["type"], send))
        if scope["type"] == "http":
            await plain_app()(scope, receive, send)

    twice = opsight_asgi.OpsightMiddleware(opsight_asgi.OpsightMiddleware(app))

    async def lifespan_and_websocket():
        async def receive():
            return {}

        async def send(message):
            pass
        await twice({"type": "lifespan"}, receive, send)
        await twice({"type": "websocket", "path": "/ws", "headers": []}, receive, send)
        return send

    with opsight.profile() as profile:
        send = asyncio.run(lifespan_and_websocket())
        asyncio.run(drive(twice, asgi_scope()))
    assert seen[0] == ("lifespan", send) and seen[1] == ("websocket", send)
    assert [span["name"] for span in exported(profile)
            if span["kind"] == SERVER] == ["GET /hello"]  # one span, not two


def test_untraced_asgi_app_gets_its_own_callables_and_exceptions():
    seen = []
    error = KeyError("k")

    async def app(scope, receive, send):
        seen.append((receive, send))
        raise error

    async def receive():
        return {}

    async def send(message):
        pass

    with pytest.raises(KeyError) as raised:
        asyncio.run(opsight_asgi.OpsightMiddleware(app)(asgi_scope(), receive, send))
    assert raised.value is error and seen == [(receive, send)]  # nothing wrapped


def test_untraced_streamed_responses_are_the_same_messages_and_bodies():
    streamed = asyncio.run(drive(plain_app(chunks=3), asgi_scope()))
    through = asyncio.run(drive(opsight_asgi.OpsightMiddleware(plain_app(chunks=3)), asgi_scope()))
    assert through == streamed and len(through) == 4
    app = flask_app()
    plain = app.test_client().get("/stream")
    app.wsgi_app = opsight_wsgi.OpsightMiddleware(app.wsgi_app)
    wrapped = app.test_client().get("/stream")
    assert (wrapped.status, wrapped.headers, wrapped.data) == (plain.status, plain.headers,
                                                               plain.data)


def test_span_names_from_paths_are_bounded(http_mode, monkeypatch):
    http_mode("off")
    monkeypatch.setattr(_http, "MAX_DYNAMIC_NAMES", len(_http._dynamic_names) + 2)
    app = opsight_asgi.OpsightMiddleware(plain_app())
    with opsight.profile() as profile:
        for path in ("/bounded/1", "/bounded/2", "/bounded/3"):
            asyncio.run(drive(app, asgi_scope(path=path)))
    names = [span["name"] for span in exported(profile) if span["kind"] == SERVER]
    assert names == ["GET /bounded/1", "GET /bounded/2", "GET"]


# ---- FastAPI and Starlette ----------------------------------------------------------------------

def _testclient():
    require("fastapi")
    import fastapi.testclient
    return fastapi.testclient


def _starlette_applications():
    require("starlette")
    import starlette.applications
    return starlette.applications


def fastapi_app():
    fastapi = require("fastapi")
    httpx = require("httpx")

    def backend(request):
        return httpx.Response(200, json={"traceparent": request.headers.get("traceparent")})

    app = fastapi.FastAPI()

    @app.get("/items/{item_id}")
    async def item(item_id: int):
        return {"id": item_id}

    @app.get("/sync-call")
    def sync_call():  # FastAPI runs it in a worker thread
        with httpx.Client(transport=httpx.MockTransport(backend)) as client:
            return client.get("http://backend.internal:9000/score").json()

    @app.get("/async-call")
    async def async_call():
        async with httpx.AsyncClient(transport=httpx.MockTransport(backend)) as client:
            response = await client.get("http://backend.internal:9000/score")
        return response.json()

    @app.get("/pool-call")
    async def pool_call():
        def call():
            with httpx.Client(transport=httpx.MockTransport(backend)) as client:
                return client.get("http://backend.internal:9000/score").json()
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            return pool.submit(call).result()

    @app.get("/boom")
    async def boom():
        raise RuntimeError("kaput")

    sub = fastapi.FastAPI()

    @sub.get("/users/{user_id}")
    async def user(user_id: str):
        return {"user": user_id}

    app.mount("/api", sub)
    return app


def test_fastapi_gets_server_spans_by_itself_named_by_route_under_the_clients_span():
    testclient = _testclient()
    app = fastapi_app()
    with opsight.profile() as profile:
        with testclient.TestClient(app, raise_server_exceptions=False) as client:
            assert client.get("/items/7").json() == {"id": 7}
            assert client.get("/api/users/ada").json() == {"user": "ada"}
            assert client.get("/boom").status_code == 500
            assert client.get("/missing").status_code == 404
    spans = exported(profile)
    item = one(spans, "GET /items/{item_id}")
    assert item["attrs"]["http.route"] == "/items/{item_id}"
    assert item["attrs"]["url.path"] == "/items/7"
    assert item["attrs"]["server.address"] == "testserver"
    # The test client is an httpx.Client: its span is the caller, in the same trace.
    calls = named(spans, "GET testserver:80")
    assert len(calls) == 4 and all(call["kind"] == CLIENT for call in calls)
    assert item["parentSpanId"] == calls[0]["spanId"] and item["traceId"] == calls[0]["traceId"]
    assert inside(item, calls[0])
    assert one(spans, "GET /api/users/{user_id}")["attrs"]["http.route"] == "/api/users/{user_id}"
    boom = one(spans, "GET /boom")
    assert is_error(boom) and boom["status"]["message"] == "RuntimeError: kaput"
    assert boom["attrs"]["http.response.status_code"] == 500
    assert is_error(calls[2]) and calls[2]["attrs"]["error.type"] == "500"
    missing = one(spans, "GET /missing")  # no route: named by its path
    assert missing["attrs"]["http.response.status_code"] == 404 and not is_error(missing)


@pytest.mark.parametrize("path", ["/sync-call", "/async-call", "/pool-call"])
def test_a_call_made_while_serving_is_the_servers_child_on_any_thread_or_task(path):
    testclient = _testclient()
    app = fastapi_app()
    with opsight.profile() as profile:
        with testclient.TestClient(app) as client:
            sent = client.get(path, headers={"traceparent": HEADER}).json()["traceparent"]
    spans = exported(profile)
    server = one(spans, f"GET {path}")
    call = one(spans, "GET backend.internal:9000")
    assert server["traceId"] == CALLER_TRACE and server["parentSpanId"] == CALLER_SPAN
    assert call["kind"] == CLIENT and call["traceId"] == CALLER_TRACE
    assert call["parentSpanId"] == server["spanId"]
    assert sent == f"00-{CALLER_TRACE}-{call['spanId']}-01"
    assert call["attrs"]["url.full"] == "http://backend.internal:9000/score"
    assert call["attrs"]["server.address"] == "backend.internal"
    assert call["attrs"]["server.port"] == 9000
    assert call["attrs"]["http.request.method"] == "GET"
    assert call["attrs"]["http.response.status_code"] == 200
    assert inside(call, server)
    if path == "/async-call":  # on the request's task track, an ordinary child
        assert call["attrs"]["thread.name"] == server["attrs"]["thread.name"]
        assert not call["flags"] & 0x200
    else:  # another thread: joined to the request's span
        assert call["attrs"]["thread.name"] != server["attrs"]["thread.name"]


def test_middleware_added_beside_the_automatic_integration_records_one_span():
    testclient = _testclient()
    app = fastapi_app()
    app.add_middleware(opsight_asgi.OpsightMiddleware)
    with opsight.profile() as profile:
        with testclient.TestClient(app) as client:
            client.get("/items/1")
    assert len(named(exported(profile), "GET /items/{item_id}")) == 1


def test_middleware_alone_names_spans_by_route(http_mode):
    http_mode("off")
    testclient = _testclient()
    app = fastapi_app()
    app.add_middleware(opsight_asgi.OpsightMiddleware)
    with opsight.profile() as profile:
        with testclient.TestClient(app) as client:
            client.get("/items/1")
            client.get("/api/users/x")
    spans = exported(profile)
    assert [span["name"] for span in spans] == ["GET /items/{item_id}", "GET /api/users/{user_id}"]


def test_a_route_added_while_serving_names_the_next_request(http_mode):
    http_mode("servers")
    testclient = _testclient()
    app = fastapi_app()
    with opsight.profile() as profile:
        with testclient.TestClient(app) as client:
            assert client.get("/late/1").status_code == 404
            app.add_api_route("/late/{number}", lambda number: {"n": number}, methods=["GET"])
            assert client.get("/late/1").json() == {"n": "1"}
    names = [span["name"] for span in exported(profile) if span["kind"] == SERVER]
    assert names == ["GET /late/1", "GET /late/{number}"]  # matched routes are cached, by app


def test_opsight_http_off_leaves_frameworks_and_clients_alone(http_mode):
    http_mode("off")
    starlette = _starlette_applications()
    httpx = require("httpx")
    original_call, original_send = starlette.Starlette.__call__, httpx.Client.send
    with opsight.profile():
        assert starlette.Starlette.__call__ is original_call
        assert httpx.Client.send is original_send


def test_a_session_instruments_and_gives_everything_back_when_it_stops(http_mode):
    http_mode("on")
    starlette = _starlette_applications()
    flask = require("flask")
    requests = require("requests")
    httpx = require("httpx")
    originals = (starlette.Starlette.__call__, flask.Flask.__call__, requests.Session.send,
                 httpx.Client.send, httpx.AsyncClient.send)
    with opsight.profile():
        patched = (starlette.Starlette.__call__, flask.Flask.__call__, requests.Session.send,
                   httpx.Client.send, httpx.AsyncClient.send)
        assert all(now is not before for now, before in zip(patched, originals))
        assert asyncio.iscoroutinefunction(starlette.Starlette.__call__)  # uvicorn checks
        assert asyncio.iscoroutinefunction(httpx.AsyncClient.send)
    assert (starlette.Starlette.__call__, flask.Flask.__call__, requests.Session.send,
            httpx.Client.send, httpx.AsyncClient.send) == originals


# ---- Flask (WSGI) -------------------------------------------------------------------------------

def flask_app():
    flask = require("flask")
    app = flask.Flask("opsight_tests")

    @app.get("/items/<int:item_id>")
    def item(item_id):
        return {"id": item_id}

    @app.get("/stream")
    def stream():
        def chunks():
            for index in range(3):
                with opsight.span(f"chunk {index}"):
                    yield f"{index}\n"
        return flask.Response(chunks())

    @app.get("/fail")
    def fail():
        raise ValueError("flask kaput")

    return app


def test_flask_gets_server_spans_by_itself_with_route_status_and_caller(http_mode):
    http_mode("servers")
    app = flask_app()
    with opsight.profile() as profile:
        client = app.test_client()
        response = client.get("/items/3", headers={"traceparent": HEADER,
                                                   "User-Agent": "flask-tests"})
        assert response.json == {"id": 3}
        assert client.get("/stream").data == b"0\n1\n2\n"
        failed = client.get("/fail")
        assert failed.status_code == 500 and failed.data  # a server reads the body
    spans = exported(profile)
    item = one(spans, "GET /items/<int:item_id>")
    assert item["kind"] == SERVER
    assert item["traceId"] == CALLER_TRACE and item["parentSpanId"] == CALLER_SPAN
    attrs = item["attrs"]
    assert attrs["http.route"] == "/items/<int:item_id>" and attrs["url.path"] == "/items/3"
    assert attrs["http.request.method"] == "GET" and attrs["url.scheme"] == "http"
    assert attrs["server.address"] == "localhost" and attrs["server.port"] == 80
    assert attrs["user_agent.original"] == "flask-tests"
    assert attrs["client.address"] == "127.0.0.1"
    assert attrs["network.protocol.version"] == "1.1"
    assert attrs["http.response.status_code"] == 200
    stream = one(spans, "GET /stream")
    chunks = [span for span in spans if span.get("parentSpanId") == stream["spanId"]]
    assert [span["name"] for span in chunks] == ["chunk 0", "chunk 1", "chunk 2"]
    assert all(inside(chunk, stream) for chunk in chunks)
    fail = one(spans, "GET /fail")  # Flask answered 500 itself; its exception is recorded
    assert is_error(fail) and fail["status"]["message"] == "ValueError: flask kaput"
    assert fail["attrs"]["http.response.status_code"] == 500
    assert all("parentSpanId" not in span or span["parentSpanId"] == CALLER_SPAN
               for span in spans if span["kind"] == SERVER)  # none nested in another


def test_flask_wsgi_middleware_by_hand_and_beside_the_integration(http_mode):
    for mode in ("off", "on"):
        http_mode(mode)
        app = flask_app()
        app.wsgi_app = opsight_wsgi.OpsightMiddleware(app.wsgi_app)
        with opsight.profile() as profile:
            assert app.test_client().get("/items/5").json == {"id": 5}
        spans = [span for span in exported(profile) if span["kind"] == SERVER]
        assert [span["name"] for span in spans] == ["GET /items/<int:item_id>"], mode


def plain_wsgi_app(body: Any, status: str = "200 OK", error: BaseException | None = None):
    def app(environ, start_response):
        if error is not None:
            raise error
        start_response(status, [("Content-Type", "text/plain")])
        return body
    return app


def wsgi_environ(path: str = "/w", **extra: Any) -> dict:
    return {"REQUEST_METHOD": "POST", "SCRIPT_NAME": "", "PATH_INFO": path,
            "SERVER_NAME": "svc", "SERVER_PORT": "8000", "SERVER_PROTOCOL": "HTTP/1.0",
            "REMOTE_ADDR": "10.0.0.9", "wsgi.url_scheme": "http", **extra}


def test_plain_wsgi_app_attributes_errors_and_body_shapes(http_mode):
    http_mode("off")

    class FileWrapper:
        def __init__(self, file, block_size=8192):
            self.file = file

        def __iter__(self):
            return iter([b"file"])

    error = OSError("disk gone")
    with opsight.profile() as profile:
        sized = opsight_wsgi.OpsightMiddleware(plain_wsgi_app([b"a", b"b"]))(
            wsgi_environ("/sized", HTTP_TRACEPARENT=HEADER), lambda *args: None)
        assert len(sized) == 2 and b"".join(sized) == b"ab"  # servers use len for one chunk
        sized.close()
        unsized = opsight_wsgi.OpsightMiddleware(plain_wsgi_app(iter([b"c"])))(
            wsgi_environ("/unsized"), lambda *args: None)
        assert not hasattr(unsized, "__len__")
        assert b"".join(unsized) == b"c"
        wrapped = FileWrapper(None)
        returned = opsight_wsgi.OpsightMiddleware(plain_wsgi_app(wrapped))(
            wsgi_environ("/file", **{"wsgi.file_wrapper": FileWrapper}), lambda *args: None)
        assert returned is wrapped  # the server's file path is kept
        assert serve_wsgi(opsight_wsgi.OpsightMiddleware(
            plain_wsgi_app([b""], "502 Bad Gateway")), wsgi_environ("/bad"))[0] == \
            ["502 Bad Gateway"]
        with pytest.raises(OSError) as raised:
            opsight_wsgi.OpsightMiddleware(plain_wsgi_app([], error=error))(
                wsgi_environ("/raise"), lambda *args: None)
        assert raised.value is error
    spans = exported(profile)
    sized_span = one(spans, "POST /sized")
    assert sized_span["traceId"] == CALLER_TRACE and sized_span["parentSpanId"] == CALLER_SPAN
    attrs = sized_span["attrs"]
    assert attrs["server.address"] == "svc" and attrs["server.port"] == 8000
    assert attrs["client.address"] == "10.0.0.9" and attrs["network.protocol.version"] == "1.0"
    assert attrs["http.response.status_code"] == 200 and "http.route" not in attrs
    assert one(spans, "POST /unsized")["attrs"]["http.response.status_code"] == 200
    assert one(spans, "POST /file")["attrs"]["http.response.status_code"] == 200
    bad = one(spans, "POST /bad")
    assert is_error(bad) and bad["attrs"]["error.type"] == "502"
    raised_span = one(spans, "POST /raise")
    assert is_error(raised_span) and raised_span["status"]["message"] == "OSError: disk gone"
    assert all("parentSpanId" not in span or span["parentSpanId"] == CALLER_SPAN
               for span in spans)  # every span ended before the next began


def test_wsgi_body_that_fails_while_iterating_is_recorded_and_raised(http_mode):
    http_mode("off")
    error = ConnectionResetError("upstream")

    def chunks():
        yield b"first"
        raise error

    with opsight.profile() as profile:
        body = opsight_wsgi.OpsightMiddleware(plain_wsgi_app(chunks()))(
            wsgi_environ("/broken"), lambda *args: None)
        with pytest.raises(ConnectionResetError) as raised:
            list(body)
        body.close()
    assert raised.value is error
    span = one(exported(profile), "POST /broken")
    assert span["status"]["message"] == "ConnectionResetError: upstream"


def test_wsgi_request_context_is_set_only_while_the_applications_code_runs(http_mode):
    http_mode("off")
    seen = []

    def app(environ, start_response):
        seen.append(propagation.current()[0])
        start_response("200 OK", [])

        def chunks():
            seen.append(propagation.current()[0])  # a streamed body: the request's trace
            yield b"x"
        return chunks()

    with opsight.profile():
        session_trace = propagation.current()[0]
        body = opsight_wsgi.OpsightMiddleware(app)(wsgi_environ(HTTP_TRACEPARENT=HEADER),
                                                   lambda *args: None)
        seen.append(propagation.current()[0])  # the server has control: not the request's
        assert list(body) == [b"x"]
        body.close()
    assert seen == [CALLER_TRACE, session_trace, CALLER_TRACE]


def test_untraced_wsgi_app_returns_its_own_body_and_start_response():
    body = [b"unchanged"]
    seen = []

    def app(environ, start_response):
        seen.append(start_response)
        return body

    start_response = lambda *args: None  # noqa: E731
    environ = wsgi_environ()
    assert opsight_wsgi.OpsightMiddleware(app)(environ, start_response) is body
    assert seen == [start_response] and opsight_wsgi.ENVIRON_KEY not in environ


# ---- requests and httpx -------------------------------------------------------------------------

class _EchoHandler(http.server.BaseHTTPRequestHandler):
    """Answers ``/status/N`` with N, and the traceparent it received as the body."""

    def do_GET(self):  # noqa: N802
        status = int(self.path.rsplit("/", 1)[1]) if self.path.startswith("/status/") else 200
        body = json.dumps({"traceparent": self.headers.get("traceparent")}).encode()
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def echo_server():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _EchoHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"127.0.0.1:{server.server_port}"
    server.shutdown()
    server.server_close()


def test_requests_calls_are_client_spans_that_send_traceparent(http_mode, echo_server):
    http_mode("off")
    requests = require("requests")
    http_clients.instrument_requests()
    with opsight.profile() as profile:
        with opsight.span("handler"):
            sent = requests.get(f"http://user:secret@{echo_server}/ok?q=1").json()["traceparent"]
            assert requests.get(f"http://{echo_server}/status/404").status_code == 404
            own = requests.get(f"http://{echo_server}/ok",
                               headers={"traceparent": HEADER}).json()["traceparent"]
        with pytest.raises(requests.ConnectionError):
            requests.get("http://127.0.0.1:1/", timeout=2)
    assert own == HEADER  # the program's own header is sent as it is
    spans = exported(profile)
    handler = one(spans, "handler")
    host, port = echo_server.split(":")
    ok, missing, kept = named(spans, f"GET {echo_server}")
    assert ok["kind"] == CLIENT and ok["parentSpanId"] == handler["spanId"]
    assert sent == f"00-{ok['traceId']}-{ok['spanId']}-01"
    assert ok["attrs"]["url.full"] == f"http://REDACTED:REDACTED@{echo_server}/ok?q=1"
    assert ok["attrs"]["server.address"] == host and ok["attrs"]["server.port"] == int(port)
    assert ok["attrs"]["http.request.method"] == "GET"
    assert ok["attrs"]["http.response.status_code"] == 200 and not is_error(ok)
    assert is_error(missing) and missing["attrs"]["error.type"] == "404"
    assert kept["attrs"]["http.response.status_code"] == 200
    refused = one(spans, "GET 127.0.0.1:1")
    assert is_error(refused)
    assert refused["status"]["message"].startswith("requests.exceptions.ConnectionError")


def test_httpx_sync_and_async_calls_are_client_spans(http_mode, echo_server):
    http_mode("off")
    httpx = require("httpx")
    http_clients.instrument_httpx()

    async def async_call():
        async with httpx.AsyncClient() as client:
            with opsight.span("async handler"):  # the task's track: the span is inside
                pass
            response = await client.get(f"http://{echo_server}/status/503")
        return response

    with opsight.profile() as profile:
        with opsight.span("handler"):
            sent = httpx.get(f"http://{echo_server}/ok").json()["traceparent"]
        response = asyncio.run(async_call())
    assert response.status_code == 503
    spans = exported(profile)
    sync_call, async_call_span = named(spans, f"GET {echo_server}")
    assert sync_call["parentSpanId"] == one(spans, "handler")["spanId"]
    assert sent == f"00-{sync_call['traceId']}-{sync_call['spanId']}-01"
    assert async_call_span["kind"] == CLIENT and is_error(async_call_span)
    assert async_call_span["attrs"]["thread.name"].startswith("asyncio Task-")
    assert response.json()["traceparent"].split("-")[2] == async_call_span["spanId"]


def test_clients_without_a_session_send_nothing_more(echo_server):
    requests = require("requests")
    httpx = require("httpx")
    http_clients.instrument_http_clients()
    assert requests.get(f"http://{echo_server}/ok").json() == {"traceparent": None}
    assert httpx.get(f"http://{echo_server}/ok").json() == {"traceparent": None}


def test_instrumenting_is_idempotent_reversible_and_outlives_a_session(http_mode):
    http_mode("on")
    requests = require("requests")
    httpx = require("httpx")
    original = requests.Session.send
    http_clients.instrument_requests()
    wrapper = requests.Session.send
    http_clients.instrument_requests()
    assert requests.Session.send is wrapper and wrapper.__wrapped__ is original
    assert http_clients.is_instrumented("requests")
    with opsight.profile():
        assert requests.Session.send is wrapper
    assert requests.Session.send is wrapper  # the program asked for it: it stays
    assert not http_clients.is_instrumented("httpx")  # the session's own is given back
    http_clients.uninstrument_requests()
    assert requests.Session.send is original
    # httpx2 (httpx's successor, which transformers' huggingface_hub brings) too when installed.
    installed = ["httpx"] + (["httpx2"] if importlib.util.find_spec("httpx2") else [])
    assert sorted(http_clients.instrument_http_clients()) == installed + ["requests"]
    http_clients.uninstrument_http_clients()
    assert requests.Session.send is original and not http_clients.is_instrumented("httpx")
    assert "httpx2" not in installed or not http_clients.is_instrumented("httpx2")
    assert httpx.Client.send.__name__ == "send"


def test_opsight_http_mode_is_read_and_an_unknown_word_warns(monkeypatch, capsys):
    for text, mode in (("", "on"), ("OFF", "off"), ("clients", "clients"),
                       ("servers", "servers"), ("1", "on")):
        monkeypatch.setenv("OPSIGHT_HTTP", text)
        assert _integration.http_mode() == mode
    monkeypatch.setenv("OPSIGHT_HTTP", "everything")
    assert _integration.http_mode() == "on"
    assert "ignoring OPSIGHT_HTTP='everything'" in capsys.readouterr().err


# ---- an unchanged program ----------------------------------------------------------------------

def test_importing_opsight_and_its_integrations_imports_no_web_library():
    from conftest import PYTHON, clean_environment
    import subprocess

    code = ("import sys, opsight, opsight.integrations, opsight.integrations.asgi, "
            "opsight.integrations.wsgi, opsight.integrations.http_clients\n"
            "heavy = {'fastapi', 'starlette', 'flask', 'werkzeug', 'requests', 'httpx', "
            "'uvicorn', 'asyncio'} & set(sys.modules)\n"
            "print(sorted(heavy))")
    result = subprocess.run([PYTHON, "-c", code], env=clean_environment(), capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_an_unchanged_program_under_opsight_output_sends_traceparent(tmp_path, echo_server):
    require("requests")
    from conftest import PYTHON, run, spans_of, write

    write(tmp_path, "client.py", f"""
        import requests                          # imported after the session started
        print(requests.get("http://{echo_server}/ok").json()["traceparent"])
    """)
    result = run([PYTHON, "client.py"], tmp_path, OPSIGHT_OUTPUT=str(tmp_path / "c.opsight"))
    assert result.returncode == 0, result.stderr
    sent = result.stdout.strip()
    frame = spans_of(tmp_path / "c.opsight")
    call = frame[frame["name"] == f"GET {echo_server}"].iloc[0]
    assert call["span.kind"] == "client" and call["http.response.status_code"] == 200
    assert sent == f"00-{call['trace_id']}-{call['span_id']}-01"
