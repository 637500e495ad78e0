"""The export soak (docs/export.md, *Soak*): a program records spans at a steady rate for
minutes under ``opsight run --export-live`` to a real Jaeger that is restarted every
minute; nothing may be lost that the export's bounds did not force it to drop.

- **The program**: requests of SPANS_PER_REQUEST spans (a request span and its children),
  each request a trace of its own (``opsight.propagation.continue_trace`` with a fresh
  ``traceparent``), paced to ``--rate`` spans per second for ``--minutes``.
- **The collector**: Jaeger v2 from ``~/.cache/opsight/servers`` (scripts/servers/install.sh),
  memory storage, behind a TCP gate (``real_servers.TcpGate``). Every ``--restart-every``
  seconds the gate closes (connections refused, open ones cut: the collector is down for
  the exporter), the receiver's own count of accepted spans
  (``otelcol_receiver_accepted_spans_total``) is read, Jaeger is restarted (SIGTERM, then
  started again on the same ports) and the gate opens. The sum of the counts over its
  lifetimes is what reached the collector (at least once: a batch whose answer was cut off
  is sent again, and counted twice there).
- **Printed**: spans recorded (the run's file), sent and dropped (``opsight run``'s line),
  accepted by Jaeger, restarts and how long each one kept the port closed, the export's
  lag at the end (how long ``opsight run`` took after the program ended: the last sends,
  then merging the run's files into its output), and the peak RSS of the ``opsight run``
  process while the program ran (the live exporter's memory: queue and reading) and after.

    .venv/bin/python benchmarks/python/export_soak.py [--minutes 10] [--rate 100000] \\
        [--restart-every 60]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "integration"))
import real_servers  # noqa: E402  (the tests' server management: same binaries, same config)

SPANS_PER_REQUEST = 10

PROGRAM = textwrap.dedent("""
    import json, os, sys, time
    import opsight
    from opsight.propagation import continue_trace

    rate, seconds, per_request = float(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
    requests_per_second = rate / per_request
    start = time.monotonic()
    made = 0
    while True:
        elapsed = time.monotonic() - start
        if elapsed >= seconds:
            break
        due = int(elapsed * requests_per_second) + 1
        while made < due:
            header = f"00-{os.urandom(16).hex()}-{os.urandom(8).hex()}-01"
            with opsight.span("request", index=made):
                with continue_trace({"traceparent": header}):
                    for step in range(per_request - 1):
                        with opsight.span("step", step=step):
                            pass
            made += 1
        time.sleep(0.005)
    print(json.dumps({"requests": made, "ended": time.monotonic()}), flush=True)
""")


def rss_kib(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--minutes", type=float, default=10)
    parser.add_argument("--rate", type=float, default=100_000, help="spans per second")
    parser.add_argument("--restart-every", type=float, default=60, help="seconds")
    options = parser.parse_args()
    seconds = options.minutes * 60

    with real_servers.jaeger() as jaeger, tempfile.TemporaryDirectory() as folder:
        gate = real_servers.TcpGate(jaeger.otlp_http_port)
        gate.open()
        script = Path(folder) / "program.py"
        script.write_text(PROGRAM)
        output = Path(folder) / "soak.opsight"
        run = subprocess.Popen(
            [sys.executable, "-m", "opsight", "run", "--no-store", "--report", "none", "-o",
             str(output), "--export-live", "--export", f"otlp={gate.url}",
             "--service", "soak", "--", sys.executable, str(script), str(options.rate),
             str(seconds), str(SPANS_PER_REQUEST)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        rss_samples: list[tuple[float, int]] = []  # (monotonic time, KiB)
        stop_watching = threading.Event()

        def watch_memory() -> None:
            while not stop_watching.wait(0.5):
                rss_samples.append((time.monotonic(), rss_kib(run.pid)))

        threading.Thread(target=watch_memory, daemon=True).start()
        accepted_before_restarts = 0
        downtimes = []
        started = time.monotonic()
        next_restart = started + options.restart_every
        while run.poll() is None:
            time.sleep(0.2)
            if time.monotonic() >= next_restart and time.monotonic() - started < seconds:
                down_at = time.monotonic()
                gate.close()
                time.sleep(0.2)  # requests under way when the gate closed have ended
                accepted_before_restarts += jaeger.accepted_spans()
                jaeger.restart()
                gate.open()
                downtimes.append(time.monotonic() - down_at)
                print(f"  {time.monotonic() - started:6.0f} s: Jaeger restarted "
                      f"(port closed {downtimes[-1]:.1f} s)", flush=True)
                next_restart += options.restart_every
        stdout, stderr = run.communicate()
        finished = time.monotonic()
        stop_watching.set()
        # What the last lifetime took: let the receiver's count settle.
        time.sleep(1)
        accepted = accepted_before_restarts + jaeger.accepted_spans()
        gate.close()
        if run.returncode != 0:
            print(stderr, file=sys.stderr)
            return 1
        program = json.loads(stdout.strip().splitlines()[-1])
        import opsight._native as native

        recorded = native.read_trace(str(output)).run_info()["slices"]
    line = re.search(r"exported (\d+) of (\d+) spans[^\n]*", stderr)
    sent = int(line.group(1)) if line else None
    dropped = re.search(r"; (\d+) dropped", line.group(0)) if line else None
    print(f"{options.minutes:g} min at {options.rate:,.0f} spans/s "
          f"({SPANS_PER_REQUEST} spans per request, a trace each), Jaeger restarted every "
          f"{options.restart_every:g} s")
    print(f"  spans recorded (file)        {recorded:,}")
    print(f"  spans sent (2xx)             {sent:,}" if sent is not None else "  sent: no line")
    print(f"  spans dropped                {int(dropped.group(1)) if dropped else 0:,}")
    print(f"  spans accepted by Jaeger     {accepted:,} ({accepted - (sent or 0):,} twice: a "
          "batch whose answer a restart cut off is sent again)")
    print(f"  achieved rate                {recorded / seconds:,.0f} spans/s "
          f"({program['requests']:,} requests)")
    print(f"  restarts                     {len(downtimes)}, port closed "
          f"{min(downtimes, default=0):.1f}-{max(downtimes, default=0):.1f} s each")
    print(f"  opsight run after the end    {finished - program['ended']:.1f} s")
    running = [kib for at, kib in rss_samples if at < program["ended"]]
    after = [kib for at, kib in rss_samples if at >= program["ended"]]
    print(f"  opsight run peak RSS         {max(running, default=0) / 1024:.0f} MiB while the "
          f"program ran, {max(after, default=0) / 1024:.0f} MiB after (merging the run)")
    print(f"  opsight run said: {line.group(0) if line else stderr.strip()[-300:]}")
    return 0 if sent == recorded and accepted >= recorded else 1


if __name__ == "__main__":
    sys.exit(main())
