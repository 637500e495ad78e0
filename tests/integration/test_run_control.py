"""``opsight run --control-port``: tracing of a running program switched over HTTP. A real
program runs a tick every 50 ms; the test switches tracing off, opens a 0.5 s window, and
the written trace must hold the ticks before the switch and about ten from the window,
none from between; a non-loopback address needs a token; bad requests get 4xx."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import textwrap
import time
import urllib.error
import urllib.request

import opsight._native as native

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
