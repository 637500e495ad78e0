"""The sampled rates on the live ``/metrics`` endpoint, as Prometheus and promtool want them:
``opsight run --export prometheus=...`` of a program that reads a known number of bytes
serves ``opsight_process_io_read_bytes_total`` (a counter of bytes, the sampler's
``process.io_read_bytes_per_s`` integrated over its sampling intervals), not a ``_per_s``
gauge; ``promtool check metrics`` finds nothing to lint, and the counter holds at least the
bytes the program read (and not much more: Python's own start-up reads a few MB)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
import time

from real_servers import http_request, promtool_check_metrics

READS = 8
FILE_BYTES = 16 << 20

PROGRAM = textwrap.dedent("""
    import os, sys, time
    path, release = sys.argv[1], sys.argv[2]
    time.sleep(0.3)  # a few samples before the reads
    for _ in range(READS):
        with open(path, "rb", buffering=0) as file:
            while file.read(1 << 20):
                pass
        time.sleep(0.05)
    time.sleep(0.3)  # and a few after: the last rate sample covers the last read
    print("done", flush=True)
    deadline = time.monotonic() + 60
    while not os.path.exists(release) and time.monotonic() < deadline:
        time.sleep(0.05)
""").replace("READS", str(READS))


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_live_rates_are_counters_of_their_unit_that_promtool_accepts(tmp_path):
    data = tmp_path / "data.bin"
    data.write_bytes(os.urandom(FILE_BYTES))
    script = tmp_path / "reader.py"
    script.write_text(PROGRAM)
    port = _free_port()
    run = subprocess.Popen(
        [sys.executable, "-m", "opsight", "run", "--no-store", "--report", "none", "-o",
         str(tmp_path / "reader.opsight"), "--sample-ms", "50", "--export",
         f"prometheus=127.0.0.1:{port}", "--", sys.executable, str(script), str(data),
         str(tmp_path / "release")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert run.stdout.readline() == "done\n"
        time.sleep(0.2)  # a sample after the last read has reached the file
        status, body = http_request(f"http://127.0.0.1:{port}/metrics", timeout=10)
        assert status == 200
        text = body.decode()
    finally:
        (tmp_path / "release").touch()
        _, stderr = run.communicate(timeout=60)
    assert run.returncode == 0, stderr

    assert "_per_s" not in text, text
    checked = promtool_check_metrics(text)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "# TYPE opsight_process_io_read_bytes_total counter" in text
    samples = [line for line in text.splitlines()
               if line.startswith("opsight_process_io_read_bytes_total{")]
    assert len(samples) == 1, text  # the program's process (opsight run's own is not sampled)
    total = float(samples[0].rsplit(" ", 1)[1])
    read = READS * FILE_BYTES
    assert read <= total <= read + (48 << 20), (total, read)
