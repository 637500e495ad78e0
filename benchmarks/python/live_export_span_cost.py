"""What a span costs the traced program's thread while its spans stream out (docs/export.md,
*Speed*): the same program under ``opsight run`` with ``--export-live`` to a real Jaeger
and without export, in interleaved rounds.

The program times SPANS empty spans (``with opsight.span("step"): pass``) in a loop, by
the wall clock (``time.perf_counter_ns``) and by its thread's CPU time
(``time.thread_time_ns``), and prints the cost per span of each. The export runs in the
``opsight run`` process, which follows the program's file, so the program's thread does
no export work: its CPU time per span should not change. Its wall time can: on a machine
with few cores the exporter and the collector take cores the program would otherwise
have. Medians over rounds, and the ratios to recording alone.

    .venv/bin/python benchmarks/python/live_export_span_cost.py [--spans 1000000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "integration"))
import real_servers  # noqa: E402  (the tests' server management: same binaries, same config)

PROGRAM = textwrap.dedent("""
    import json, sys, time
    import opsight

    spans = int(sys.argv[1])
    span = opsight.span
    start, start_cpu = time.perf_counter_ns(), time.thread_time_ns()
    for _ in range(spans):
        with span("step"):
            pass
    elapsed, cpu = time.perf_counter_ns() - start, time.thread_time_ns() - start_cpu
    print(json.dumps({"wall": elapsed / spans, "cpu": cpu / spans}), flush=True)
""")


def run_once(script: Path, folder: str, spans: int, export: str | None) -> dict:
    command = [sys.executable, "-m", "opsight", "run", "--no-store", "--report", "none", "-o",
               str(Path(folder) / "out.opsight")]
    if export:
        command += ["--export-live", "--export", export]
    done = subprocess.run(command + ["--", sys.executable, str(script), str(spans)],
                          capture_output=True, text=True, timeout=600)
    if done.returncode != 0 or (export and "dropped" in done.stderr):
        raise SystemExit(f"opsight run failed or dropped: {done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--spans", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=5)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder, real_servers.jaeger(store=False) as jaeger:
        script = Path(folder) / "program.py"
        script.write_text(PROGRAM)
        variants = {"recording alone": None,
                    "live export to Jaeger": f"otlp={jaeger.otlp_http_endpoint}"}
        results: dict[str, list[dict]] = {name: [] for name in variants}
        for round_index in range(options.rounds):
            order = list(variants) if round_index % 2 == 0 else list(reversed(variants))
            for name in order:
                results[name].append(run_once(script, folder, options.spans, variants[name]))
    print(f"{options.spans:,} empty Python spans per run, {options.rounds} interleaved rounds, "
          f"medians, on {os.cpu_count()} cores")
    for clock in ("wall", "cpu"):
        base = statistics.median(row[clock] for row in results["recording alone"])
        for name, rows in results.items():
            values = [row[clock] for row in rows]
            median = statistics.median(values)
            print(f"  {clock:<4} {name:<24} {median:7.1f} ns/span  {median / base:6.3f}x  "
                  f"(rounds {min(values):.1f}-{max(values):.1f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
