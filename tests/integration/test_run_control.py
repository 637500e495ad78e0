"""``opsight run --control-port``: tracing of a running program switched over HTTP. A real
program runs a tick every 50 ms; the test switches tracing off, opens a 0.5 s window, and
the written trace must hold the ticks before the switch and about ten from the window,
none from between; a non-loopback address needs a token; bad requests get 4xx."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
import urllib.error
import urllib.request

import opsight._native as native
from real_servers import require_modules

PROGRAM = textwrap.dedent("""
    import time, opsight
    print("started", flush=True)
    for i in range(80):
        with opsight.span("tick", index=i):
            time.sleep(0.05)
""")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def call(method: str, url: str, token: str | None = None) -> tuple[int, dict]:
    request = urllib.request.Request(url, method=method, data=b"" if method == "POST" else None)
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def start(tmp_path, address: str, env: dict | None = None) -> subprocess.Popen:
    script = tmp_path / "ticks.py"
    script.write_text(PROGRAM)
    run = subprocess.Popen(
        [sys.executable, "-m", "opsight", "run", "--no-store", "--report", "none", "-o",
         str(tmp_path / "ticks.opsight"), "--control-port", address, "--", sys.executable,
         str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    assert run.stdout.readline() == "started\n"
    return run


def test_off_then_a_window_records_just_the_window(tmp_path):
    port = free_port()
    base = f"http://127.0.0.1:{port}/control"
    run = start(tmp_path, f"127.0.0.1:{port}")
    try:
        status, body = call("GET", base)
        assert status == 200 and body["processes"][0]["state"] == "on"
        status, body = call("POST", base + "/off")
        assert status == 200 and body["processes"][0]["state"] == "off"
        off_at = time.monotonic()
        time.sleep(1.0)
        status, body = call("POST", base + "/window?seconds=0.5")
        assert status == 200 and body["processes"][0]["state"] == "on"
        window_at = time.monotonic()
        assert call("POST", base + "/window?seconds=-1")[0] == 400
        assert call("POST", base + "/window")[0] == 400
        assert call("POST", base + "/reboot")[0] == 404
        assert call("GET", base + "/../../etc/passwd")[0] == 404
        time.sleep(1.0)
        status, body = call("GET", base)
        assert body["processes"][0]["state"] == "off"  # the window closed by itself
    finally:
        _, stderr = run.communicate(timeout=60)
    assert run.returncode == 0, stderr
    assert f"tracing control on http://127.0.0.1:{port}/control" in stderr
    ticks = native.read_trace(str(tmp_path / "ticks.opsight")).slice_columns()
    indexes = sorted(i for i in ticks["attributes"]["index"] if i is not None)
    # Before the switch: from 0 on, with no hole; then a hole of about a second; then the
    # window's ticks (0.5 s at 50 ms each), and nothing after it.
    first_run = [i for n, i in enumerate(indexes) if i == n]
    window = indexes[len(first_run):]
    assert first_run, indexes
    assert 5 <= len(window) <= 14, indexes
    assert window == list(range(window[0], window[0] + len(window))), indexes
    assert window[0] - first_run[-1] >= 12, indexes  # the second off: ~20 ticks missing
    assert window_at - off_at >= 1.0


def test_a_public_address_needs_the_token(tmp_path):
    port = free_port()
    base = f"http://127.0.0.1:{port}/control"
    run = start(tmp_path, f"0.0.0.0:{port}", env={**__import__("os").environ,
                                                  "OPSIGHT_CONTROL_TOKEN": "s3cret"})
    try:
        status, body = call("POST", base + "/off")
        assert status == 401 and "token" in body["error"]
        assert call("GET", base, token="wrong")[0] == 401
        status, body = call("GET", base, token="s3cret")
        assert status == 200 and body["processes"][0]["state"] == "on"
    finally:
        _, stderr = run.communicate(timeout=60)
    assert run.returncode == 0, stderr
    assert "(token from OPSIGHT_CONTROL_TOKEN)" in stderr


SERVICE = textwrap.dedent("""
    import sys
    import uvicorn
    from fastapi import FastAPI

    app = FastAPI()

    @app.get("/infer/{item}")
    async def infer(item: int):
        return {"item": item}

    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
""")


def test_the_next_n_requests_of_a_real_fastapi_service(tmp_path):
    """`POST /control/requests?count=3` on a uvicorn service under opsight run: of the
    requests made after it, exactly three are in the trace (one server span each), then
    tracing is off; `opsight ctl PID requests N` does the same from a shell."""
    require_modules("fastapi", "uvicorn")
    control_port, service_port = free_port(), free_port()
    base = f"http://127.0.0.1:{control_port}/control"
    script = tmp_path / "service.py"
    script.write_text(SERVICE)
    run = subprocess.Popen(
        [sys.executable, "-m", "opsight", "run", "--no-store", "--report", "none", "-o",
         str(tmp_path / "service.opsight"), "--control-port", str(control_port), "--",
         sys.executable, str(script), str(service_port)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    def infer(item: int) -> int:
        with urllib.request.urlopen(f"http://127.0.0.1:{service_port}/infer/{item}",
                                    timeout=10) as answer:
            return answer.status

    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                assert infer(0) == 200  # traced: tracing is on at start
                break
            except (urllib.error.URLError, ConnectionError):
                assert run.poll() is None and time.monotonic() < deadline, run.communicate()
                time.sleep(0.1)
        assert call("POST", base + "/off")[0] == 200
        for item in range(1, 4):
            assert infer(item) == 200  # off
        status, body = call("POST", base + "/requests?count=3")
        assert status == 200 and body["requests"] == 3, body
        assert body["processes"][0]["state"].startswith("requests "), body
        for item in range(4, 10):
            assert infer(item) == 200  # three traced, three not
        status, body = call("GET", base)
        assert body["processes"][0]["state"] == "off", body
        pid = body["processes"][0]["pid"]
        ctl = subprocess.run([sys.executable, "-m", "opsight", "ctl", str(pid), "requests", "2"],
                             capture_output=True, text=True, timeout=30)
        assert ctl.returncode == 0, ctl.stderr
        assert "tracing on for the next 2 requests" in ctl.stdout
        for item in range(10, 14):
            assert infer(item) == 200  # two traced, two not
        assert call("POST", base + "/requests?count=0")[0] == 400
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGINT)
        _, stderr = run.communicate(timeout=60)
    assert run.returncode == 0, stderr
    trace = native.read_trace(str(tmp_path / "service.opsight")).slice_columns()
    items = sorted(int(value.rsplit("/", 1)[1])
                   for name, value in zip(trace["name"], trace["attributes"]["url.path"])
                   if name == "GET /infer/{item}")
    # The first request (before off), three of the budget's six, two of ctl's four.
    assert items == [0, 4, 5, 6, 10, 11]
