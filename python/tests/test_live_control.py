"""Live tracing control from the middleware's own routes (``control_path=``): on, off, a
window, and the next N requests (opsight._session.live_control), for ASGI and WSGI
applications driven by hand; who may use the routes; and bad requests. The same routes
under ``opsight run --control-port`` across real processes are in
tests/integration/test_run_control.py."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest

import opsight
from opsight._session import live_control
from opsight.integrations import asgi as opsight_asgi
from opsight.integrations import wsgi as opsight_wsgi

from conftest import serve_wsgi

CONTROL = "/opsight/control"


def server_spans(profile: Any) -> int:
    return sum(row["count"] for row in profile.summary() if row["name"].startswith("GET /work"))


@pytest.fixture(autouse=True)
def _fresh_control():
    """Each test starts with no window and no budget, tracing on."""
    yield
    live_control.live_control.apply_switch(True)


# ---- ASGI --------------------------------------------------------------------------------------

async def slow_app(scope, receive, send):
    await asyncio.sleep(0.01)
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"ok"})


def asgi_request(app: Any, method: str, path: str, client: str = "127.0.0.1",
                 headers: list | None = None) -> tuple[int, bytes]:
    return asyncio.run(_asgi_request(app, method, path, client, headers))


async def _asgi_request(app, method, path, client, headers):
    path, _, query = path.partition("?")
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method,
             "scheme": "http", "path": path, "raw_path": path.encode(),
             "query_string": query.encode(), "root_path": "", "headers": headers or [],
             "client": (client, 50000), "server": ("127.0.0.1", 8000)}
    sent: list[dict] = []

    async def receive():
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message):
        sent.append(message)

    await app(scope, receive, send)
    body = b"".join(message.get("body", b"") for message in sent[1:])
    return sent[0]["status"], body


def control(app: Any, method: str, route: str, **options: Any) -> tuple[int, dict]:
    status, body = asgi_request(app, method, CONTROL + route, **options)
    return status, json.loads(body)


def test_asgi_next_n_requests_are_traced_then_tracing_switches_off():
    app = opsight_asgi.OpsightMiddleware(slow_app, control_path=CONTROL)
    with opsight.profile() as profile:
        assert control(app, "POST", "/off")[0] == 200
        assert not opsight.enabled()
        for _ in range(2):
            asgi_request(app, "GET", "/work")  # off: not recorded
        status, answer = control(app, "POST", "/requests?count=3")
        assert status == 200 and answer["requests"] == 3
        assert opsight.enabled()
        assert control(app, "GET", "")[1]["processes"][0]["requests_left"] == 3
        for _ in range(2):
            asgi_request(app, "GET", "/work")
        assert control(app, "GET", "")[1]["processes"][0]["requests_left"] == 1
        assert opsight.enabled()
        asgi_request(app, "GET", "/work")  # the last one: tracing switches off after it
        assert not opsight.enabled()
        state = control(app, "GET", "")[1]["processes"][0]
        assert state == {"pid": state["pid"], "state": "off", "requests_left": None}
        asgi_request(app, "GET", "/work")  # off again: not recorded
    assert server_spans(profile) == 3


def test_asgi_concurrent_requests_beyond_the_budget_are_served_untraced():
    app = opsight_asgi.OpsightMiddleware(slow_app, control_path=CONTROL)

    async def five_at_once():
        return await asyncio.gather(*[_asgi_request(app, "GET", "/work", "127.0.0.1", None)
                                      for _ in range(5)])

    with opsight.profile() as profile:
        assert control(app, "POST", "/requests?count=2")[0] == 200
        answers = asyncio.run(five_at_once())
        assert [status for status, _ in answers] == [200] * 5  # every request served
        assert not opsight.enabled()  # the last counted one switched tracing off
    assert server_spans(profile) == 2


def test_switching_on_or_off_ends_a_budget_and_a_window_ends_by_itself():
    app = opsight_asgi.OpsightMiddleware(slow_app, control_path=CONTROL)
    with opsight.profile() as profile:
        control(app, "POST", "/requests?count=100")
        control(app, "POST", "/on")  # on for good: the budget is gone
        for _ in range(3):
            asgi_request(app, "GET", "/work")
        assert control(app, "GET", "")[1]["processes"][0]["requests_left"] is None
        status, answer = control(app, "POST", "/window?seconds=0.2")
        assert status == 200 and answer["window_seconds"] == 0.2
        left = control(app, "GET", "")[1]["window_seconds_left"]
        assert 0 < left <= 0.2
        deadline = time.monotonic() + 5
        while opsight.enabled() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not opsight.enabled()
        assert control(app, "GET", "")[1]["window_seconds_left"] is None
        asgi_request(app, "GET", "/work")
    assert server_spans(profile) == 3


def test_control_routes_answer_loopback_clients_only_unless_a_token_is_set(monkeypatch):
    monkeypatch.delenv("OPSIGHT_CONTROL_TOKEN", raising=False)
    app = opsight_asgi.OpsightMiddleware(slow_app, control_path=CONTROL)
    status, answer = control(app, "POST", "/off", client="10.0.0.7")
    assert status == 403 and "needs a token" in answer["error"]
    assert opsight.enabled()
    guarded = opsight_asgi.OpsightMiddleware(slow_app, control_path=CONTROL, control_token="s3cret")
    assert control(guarded, "GET", "", client="127.0.0.1")[0] == 401  # a token binds everyone
    assert control(guarded, "GET", "", client="10.0.0.7",
                   headers=[(b"authorization", b"Bearer wrong")])[0] == 401
    ok, _ = control(guarded, "GET", "", client="10.0.0.7",
                    headers=[(b"authorization", b"Bearer s3cret")])
    assert ok == 200
    monkeypatch.setenv("OPSIGHT_CONTROL_TOKEN", "from-env")
    from_env = opsight_asgi.OpsightMiddleware(slow_app, control_path=CONTROL)
    assert control(from_env, "GET", "", client="10.0.0.7",
                   headers=[(b"authorization", b"Bearer from-env")])[0] == 200


@pytest.mark.parametrize("route, method, status, words", [
    ("/requests?count=0", "POST", 400, "count must be a whole number"),
    ("/requests?count=ten", "POST", 400, "count must be a whole number"),
    ("/requests", "POST", 400, "count must be a whole number"),
    ("/window?seconds=-1", "POST", 400, "seconds must be a number"),
    ("/window?seconds=nan", "POST", 400, "seconds must be a number"),
    ("/explode", "POST", 404, "no route POST /explode"),
    ("/on", "GET", 404, "no route GET /on"),
])
def test_bad_control_requests_get_4xx_with_a_message(route, method, status, words):
    app = opsight_asgi.OpsightMiddleware(slow_app, control_path=CONTROL)
    answer_status, answer = control(app, method, route)
    assert answer_status == status and words in answer["error"], answer
    assert opsight.enabled()


def test_the_control_path_must_be_a_path_and_other_paths_reach_the_application():
    with pytest.raises(ValueError, match="control_path must be a path"):
        opsight_asgi.OpsightMiddleware(slow_app, control_path="opsight")
    app = opsight_asgi.OpsightMiddleware(slow_app, control_path=CONTROL)
    assert asgi_request(app, "GET", "/opsight/controller") == (200, b"ok")  # not below it


# ---- WSGI --------------------------------------------------------------------------------------

def wsgi_app(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b"ok"]


def wsgi_request(app: Any, method: str, path: str, client: str = "127.0.0.1") -> tuple[str, bytes]:
    path, _, query = path.partition("?")
    environ = {"REQUEST_METHOD": method, "SCRIPT_NAME": "", "PATH_INFO": path,
               "QUERY_STRING": query, "SERVER_NAME": "svc", "SERVER_PORT": "8000",
               "SERVER_PROTOCOL": "HTTP/1.1", "REMOTE_ADDR": client, "wsgi.url_scheme": "http"}
    statuses, data = serve_wsgi(app, environ)
    return statuses[0], data


def test_wsgi_next_n_requests_and_the_same_routes():
    app = opsight_wsgi.OpsightMiddleware(wsgi_app, control_path=CONTROL)
    with opsight.profile() as profile:
        status, body = wsgi_request(app, "POST", CONTROL + "/requests?count=2")
        assert status == "200 OK" and json.loads(body)["requests"] == 2
        for _ in range(4):
            assert wsgi_request(app, "GET", "/work") == ("200 OK", b"ok")
        assert not opsight.enabled()
        status, body = wsgi_request(app, "GET", CONTROL)
        assert json.loads(body)["processes"][0]["state"] == "off"
        status, body = wsgi_request(app, "POST", CONTROL + "/on", client="192.168.1.4")
        assert status == "403 Forbidden"
        assert wsgi_request(app, "POST", CONTROL + "/nope")[0] == "404 Not Found"
    assert server_spans(profile) == 2
