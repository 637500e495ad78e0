"""``opsight ui`` as users start it: through the installed command (the Python console
script hands it to the C++ core), serving the web app installed with the package and the
REST API over a trace file and a run store, stopped by SIGINT or SIGTERM; bad arguments
refused with exit status 1 or 64 and a message naming what was wrong."""

from __future__ import annotations

import json
import re
import signal
import socket
import subprocess
import urllib.request

import pytest


def start_ui(cli_path, *args, env=None):
    process = subprocess.Popen([str(cli_path), "ui", "--port", "0", *map(str, args)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    line = process.stdout.readline()
    match = re.search(r"serving (http://\S+)", line)
    if not match:
        process.kill()
        pytest.fail(f"opsight ui printed no URL: {line!r} {process.stderr.read()!r}")
    return process, match.group(1)


def stop(process, how=signal.SIGINT):
    process.send_signal(how)
    try:
        return process.wait(timeout=20)
    finally:
        if process.poll() is None:
            process.kill()


def get(url):
    with urllib.request.urlopen(url, timeout=30) as response:
        return response.status, response.headers.get("Content-Type"), response.read().decode()


@pytest.fixture
def demo_trace(tmp_path, opsight_cli):
    result = opsight_cli("demo", "--quickstart", "-o", tmp_path / "quick", "--iterations", "3",
                         cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    return tmp_path / "quick.opsight"


def test_ui_serves_the_app_and_the_reports_of_a_file(cli_path, opsight_cli, demo_trace, tmp_path):
    env = {"OPSIGHT_HOME": str(tmp_path / "home"), "PATH": "/usr/bin:/bin"}
    process, url = start_ui(cli_path, demo_trace, env=env)
    try:
        assert url.endswith("/#/runs/file:0"), url
        base = url.split("#")[0]
        status, content_type, page = get(base)
        assert status == 200 and content_type.startswith("text/html")
        assert "assets/index-" in page, "the built web app is installed with the package"
        _, _, summary = get(base + "api/runs/file:0/report/summary")
        expected = opsight_cli("report", demo_trace, "--format", "json", check=True).stdout
        assert json.loads(summary) == json.loads(expected)
        runs = json.loads(get(base + "api/runs")[2])
        assert runs["runs"] == [] and "no run store" in runs["store_problem"]
    finally:
        assert stop(process, signal.SIGTERM) == 0


def test_ui_opens_a_stored_run(cli_path, opsight_cli, demo_trace, tmp_path):
    store = tmp_path / "runs.db"
    saved = opsight_cli("save", demo_trace, "--name", "quick", "--store", store)
    assert saved.returncode == 0, saved.stderr
    process, url = start_ui(cli_path, "quick", "--store", store)
    try:
        assert url.endswith("/#/runs/1"), url
        detail = json.loads(get(url.split("#")[0] + "api/runs/quick")[2])
        assert detail["label"] == "run 1 (quick)" and detail["counts"]["slices"] == 7
    finally:
        assert stop(process) == 0


def test_ui_refuses_what_it_cannot_serve(opsight_cli, tmp_path):
    missing_run = opsight_cli("ui", "nosuchrun", "--store", tmp_path / "runs.db", "--port", "0")
    assert missing_run.returncode == 1
    assert "runs.db" in missing_run.stderr
    missing_file = opsight_cli("ui", tmp_path / "missing.opsight", "--port", "0")
    assert missing_file.returncode == 1
    assert "missing.opsight: no such trace file" in missing_file.stderr
    assert opsight_cli("ui", "--port", "70000").returncode == 64
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        in_use = opsight_cli("ui", "--port", port)
        assert in_use.returncode == 1
        assert f"cannot listen on 127.0.0.1:{port}" in in_use.stderr
