"""What a traced program pays when its export target misbehaves (docs/export.md, *Faults*).

A program does ITERATIONS requests, each a span around a fixed amount of CPU work, and
records each request's latency itself. It runs under ``opsight run`` with live span export
(``--export-live``) to an OTLP receiver that is:

- **healthy**: it answers 200;
- **down**: nobody listens;
- **slow**: 2 s per request;
- **503**: it always answers 503;
- **429**: it answers 429 with Retry-After: 1.

The baseline is the same program under ``opsight run`` without export, measured in the
same run. Rounds are interleaved (every round runs every scenario, in reversed order every
other round), and the figures are medians over rounds.

Printed for each scenario:
- the request latency p50 and p99, and the p99's ratio to the baseline's;
- the spans recorded, sent and dropped (sent + dropped must equal recorded);
- how long ``opsight run`` took after the program ended: the export's bounded flush.

The receiver is a small HTTP server in this script, so that its failures can be chosen. The
exporters' correctness against real servers is proven in tests/integration.

    .venv/bin/python benchmarks/python/export_faults.py [--iterations 3000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import http.server
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import textwrap
import threading
import time

PROGRAM = textwrap.dedent("""
    import json, sys, time, opsight
    iterations = int(sys.argv[1])
    latencies = []
    for i in range(iterations):
        start = time.perf_counter_ns()
        with opsight.span("request", index=i):
            with opsight.span("model"):
                end = time.perf_counter_ns() + 200_000   # 0.2 ms of work
                while time.perf_counter_ns() < end:
                    pass
        latencies.append(time.perf_counter_ns() - start)
    print(json.dumps({"latencies": latencies, "ended": time.monotonic()}), flush=True)
""")


class Receiver(http.server.ThreadingHTTPServer):
    daemon_threads = True


def make_handler(mode: str):
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 - the handler's name
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            if mode == "slow":
                time.sleep(2)
            status = {"503": 503, "429": 429}.get(mode, 200)
            self.send_response(status)
            if status == 429:
                self.send_header("Retry-After", "1")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args):
            pass

    return Handler


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def run_scenario(mode: str, iterations: int, folder: str) -> dict:
    server = None
    port = free_port()
    if mode not in ("baseline", "down"):
        server = Receiver(("127.0.0.1", port), make_handler(mode))
        threading.Thread(target=server.serve_forever, daemon=True).start()
    script = os.path.join(folder, "program.py")
    with open(script, "w") as file:
        file.write(PROGRAM)
    command = [sys.executable, "-m", "opsight", "run", "--no-store", "--report", "none",
               "-o", os.path.join(folder, f"{mode}.opsight")]
    if mode != "baseline":
        # The faulty servers drop spans on purpose: keep the program's exit status.
        command += ["--export-live", "--allow-export-drops", "--export",
                    f"otlp=http://127.0.0.1:{port}"]
    try:
        done = subprocess.run(command + ["--", sys.executable, script, str(iterations)],
                              capture_output=True, text=True, timeout=600)
        finished = time.monotonic()
    finally:
        if server is not None:
            server.shutdown()
    if done.returncode != 0:
        raise SystemExit(f"{mode}: opsight run failed: {done.stderr}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    latencies = sorted(result["latencies"])
    sent = dropped = recorded = None
    match = re.search(r"exported (\d+) of (\d+) spans[^\n]*", done.stderr)
    if match:
        sent, recorded = int(match.group(1)), int(match.group(2))
        lost = re.search(r"; (\d+) dropped", match.group(0))
        dropped = int(lost.group(1)) if lost else 0
    return {"p50": latencies[len(latencies) // 2], "p99": latencies[int(len(latencies) * 0.99)],
            "tail_s": finished - result["ended"], "sent": sent, "dropped": dropped,
            "recorded": recorded}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--iterations", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=3)
    options = parser.parse_args()
    scenarios = ["baseline", "healthy", "down", "slow", "503", "429"]
    results: dict[str, list[dict]] = {name: [] for name in scenarios}
    with tempfile.TemporaryDirectory() as folder:
        for round_index in range(options.rounds):
            order = scenarios if round_index % 2 == 0 else list(reversed(scenarios))
            for name in order:
                results[name].append(run_scenario(name, options.iterations, folder))
    baseline_p99 = statistics.median(r["p99"] for r in results["baseline"])
    print(f"{options.iterations} requests (2 spans each, 0.2 ms of work), {options.rounds} "
          f"interleaved rounds, medians")
    print(f"{'scenario':<10} {'p50 us':>8} {'p99 us':>8} {'p99/base':>9} {'recorded':>9} "
          f"{'sent':>7} {'dropped':>8} {'exact':>6} {'after end s':>11}")
    for name in scenarios:
        rows = results[name]
        p50 = statistics.median(r["p50"] for r in rows) / 1e3
        p99 = statistics.median(r["p99"] for r in rows) / 1e3
        tail = statistics.median(r["tail_s"] for r in rows)
        last = rows[-1]
        exact = ("-" if last["recorded"] is None else
                 "yes" if all(r["sent"] + r["dropped"] == r["recorded"] for r in rows) else "NO")
        print(f"{name:<10} {p50:>8.1f} {p99:>8.1f} {p99 * 1e3 / baseline_p99:>9.3f} "
              f"{last['recorded'] if last['recorded'] is not None else '-':>9} "
              f"{last['sent'] if last['sent'] is not None else '-':>7} "
              f"{last['dropped'] if last['dropped'] is not None else '-':>8} {exact:>6} "
              f"{tail:>11.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
